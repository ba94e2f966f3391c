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
 * - rlimit: pid_max, and the kernel's thread count from /proc/loadavg, the
 *   same number as sysinfo(2) `procs` that upstream uses.
 */
import { join } from "node:path";
import type { CgroupReader } from "./cgroup-reader.ts";
import { readIfExists } from "./cgroup-reader.ts";
import { toFsStats, type FsInfo } from "./fs.ts";
import { cpuBusyNanoseconds, parseDefaultRouteInterface, parseLoadavg, parseMeminfo, parsePidMax, parseProcStat, reportedInterfaces } from "./procfs.ts";
import type { CpuRates } from "./rate.ts";
import { attempt, cpuStats, memoryStats, type PartError } from "./convert.ts";
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
    maxpid: parsePidMax(proc(ctx, "sys/kernel/pid_max")),
    curproc: parseLoadavg(proc(ctx, "loadavg"))?.total,
  }));
  const pods = attempt("node pods cgroup", errors, () => podsSystemContainer(ctx, node.startTime));
  if (pods) node.systemContainers = [pods];
  return node;
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
  const s = ctx.cgroups.read(ctx.podsCgroup);
  if (!s) return undefined;
  const out: ContainerStats = { name: "pods", startTime };
  if (s.cpu) out.cpu = cpuStats(ctx, "system/pods", s.cpu.usageNanoseconds);
  if (s.memory) out.memory = memoryStats(ctx.time, s.memory);
  return out;
}
