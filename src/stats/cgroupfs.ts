/**
 * Pure parsers for cgroup v1 and v2 stat files, and the two functions that
 * turn one cgroup's files into the same normalized numbers whatever the
 * version. Semantics follow runc's libcontainer (fs and fs2) and cAdvisor,
 * which the upstream kubelet reads through:
 * - working set = usage - inactive_file (v1: total_inactive_file), never
 *   below zero;
 * - v1 reads the hierarchical `total_*` keys of memory.stat when present;
 * - v2 root has no memory.current: usage = anon + file from memory.stat
 *   (runc fs2 rootStatsFromMeminfo does the same);
 * - a limit above 2^62 is "unlimited" (cAdvisor isMemoryUnlimited): the
 *   kernel's v1 "no limit" is PAGE_COUNTER_MAX pages, not a round number.
 */

import type { PsiData, PsiStats } from "./types.ts";

/** Lines of `key value` (cpu.stat, memory.stat, memory.events, memory.oom_control, pids.events). */
export function parseFlatKeyed(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const sp = line.indexOf(" ");
    if (sp <= 0) continue;
    const v = Number(line.slice(sp + 1).trim());
    if (Number.isFinite(v)) out.set(line.slice(0, sp), v);
  }
  return out;
}

/** A one-number file (memory.current, cpuacct.usage, pids.current); "max" and junk are undefined. */
export function parseSingleValue(text: string): number | undefined {
  const t = text.trim();
  if (t === "" || t === "max") return undefined;
  const v = Number(t);
  return Number.isFinite(v) ? v : undefined;
}

const UNLIMITED_ABOVE = 2 ** 62;

/** A memory limit file (v1 memory.limit_in_bytes, v2 memory.max); undefined means unlimited. */
export function parseMemoryLimit(text: string): number | undefined {
  const v = parseSingleValue(text);
  return v === undefined || v > UNLIMITED_ABOVE ? undefined : v;
}

export interface IoBytes {
  readBytes: number;
  writeBytes: number;
}

/** One block device's bytes, by its `major:minor` (cAdvisor's PerDiskStats of IoServiceBytes). */
export interface DeviceIoBytes extends IoBytes {
  major: number;
  minor: number;
}

/** v2 io.stat per device (rbytes, wbytes). */
export function parseIoStatByDevice(text: string): DeviceIoBytes[] {
  const out: DeviceIoBytes[] = [];
  for (const line of text.split("\n")) {
    const [dev, ...kvs] = line.trim().split(/\s+/);
    const m = /^(\d+):(\d+)$/.exec(dev ?? "");
    if (!m) continue;
    const d = { major: Number(m[1]), minor: Number(m[2]), readBytes: 0, writeBytes: 0 };
    for (const kv of kvs) {
      const [k, v] = kv.split("=");
      const n = Number(v);
      if (!Number.isFinite(n)) continue;
      if (k === "rbytes") d.readBytes = n;
      else if (k === "wbytes") d.writeBytes = n;
    }
    out.push(d);
  }
  return out;
}

/** v1 blkio.throttle.io_service_bytes per device (Read, Write lines). */
export function parseBlkioByDevice(text: string): DeviceIoBytes[] {
  const byDev = new Map<string, DeviceIoBytes>();
  for (const line of text.split("\n")) {
    const [dev, op, v] = line.trim().split(/\s+/);
    const m = /^(\d+):(\d+)$/.exec(dev ?? "");
    if (!m || v === undefined) continue;
    const n = Number(v);
    if (!Number.isFinite(n)) continue;
    let d = byDev.get(dev!);
    if (!d) byDev.set(dev!, (d = { major: Number(m[1]), minor: Number(m[2]), readBytes: 0, writeBytes: 0 }));
    if (op === "Read") d.readBytes = n;
    else if (op === "Write") d.writeBytes = n;
  }
  return [...byDev.values()];
}

/**
 * The limits a cgroup enforces, as cAdvisor's ContainerSpec reads them:
 * CFS period and quota in microseconds (quota 0: none), shares (v2:
 * cpu.weight converted back to shares), memory limit (undefined: none).
 */
export interface CgroupSpec {
  cpuPeriodUs?: number;
  cpuQuotaUs?: number;
  cpuShares?: number;
  /**
   * The memory limits, set only when the cgroup has the memory controller
   * (v2: a memory.max file, so not the root), as cAdvisor's HasMemory;
   * "max" or above 2^62 is 0 (specMemoryValue). Limit: v1
   * memory.limit_in_bytes, v2 memory.max.
   */
  memoryLimitBytes?: number;
  /** v1 memory.memsw.limit_in_bytes (memory + swap; 0 without swap accounting), v2 memory.swap.max. */
  memorySwapLimitBytes?: number;
  /** v1 memory.soft_limit_in_bytes, v2 memory.min. */
  memoryReservationBytes?: number;
}

/**
 * A memory spec value as cAdvisor reads and exports it: a missing file or
 * junk is 0 (readUInt64), "max" and anything above 2^62 is 0
 * (specMemoryValue: "unlimited").
 */
export function specMemoryValue(text: string | undefined): number {
  if (text === undefined) return 0;
  const v = parseSingleValue(text);
  return v === undefined || v > UNLIMITED_ABOVE ? 0 : v;
}

/** v1 cpu.cfs_period_us, cpu.cfs_quota_us (-1: no quota) and cpu.shares. */
export function cpuSpecFromV1(period: string | undefined, quota: string | undefined, shares: string | undefined): CgroupSpec {
  const out: CgroupSpec = {};
  const p = period !== undefined ? parseSingleValue(period) : undefined;
  if (p !== undefined) out.cpuPeriodUs = p;
  const q = quota !== undefined ? Number(quota.trim()) : NaN;
  if (Number.isFinite(q)) out.cpuQuotaUs = Math.max(0, q);
  const s = shares !== undefined ? parseSingleValue(shares) : undefined;
  if (s !== undefined) out.cpuShares = s;
  return out;
}

/**
 * v2 cpu.max (`max 100000` or `50000 100000`) and cpu.weight, which
 * cAdvisor turns back into shares with the inverse of runc's
 * shares-to-weight formula: 2 + (weight - 1) * 262142 / 9999.
 */
export function cpuSpecFromV2(max: string | undefined, weight: string | undefined): CgroupSpec {
  const out: CgroupSpec = {};
  if (max !== undefined) {
    const [q, p] = max.trim().split(/\s+/);
    const period = Number(p);
    if (Number.isFinite(period)) out.cpuPeriodUs = period;
    out.cpuQuotaUs = q === "max" || q === undefined ? 0 : Number(q) || 0;
  }
  const w = weight !== undefined ? parseSingleValue(weight) : undefined;
  if (w !== undefined) out.cpuShares = Math.floor(2 + ((w - 1) * 262142) / 9999);
  return out;
}

/** v2 io.stat: `MAJ:MIN rbytes=.. wbytes=.. rios=.. wios=.. dbytes=.. dios=..`, summed over devices. */
export function parseIoStat(text: string): IoBytes {
  const out = { readBytes: 0, writeBytes: 0 };
  for (const line of text.split("\n")) {
    for (const kv of line.trim().split(/\s+/).slice(1)) {
      const [k, v] = kv.split("=");
      const n = Number(v);
      if (!Number.isFinite(n)) continue;
      if (k === "rbytes") out.readBytes += n;
      else if (k === "wbytes") out.writeBytes += n;
    }
  }
  return out;
}

/** v1 blkio.throttle.io_service_bytes: `MAJ:MIN Read|Write|Sync|Async|Discard|Total N`, then `Total N`. */
export function parseBlkioServiceBytes(text: string): IoBytes {
  const out = { readBytes: 0, writeBytes: 0 };
  for (const line of text.split("\n")) {
    const [dev, op, v] = line.trim().split(/\s+/);
    if (!dev?.includes(":") || v === undefined) continue;
    const n = Number(v);
    if (!Number.isFinite(n)) continue;
    if (op === "Read") out.readBytes += n;
    else if (op === "Write") out.writeBytes += n;
  }
  return out;
}

export interface CgroupCpu {
  /** Cumulative CPU time of every task in the cgroup and its children. */
  usageNanoseconds: number;
  nrPeriods?: number;
  nrThrottled?: number;
  throttledNanoseconds?: number;
  /** User and system CPU time (v1 cpuacct.stat in USER_HZ ticks, v2 cpu.stat user_usec / system_usec). */
  userNanoseconds?: number;
  systemNanoseconds?: number;
}

export interface CgroupMemory {
  usageBytes: number;
  workingSetBytes: number;
  rssBytes?: number;
  pageFaults?: number;
  majorPageFaults?: number;
  /** undefined: no limit (or the root, which has none). */
  limitBytes?: number;
  oomKills?: number;
  /** Page cache (v1 total_cache, v2 file). */
  cacheBytes?: number;
  /** Mapped files (v1 total_mapped_file, v2 file_mapped). */
  mappedFileBytes?: number;
  /** Swap in use (v1 total_swap, v2 memory.swap.current). */
  swapBytes?: number;
  /** Times the limit was hit (v1 memory.failcnt, v2 memory.events max). */
  failcnt?: number;
  /**
   * memory.stat's own `pgfault` / `pgmajfault` keys (v1: this cgroup's
   * tasks only; v2: hierarchical), which cAdvisor reports for both its
   * "container" and "hierarchy" scopes. Read with the `detail` option.
   */
  statPgfault?: number;
  statPgmajfault?: number;
  /** Active and inactive file pages (v1 total_active_file / total_inactive_file, v2 active_file / inactive_file). */
  activeFileBytes?: number;
  inactiveFileBytes?: number;
  /** Kernel memory (v1 memory.kmem.usage_in_bytes, v2 memory.stat `kernel`, kernel 5.18+). Read with the `detail` option. */
  kernelBytes?: number;
  /** Peak usage (v1 memory.max_usage_in_bytes, v2 memory.peak, kernel 5.19+). Read with the `detail` option. */
  maxUsageBytes?: number;
}

export interface CgroupStats {
  cpu?: CgroupCpu;
  memory?: CgroupMemory;
  io?: IoBytes;
  /** Per device; read with the `detail` option. */
  ioByDevice?: DeviceIoBytes[];
  /** Limits; read with the `detail` option. */
  spec?: CgroupSpec;
  /** Processes in the cgroup itself (cgroup.procs lines); read with the `detail` option. */
  processes?: number;
  /** pids.max; undefined when "max". Read with the `detail` option. */
  pidsMax?: number;
  /** Tasks (threads) in the cgroup and below: pids.current. */
  pids?: number;
  /** cpu.pressure, memory.pressure, io.pressure (v2); read with the `psi` option, each when its file exists. */
  psi?: CgroupPressure;
  /** The process ids of cgroup.procs (the cgroup itself, not below); read with the `detail` option. */
  processIds?: number[];
}

export interface CgroupPressure {
  cpu?: PsiStats;
  memory?: PsiStats;
  io?: PsiStats;
}

/**
 * A pressure file (cgroup v2 `*.pressure`, `/proc/pressure/*`):
 *   some avg10=0.12 avg60=0.05 avg300=0.01 total=123456
 *   full avg10=0.00 avg60=0.00 avg300=0.00 total=7890
 * A missing line (the system-wide cpu file before kernel 5.13 has no `full`)
 * is all zeros; undefined when neither line parses.
 */
export function parsePressure(text: string): PsiStats | undefined {
  const zero = (): PsiData => ({ total: 0, avg10: 0, avg60: 0, avg300: 0 });
  const out: PsiStats = { some: zero(), full: zero() };
  let found = false;
  for (const line of text.split("\n")) {
    const [kind, ...fields] = line.trim().split(/\s+/);
    if (kind !== "some" && kind !== "full") continue;
    const data = zero();
    let complete = true;
    for (const key of ["avg10", "avg60", "avg300", "total"] as const) {
      const f = fields.find((w) => w.startsWith(`${key}=`));
      const v = f === undefined ? Number.NaN : Number(f.slice(key.length + 1));
      if (!Number.isFinite(v)) complete = false;
      else data[key] = v;
    }
    if (!complete) continue;
    out[kind] = data;
    found = true;
  }
  return found ? out : undefined;
}

const workingSet = (usage: number, inactiveFile: number | undefined) => Math.max(0, usage - (inactiveFile ?? 0));

/** v2 cpu.stat (usage_usec, nr_periods, nr_throttled, throttled_usec). */
export function cpuFromV2(cpuStat: string): CgroupCpu | undefined {
  const s = parseFlatKeyed(cpuStat);
  const usage = s.get("usage_usec");
  if (usage === undefined) return undefined;
  const throttled = s.get("throttled_usec");
  return {
    usageNanoseconds: usage * 1000,
    nrPeriods: s.get("nr_periods"),
    nrThrottled: s.get("nr_throttled"),
    throttledNanoseconds: throttled === undefined ? undefined : throttled * 1000,
    ...usecPair(s.get("user_usec"), s.get("system_usec")),
  };
}

function usecPair(user: number | undefined, system: number | undefined): Pick<CgroupCpu, "userNanoseconds" | "systemNanoseconds"> {
  return { ...(user !== undefined ? { userNanoseconds: user * 1000 } : {}), ...(system !== undefined ? { systemNanoseconds: system * 1000 } : {}) };
}

/** v1 cpuacct.usage (ns), cpu.stat (nr_periods, nr_throttled, throttled_time in ns) and cpuacct.stat (user, system in USER_HZ ticks). */
export function cpuFromV1(cpuacctUsage: string, cpuStat: string | undefined, cpuacctStat?: string, userHz = 100): CgroupCpu | undefined {
  const usage = parseSingleValue(cpuacctUsage);
  if (usage === undefined) return undefined;
  const s = parseFlatKeyed(cpuStat ?? "");
  const t = parseFlatKeyed(cpuacctStat ?? "");
  const ticks = (k: string) => {
    const v = t.get(k);
    return v === undefined ? undefined : (v * 1e9) / userHz;
  };
  const user = ticks("user");
  const system = ticks("system");
  return {
    usageNanoseconds: usage,
    nrPeriods: s.get("nr_periods"),
    nrThrottled: s.get("nr_throttled"),
    throttledNanoseconds: s.get("throttled_time"),
    ...(user !== undefined ? { userNanoseconds: user } : {}),
    ...(system !== undefined ? { systemNanoseconds: system } : {}),
  };
}

export interface V2MemoryFiles {
  /** undefined at the root, which has no memory.current. */
  current?: string;
  stat: string;
  max?: string;
  events?: string;
  swapCurrent?: string;
  peak?: string;
}

export function memoryFromV2(f: V2MemoryFiles): CgroupMemory | undefined {
  const s = parseFlatKeyed(f.stat);
  const events = f.events !== undefined ? parseFlatKeyed(f.events) : undefined;
  const usage = f.current !== undefined ? parseSingleValue(f.current) : sumDefined(s.get("anon"), s.get("file"));
  if (usage === undefined) return undefined;
  return {
    usageBytes: usage,
    workingSetBytes: workingSet(usage, s.get("inactive_file")),
    rssBytes: s.get("anon"),
    pageFaults: s.get("pgfault"),
    majorPageFaults: s.get("pgmajfault"),
    limitBytes: f.max !== undefined ? parseMemoryLimit(f.max) : undefined,
    oomKills: events?.get("oom_kill"),
    cacheBytes: s.get("file"),
    mappedFileBytes: s.get("file_mapped"),
    swapBytes: f.swapCurrent !== undefined ? parseSingleValue(f.swapCurrent) : undefined,
    failcnt: events?.get("max"),
    statPgfault: s.get("pgfault"),
    statPgmajfault: s.get("pgmajfault"),
    activeFileBytes: s.get("active_file"),
    inactiveFileBytes: s.get("inactive_file"),
    kernelBytes: s.get("kernel"),
    maxUsageBytes: f.peak !== undefined ? parseSingleValue(f.peak) : undefined,
  };
}

export interface V1MemoryFiles {
  usage: string;
  stat: string;
  limit?: string;
  oomControl?: string;
  failcnt?: string;
  kmemUsage?: string;
  maxUsage?: string;
}

export function memoryFromV1(f: V1MemoryFiles): CgroupMemory | undefined {
  const usage = parseSingleValue(f.usage);
  if (usage === undefined) return undefined;
  const s = parseFlatKeyed(f.stat);
  // Hierarchical totals when the kernel has them (use_hierarchy, always on
  // since 5.x); runc reads total_* in that case too.
  const key = (k: string) => s.get(`total_${k}`) ?? s.get(k);
  return {
    usageBytes: usage,
    workingSetBytes: workingSet(usage, key("inactive_file")),
    rssBytes: key("rss"),
    pageFaults: key("pgfault"),
    majorPageFaults: key("pgmajfault"),
    limitBytes: f.limit !== undefined ? parseMemoryLimit(f.limit) : undefined,
    oomKills: f.oomControl !== undefined ? parseFlatKeyed(f.oomControl).get("oom_kill") : undefined,
    cacheBytes: key("cache"),
    mappedFileBytes: key("mapped_file"),
    swapBytes: key("swap"),
    failcnt: f.failcnt !== undefined ? parseSingleValue(f.failcnt) : undefined,
    statPgfault: s.get("pgfault"),
    statPgmajfault: s.get("pgmajfault"),
    activeFileBytes: s.get("total_active_file"),
    inactiveFileBytes: s.get("total_inactive_file"),
    kernelBytes: f.kmemUsage !== undefined ? parseSingleValue(f.kmemUsage) : undefined,
    maxUsageBytes: f.maxUsage !== undefined ? parseSingleValue(f.maxUsage) : undefined,
  };
}

function sumDefined(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined && b === undefined ? undefined : (a ?? 0) + (b ?? 0);
}
