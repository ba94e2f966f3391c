/**
 * The node part of the Summary, read from procfs, the root cgroup and
 * statfs. Each part is read on its own: a part that fails is left out and
 * its error handed back for the caller to log, the others are kept.
 *
 * Where the numbers come from, and how that compares with upstream
 * (cAdvisor's root container "/"):
 * - cpu: /proc/stat, busy jiffies of all cores (user nice system irq
 *   softirq steal) in nanoseconds; upstream reads the root cgroup's
 *   cpuacct. Same quantity, in 10 ms ticks.
 * - memory: the root cgroup, as upstream, so `availableBytes` is the
 *   number the eviction manager's memory.available uses there:
 *   MemTotal - (usage - inactive_file). v1: root memory.usage_in_bytes and
 *   memory.stat total_*; v2 (no memory.current at the root): anon + file
 *   from the root memory.stat, as runc does. When the root cgroup cannot be
 *   read: MemTotal - MemFree for usage and MemTotal - MemAvailable for the
 *   working set, from /proc/meminfo.
 * - network: /proc/net/dev of the agent's network namespace without
 *   loopback and veth (cAdvisor's filter); the top-level counters are the
 *   IPv4 default-route interface's (upstream hard-codes "eth0", which is
 *   also the fallback here).
 * - fs: statfs of the kubelet root directory (nodefs).
 * - rlimit: maxpid is the smaller of kernel.pid_max and kernel.threads-max
 *   (both cap the tasks the system can have), curproc the kernel's thread
 *   count from /proc/loadavg, as upstream's pidlimit.Stats.
 * - psi (KubeletPSI, cgroup v2): the root cgroup's cpu/memory/io.pressure,
 *   which the kernel serves system-wide as /proc/pressure/* (read there when
 *   the root has no such files).
 */
import { join } from "node:path";
import type { CgroupReader } from "./cgroup-reader.ts";
import { readIfExists } from "./cgroup-reader.ts";
import { toFsStats, type FsInfo } from "./fs.ts";
import { cpuBusyNanoseconds, parseDefaultRouteInterface, parseLoadavg, parseMeminfo, parsePidMax, parseProcStat, reportedInterfaces } from "./procfs.ts";
import type { CpuRates } from "./rate.ts";
import { attempt, cpuStats, memoryStats, withPressure, type PartError } from "./convert.ts";
import { parsePressure, type CgroupPressure } from "./cgroupfs.ts";
import type { ContainerStats, MemoryStats, NetworkStats, NodeStats } from "./types.ts";

/** What upstream calls the default interface when nothing better is known. */
export const FALLBACK_INTERFACE = "eth0";

export interface NodeReadContext {
  nodeName: string;
  fsRoot: string;
  /** nodefs: the kubelet root directory. */
  rootDir: string;
  /** The pods parent cgroup, reported as system container "pods". */
  podsCgroup: string;
  cgroups: CgroupReader;
  rates: CpuRates;
  nowMs: number;
  time: string;
  /** statfs with a per-collection cache. */
  statFs: (path: string) => FsInfo | undefined;
  /** KubeletPSI on cgroup v2: pressure of the node and of the pods container. */
  psi?: boolean;
}

const proc = (ctx: NodeReadContext, rel: string) => {
  const text = readIfExists(join(ctx.fsRoot, "proc", rel));
  if (text === undefined) throw new Error(`${join(ctx.fsRoot, "proc", rel)} does not exist`);
  return text;
};

/** The node's stats without `runtime` (which needs the CRI). */
export function readNodeStats(ctx: NodeReadContext, errors: PartError[]): NodeStats {
  const stat = attempt("node stat", errors, () => parseProcStat(proc(ctx, "stat")));
  const node: NodeStats = {
    nodeName: ctx.nodeName,
    startTime: stat?.bootTimeSeconds !== undefined ? new Date(stat.bootTimeSeconds * 1000).toISOString() : ctx.time,
  };
  if (stat?.cpu) {
    const usage = cpuBusyNanoseconds(stat.cpu);
    node.cpu = cpuStats(ctx, "node", usage);
  } else if (stat) {
    errors.push({ part: "node cpu", err: new Error("no cpu line in /proc/stat") });
  }
  node.memory = attempt("node memory", errors, () => nodeMemory(ctx));
  node.network = attempt("node network", errors, () => nodeNetwork(ctx));
  const nodefs = ctx.statFs(ctx.rootDir);
  if (nodefs) node.fs = toFsStats(ctx.time, nodefs);
  else errors.push({ part: "node fs", err: new Error(`statfs ${ctx.rootDir} failed`) });
  node.rlimit = attempt("node rlimit", errors, () => ({
    time: ctx.time,
    maxpid: taskMax(ctx),
    curproc: parseLoadavg(proc(ctx, "loadavg"))?.total,
  }));
  if (ctx.psi)
    withPressure(
      ctx.time,
      node,
      attempt("node psi", errors, () => nodePressure(ctx)),
    );
  const pods = attempt("node pods cgroup", errors, () => podsSystemContainer(ctx, node.startTime));
  if (pods) node.systemContainers = [pods];
  return node;
}

/** upstream's task limit: the smaller of pid_max and threads-max, each when it can be read. */
function taskMax(ctx: NodeReadContext): number | undefined {
  const limits = ["sys/kernel/pid_max", "sys/kernel/threads-max"]
    .map((rel) => readIfExists(join(ctx.fsRoot, "proc", rel)))
    .map((text) => (text === undefined ? undefined : parsePidMax(text)))
    .filter((v): v is number => v !== undefined);
  if (limits.length === 0) throw new Error(`neither ${join(ctx.fsRoot, "proc/sys/kernel/pid_max")} nor threads-max could be read`);
  return Math.min(...limits);
}

function nodePressure(ctx: NodeReadContext): CgroupPressure | undefined {
  const root = ctx.cgroups.read("/", { psi: true })?.psi ?? {};
  for (const r of ["cpu", "memory", "io"] as const) {
    if (root[r]) continue;
    const text = readIfExists(join(ctx.fsRoot, "proc/pressure", r));
    const parsed = text !== undefined ? parsePressure(text) : undefined;
    if (parsed) root[r] = parsed;
  }
  return Object.keys(root).length > 0 ? root : undefined;
}

function nodeMemory(ctx: NodeReadContext): MemoryStats {
  const info = parseMeminfo(proc(ctx, "meminfo"));
  const total = info.get("MemTotal");
  let root;
  try {
    root = ctx.cgroups.read("/")?.memory;
  } catch {
    // Unreadable root cgroup: /proc/meminfo below.
  }
  if (root) return memoryStats(ctx.time, { ...root, limitBytes: undefined }, total);
  const free = info.get("MemFree");
  const available = info.get("MemAvailable");
  if (total === undefined || free === undefined || available === undefined) throw new Error("no root memory cgroup and no MemTotal/MemFree/MemAvailable in meminfo");
  return memoryStats(ctx.time, { usageBytes: total - free, workingSetBytes: total - available }, total);
}

function nodeNetwork(ctx: NodeReadContext): NetworkStats {
  const interfaces = reportedInterfaces(proc(ctx, "net/dev"));
  const route = readIfExists(join(ctx.fsRoot, "proc/net/route"));
  const name = (route !== undefined ? parseDefaultRouteInterface(route) : undefined) ?? FALLBACK_INTERFACE;
  const def = interfaces.find((i) => i.name === name);
  return { time: ctx.time, ...(def ?? {}), interfaces };
}

/**
 * Upstream's system container "pods" (the eviction manager's
 * allocatableMemory.available reads its working set). Its startTime is the
 * node's: cAdvisor's cgroup creation time is not worth a stat per period.
 */
function podsSystemContainer(ctx: NodeReadContext, startTime: string): ContainerStats | undefined {
  const s = ctx.cgroups.read(ctx.podsCgroup, { psi: ctx.psi === true });
  if (!s) return undefined;
  const out: ContainerStats = { name: "pods", startTime };
  if (s.cpu) out.cpu = cpuStats(ctx, "system/pods", s.cpu.usageNanoseconds);
  if (s.memory) out.memory = memoryStats(ctx.time, s.memory);
  return withPressure(ctx.time, out, s.psi);
}
