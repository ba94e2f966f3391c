/**
 * The eviction manager's vocabulary, after upstream pkg/kubelet/eviction/api
 * and types.go: signals, thresholds, observations, the node conditions and
 * resources each signal maps to.
 */
import { EVICTION_SIGNALS, type EvictionSignal } from "../config/index.ts";

/** Signals this manager observes and acts on (containerfs.* are accepted by config but not acted on here). */
export type Signal = Exclude<EvictionSignal, `containerfs.${string}`>;

const actedOn = (s: EvictionSignal): s is Signal => !s.startsWith("containerfs.");

/**
 * The configuration's list in its order (memory first, as upstream's
 * byEvictionPriority), which also makes ties deterministic.
 */
export const SIGNALS: readonly Signal[] = EVICTION_SIGNALS.filter(actedOn);

export const isSignal = (s: string): s is Signal => (SIGNALS as readonly string[]).includes(s);

export type NodeConditionType = "MemoryPressure" | "DiskPressure" | "PIDPressure";

/** Report order of conditions (upstream iterates a map; a fixed order keeps messages stable). */
export const NODE_CONDITIONS: readonly NodeConditionType[] = ["MemoryPressure", "DiskPressure", "PIDPressure"];

/** upstream signalToNodeCondition */
export const SIGNAL_TO_CONDITION: Record<Signal, NodeConditionType> = {
  "memory.available": "MemoryPressure",
  "allocatableMemory.available": "MemoryPressure",
  "nodefs.available": "DiskPressure",
  "nodefs.inodesFree": "DiskPressure",
  "imagefs.available": "DiskPressure",
  "imagefs.inodesFree": "DiskPressure",
  "pid.available": "PIDPressure",
};

/** What eviction reclaims; "inodes" and "pids" are internal to eviction upstream too. */
export type StarvedResource = "memory" | "ephemeral-storage" | "inodes" | "pids";

/** upstream signalToResource */
export const SIGNAL_TO_RESOURCE: Record<Signal, StarvedResource> = {
  "memory.available": "memory",
  "allocatableMemory.available": "memory",
  "nodefs.available": "ephemeral-storage",
  "nodefs.inodesFree": "inodes",
  "imagefs.available": "ephemeral-storage",
  "imagefs.inodesFree": "inodes",
  "pid.available": "pids",
};

/** The taint the node lifecycle controller puts on a node with each condition (TaintNodesByCondition). */
export const CONDITION_TO_TAINT: Record<NodeConditionType, string> = {
  MemoryPressure: "node.kubernetes.io/memory-pressure",
  DiskPressure: "node.kubernetes.io/disk-pressure",
  PIDPressure: "node.kubernetes.io/pid-pressure",
};

/**
 * A threshold value: an absolute quantity (with the string it came from,
 * which upstream keeps for the event message) or a fraction of capacity,
 * held at float32 precision as upstream's parsePercentage does.
 */
export type ThresholdValue = { kind: "quantity"; value: number; text: string } | { kind: "percentage"; fraction: number };

export interface Threshold {
  /** Stable identity ("hard/memory.available"), the key upstream gets from struct equality. */
  id: string;
  signal: Signal;
  /** Always "<" (upstream OpLessThan): met when available < value. */
  value: ThresholdValue;
  /** Milliseconds the threshold must hold before acting; 0 makes it a hard threshold. */
  gracePeriodMs: number;
  minReclaim?: ThresholdValue;
}

/** One signal's reading; `time` is when the stats were taken (ms), if the summary said. */
export interface Observation {
  available: number;
  capacity: number;
  time?: number;
}

export type Observations = Partial<Record<Signal, Observation>>;

/** upstream isHardEvictionThreshold */
export const isHard = (t: Threshold): boolean => t.gracePeriodMs === 0;

/** upstream immediateEvictionGracePeriodSeconds: hard evictions give pods one second. */
export const IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS = 1;

/** upstream eviction.Reason */
export const REASON = "Evicted";
