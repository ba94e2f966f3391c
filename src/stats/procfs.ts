/**
 * Pure parsers for the procfs files the node stats come from. Each takes
 * the file's text and returns numbers in base units (bytes, nanoseconds);
 * missing fields are undefined, never guessed. Reading the files is the
 * collector's job (node.ts), so these are tested on captured text.
 */
import type { NetworkStats } from "./types.ts";

/** Jiffies per second in /proc/stat: USER_HZ, 100 on every Linux ABI the agent targets. */
export const USER_HZ = 100;

export interface CpuTimes {
  user: number;
  nice: number;
  system: number;
  idle: number;
  iowait: number;
  irq: number;
  softirq: number;
  steal: number;
}

export interface ProcStat {
  /** The aggregate `cpu` line, in jiffies. */
  cpu?: CpuTimes;
  /** Boot time, seconds since the epoch (`btime`). */
  bootTimeSeconds?: number;
}

export function parseProcStat(text: string): ProcStat {
  const out: ProcStat = {};
  for (const line of text.split("\n")) {
    if (line.startsWith("cpu ")) {
      const f = line.trim().split(/\s+/).slice(1).map(Number);
      const at = (i: number) => (Number.isFinite(f[i]) ? f[i]! : 0);
      out.cpu = { user: at(0), nice: at(1), system: at(2), idle: at(3), iowait: at(4), irq: at(5), softirq: at(6), steal: at(7) };
    } else if (line.startsWith("btime ")) {
      const v = Number(line.slice(6).trim());
      if (Number.isFinite(v)) out.bootTimeSeconds = v;
    }
  }
  return out;
}

/**
 * Cumulative busy CPU time of all cores in nanoseconds: everything but idle
 * and iowait. `guest` and `guest_nice` are already inside user and nice.
 */
export function cpuBusyNanoseconds(t: CpuTimes, userHz = USER_HZ): number {
  const jiffies = t.user + t.nice + t.system + t.irq + t.softirq + t.steal;
  return jiffies * (1e9 / userHz);
}

/** /proc/meminfo as bytes by key (`MemTotal`, `MemAvailable`, `Inactive(file)` ...). */
export function parseMeminfo(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^([^:\s]+):\s+(\d+)(?:\s+(kB))?\s*$/.exec(line);
    if (!m) continue;
    out.set(m[1]!, Number(m[2]) * (m[3] ? 1024 : 1));
  }
  return out;
}

export interface LoadAvg {
  load1: number;
  load5: number;
  load15: number;
  /** Runnable scheduling entities now. */
  running: number;
  /**
   * Scheduling entities (threads) that exist: the kernel's nr_threads,
   * the same number sysinfo(2) reports as `procs`, which upstream's
   * rlimit.curproc uses.
   */
  total: number;
}

export function parseLoadavg(text: string): LoadAvg | undefined {
  const m = /^(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\/(\d+)/.exec(text.trim());
  if (!m) return undefined;
  return { load1: Number(m[1]), load5: Number(m[2]), load15: Number(m[3]), running: Number(m[4]), total: Number(m[5]) };
}

export function parsePidMax(text: string): number | undefined {
  const v = Number(text.trim());
  return text.trim() !== "" && Number.isInteger(v) && v > 0 ? v : undefined;
}

export interface InterfaceCounters {
  name: string;
  rxBytes: number;
  rxPackets: number;
  rxErrors: number;
  rxDropped: number;
  txBytes: number;
  txPackets: number;
  txErrors: number;
  txDropped: number;
}

/** /proc/net/dev: two header lines, then `name: 8 receive and 8 transmit counters`. */
export function parseNetDev(text: string): InterfaceCounters[] {
  const out: InterfaceCounters[] = [];
  for (const line of text.split("\n")) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    const f = line
      .slice(colon + 1)
      .trim()
      .split(/\s+/)
      .map(Number);
    if (!name || f.length < 16 || f.some((v) => !Number.isFinite(v))) continue;
    out.push({
      name,
      rxBytes: f[0]!,
      rxPackets: f[1]!,
      rxErrors: f[2]!,
      rxDropped: f[3]!,
      txBytes: f[8]!,
      txPackets: f[9]!,
      txErrors: f[10]!,
      txDropped: f[11]!,
    });
  }
  return out;
}

/** The interface of the IPv4 default route in /proc/net/route (lowest metric wins). */
export function parseDefaultRouteInterface(text: string): string | undefined {
  let best: { iface: string; metric: number } | undefined;
  for (const line of text.split("\n").slice(1)) {
    const [iface, destination, , flags, , , metric, mask] = line.trim().split(/\s+/);
    if (!iface || destination !== "00000000" || mask !== "00000000") continue;
    if ((parseInt(flags ?? "0", 16) & 0x1) === 0) continue; // RTF_UP
    const m = Number(metric);
    if (!best || m < best.metric) best = { iface, metric: m };
  }
  return best?.iface;
}

/**
 * Interfaces that cAdvisor leaves out of a machine's network stats
 * (container/libcontainer: ignoredDevicePrefixes): loopback and the host
 * ends of container veth pairs, which would count pod traffic twice.
 */
export const IGNORED_INTERFACE_PREFIXES = ["lo", "veth", "docker", "nerdctl"];

export const isIgnoredInterface = (name: string): boolean => IGNORED_INTERFACE_PREFIXES.some((p) => name.startsWith(p));

/** The interfaces of a /proc/<pid>/net/dev text that the Summary API reports (the node's, a pod's), with their counters. */
export function reportedInterfaces(netDev: string): NonNullable<NetworkStats["interfaces"]> {
  return parseNetDev(netDev)
    .filter((i) => !isIgnoredInterface(i.name))
    .map((i) => ({ name: i.name, rxBytes: i.rxBytes, rxErrors: i.rxErrors, txBytes: i.txBytes, txErrors: i.txErrors }));
}

/**
 * One block device's line of /proc/diskstats (Documentation/admin-guide/
 * iostats.rst): completed, merged and sector counts, and the times the
 * kernel counts in milliseconds.
 */
export interface DiskStats {
  readsCompleted: number;
  readsMerged: number;
  sectorsRead: number;
  readTimeMs: number;
  writesCompleted: number;
  writesMerged: number;
  sectorsWritten: number;
  writeTimeMs: number;
  ioInProgress: number;
  ioTimeMs: number;
  weightedIoTimeMs: number;
}

/** /proc/diskstats by `major:minor`; a line with fewer than the 11 classic counters is skipped. */
export function parseDiskstats(text: string): Map<string, DiskStats> {
  const out = new Map<string, DiskStats>();
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f.length < 14) continue;
    const n = f.slice(3, 14).map(Number);
    if (n.some((v) => !Number.isFinite(v))) continue;
    out.set(`${f[0]}:${f[1]}`, {
      readsCompleted: n[0]!,
      readsMerged: n[1]!,
      sectorsRead: n[2]!,
      readTimeMs: n[3]!,
      writesCompleted: n[4]!,
      writesMerged: n[5]!,
      sectorsWritten: n[6]!,
      writeTimeMs: n[7]!,
      ioInProgress: n[8]!,
      ioTimeMs: n[9]!,
      weightedIoTimeMs: n[10]!,
    });
  }
  return out;
}

/**
 * The soft "Max open files" of /proc/<pid>/limits, the one ulimit cAdvisor
 * reports (`max_open_files`): "unlimited" is -1; undefined when the line is
 * missing or malformed.
 */
export function parseMaxOpenFilesSoft(text: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith("Max open files"));
  const f = line?.slice("Max open files".length).trim().split(/\s+/);
  if (f?.length !== 3) return undefined;
  if (f[0] === "unlimited") return -1;
  const v = Number(f[0]);
  return Number.isInteger(v) ? v : undefined;
}
