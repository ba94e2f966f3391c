/**
 * The order pods are evicted in, per starved resource (upstream
 * rankMemoryPressure, rankDiskPressureFunc, rankPIDPressure). Each ranking
 * is a list of comparators, the first that tells two pods apart decides.
 * Pods with no stats rank first in every comparator, as upstream. Ties keep
 * the active pods' order (upstream's sort is not stable, so any order is).
 */
import type { Pod } from "../pods/schema.ts";
import type { PodStats } from "../stats/types.ts";
import type { PodStatsLookup } from "./observations.ts";
import { podDiskUsage, podMemoryUsage, podPriority, podProcessUsage, podRequest, type FsStatsType } from "./pods.ts";
import type { Signal } from "./types.ts";

/** < 0: p1 is evicted before p2. */
type Cmp = (p1: Pod, p2: Pod) => number;

export type RankFunc = (pods: readonly Pod[], stats: PodStatsLookup) => Pod[];

/** upstream cmpBool: true before false. */
const cmpBool = (a: boolean, b: boolean): number => (a === b ? 0 : a ? -1 : 1);
const sign = (n: number): number => (n > 0 ? 1 : n < 0 ? -1 : 0);

/** Compares by a per-pod stats value; pods without stats come first. */
function withStats(stats: PodStatsLookup, cmp: (s1: PodStats, s2: PodStats, p1: Pod, p2: Pod) => number): Cmp {
  return (p1, p2) => {
    const s1 = stats(p1.metadata.uid);
    const s2 = stats(p2.metadata.uid);
    if (!s1 || !s2) return cmpBool(!s1, !s2);
    return cmp(s1, s2, p1, p2);
  };
}

function orderedBy(pods: readonly Pod[], cmps: Cmp[]): Pod[] {
  return [...pods].sort((a, b) => {
    for (const cmp of cmps) {
      const r = cmp(a, b);
      if (r !== 0) return r;
    }
    return 0;
  });
}

/** Lower priority first. */
const byPriority: Cmp = (p1, p2) => sign(podPriority(p1) - podPriority(p2));

export function rankMemoryPressure(pods: readonly Pod[], stats: PodStatsLookup): Pod[] {
  const exceedsRequests = withStats(stats, (s1, s2, p1, p2) => cmpBool(podMemoryUsage(s1) > podRequest(p1, "memory"), podMemoryUsage(s2) > podRequest(p2, "memory")));
  const aboveRequests = withStats(stats, (s1, s2, p1, p2) => sign(podMemoryUsage(s2) - podRequest(p2, "memory") - (podMemoryUsage(s1) - podRequest(p1, "memory"))));
  return orderedBy(pods, [exceedsRequests, byPriority, aboveRequests]);
}

export function rankPidPressure(pods: readonly Pod[], stats: PodStatsLookup): Pod[] {
  const processes = withStats(stats, (s1, s2) => sign(podProcessUsage(s2) - podProcessUsage(s1)));
  return orderedBy(pods, [byPriority, processes]);
}

/**
 * Disk ranking over the given parts of pod storage, for bytes
 * ("ephemeral-storage") or inodes. As upstream, usage above requests
 * subtracts the ephemeral-storage request even when ranking inodes.
 */
export function rankDiskPressure(measure: readonly FsStatsType[], resource: "ephemeral-storage" | "inodes"): RankFunc {
  return (pods, stats) => {
    const usage = (s: PodStats, p: Pod) => {
      const u = podDiskUsage(s, p, measure);
      return resource === "inodes" ? u.inodes : u.bytes;
    };
    const exceedsRequests = withStats(stats, (s1, s2, p1, p2) => cmpBool(usage(s1, p1) > podRequest(p1, resource), usage(s2, p2) > podRequest(p2, resource)));
    const aboveRequests = withStats(stats, (s1, s2, p1, p2) => sign(usage(s2, p2) - podRequest(p2, "ephemeral-storage") - (usage(s1, p1) - podRequest(p1, "ephemeral-storage"))));
    return orderedBy(pods, [exceedsRequests, byPriority, aboveRequests]);
  };
}

/**
 * upstream buildSignalToRankFunc for the two layouts this agent knows: one
 * filesystem for everything, or a dedicated image filesystem holding images
 * and container writable layers (then nodefs weighs logs and volumes, and
 * imagefs weighs rootfs).
 */
export function rankFuncFor(signal: Signal, dedicatedImageFs: boolean): RankFunc {
  const all: FsStatsType[] = ["root", "logs", "localVolumeSource"];
  const nodefs: FsStatsType[] = dedicatedImageFs ? ["logs", "localVolumeSource"] : all;
  const imagefs: FsStatsType[] = dedicatedImageFs ? ["root"] : all;
  switch (signal) {
    case "memory.available":
    case "allocatableMemory.available":
      return rankMemoryPressure;
    case "pid.available":
      return rankPidPressure;
    case "nodefs.available":
      return rankDiskPressure(nodefs, "ephemeral-storage");
    case "nodefs.inodesFree":
      return rankDiskPressure(nodefs, "inodes");
    case "imagefs.available":
      return rankDiskPressure(imagefs, "ephemeral-storage");
    case "imagefs.inodesFree":
      return rankDiskPressure(imagefs, "inodes");
    default: {
      const never: never = signal;
      throw new Error(`no ranking for signal ${String(never)}`);
    }
  }
}
