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
}

export interface CgroupStats {
  cpu?: CgroupCpu;
  memory?: CgroupMemory;
  io?: IoBytes;
  /** Tasks (threads) in the cgroup and below: pids.current. */
  pids?: number;
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
  };
}

/** v1 cpuacct.usage (ns) and cpu.stat (nr_periods, nr_throttled, throttled_time in ns). */
export function cpuFromV1(cpuacctUsage: string, cpuStat: string | undefined): CgroupCpu | undefined {
  const usage = parseSingleValue(cpuacctUsage);
  if (usage === undefined) return undefined;
  const s = parseFlatKeyed(cpuStat ?? "");
  return { usageNanoseconds: usage, nrPeriods: s.get("nr_periods"), nrThrottled: s.get("nr_throttled"), throttledNanoseconds: s.get("throttled_time") };
}

export interface V2MemoryFiles {
  /** undefined at the root, which has no memory.current. */
  current?: string;
  stat: string;
  max?: string;
  events?: string;
}

export function memoryFromV2(f: V2MemoryFiles): CgroupMemory | undefined {
  const s = parseFlatKeyed(f.stat);
  const usage = f.current !== undefined ? parseSingleValue(f.current) : sumDefined(s.get("anon"), s.get("file"));
  if (usage === undefined) return undefined;
  return {
    usageBytes: usage,
    workingSetBytes: workingSet(usage, s.get("inactive_file")),
    rssBytes: s.get("anon"),
    pageFaults: s.get("pgfault"),
    majorPageFaults: s.get("pgmajfault"),
    limitBytes: f.max !== undefined ? parseMemoryLimit(f.max) : undefined,
    oomKills: f.events !== undefined ? parseFlatKeyed(f.events).get("oom_kill") : undefined,
  };
}

export interface V1MemoryFiles {
  usage: string;
  stat: string;
  limit?: string;
  oomControl?: string;
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
  };
}

function sumDefined(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined && b === undefined ? undefined : (a ?? 0) + (b ?? 0);
}
