/**
 * Signal observations from a Summary, after upstream makeSignalObservations:
 * a signal is observed only when the summary has both its available amount
 * and its capacity.
 */
import type { FsStats, PodStats, Summary } from "../stats/types.ts";
import type { Observation, Observations } from "./types.ts";

/** The systemContainers entry upstream reads allocatableMemory.available from. */
export const SYSTEM_CONTAINER_PODS = "pods";

/** Go's zero time, 0001-01-01T00:00:00Z, which upstream treats as "no time". */
const GO_ZERO_TIME = -62135596800000;

const time = (t: string | undefined): number | undefined => {
  if (!t) return undefined;
  const ms = Date.parse(t);
  return Number.isNaN(ms) || ms <= GO_ZERO_TIME ? undefined : ms;
};

const obs = (available: number | undefined, capacity: number | undefined, at: string | undefined): Observation | undefined =>
  available === undefined || capacity === undefined ? undefined : { available, capacity, ...(time(at) !== undefined ? { time: time(at) } : {}) };

function fsObservations(fs: FsStats | undefined): { bytes?: Observation; inodes?: Observation } {
  if (!fs) return {};
  const bytes = obs(fs.availableBytes, fs.capacityBytes, fs.time);
  const inodes = obs(fs.inodesFree, fs.inodes, fs.time);
  return { ...(bytes ? { bytes } : {}), ...(inodes ? { inodes } : {}) };
}

export function makeSignalObservations(summary: Summary): Observations {
  const out: Observations = {};
  const mem = summary.node.memory;
  if (mem?.availableBytes !== undefined && mem.workingSetBytes !== undefined) {
    out["memory.available"] = obs(mem.availableBytes, mem.availableBytes + mem.workingSetBytes, mem.time);
  }
  const podsMem = summary.node.systemContainers?.find((c) => c.name === SYSTEM_CONTAINER_PODS)?.memory;
  if (podsMem?.availableBytes !== undefined && podsMem.workingSetBytes !== undefined) {
    out["allocatableMemory.available"] = obs(podsMem.availableBytes, podsMem.availableBytes + podsMem.workingSetBytes, podsMem.time);
  }
  const nodefs = fsObservations(summary.node.fs);
  if (nodefs.bytes) out["nodefs.available"] = nodefs.bytes;
  if (nodefs.inodes) out["nodefs.inodesFree"] = nodefs.inodes;
  const imagefs = fsObservations(summary.node.runtime?.imageFs);
  if (imagefs.bytes) out["imagefs.available"] = imagefs.bytes;
  if (imagefs.inodes) out["imagefs.inodesFree"] = imagefs.inodes;
  const rlimit = summary.node.rlimit;
  if (rlimit?.maxpid !== undefined && rlimit.curproc !== undefined) {
    out["pid.available"] = obs(rlimit.maxpid - rlimit.curproc, rlimit.maxpid, rlimit.time);
  }
  return out;
}

/** upstream cachedStatsFunc: pod stats by pod UID. */
export type PodStatsLookup = (uid: string | undefined) => PodStats | undefined;

export function podStatsLookup(summary: Summary): PodStatsLookup {
  const byUid = new Map(summary.pods.map((p) => [p.podRef.uid, p]));
  return (uid) => (uid === undefined ? undefined : byUid.get(uid));
}
