export { isCriticalPod } from "../pods/source.ts";
/**
 * Eviction under node pressure (upstream pkg/kubelet/eviction): thresholds
 * from config, observations from the Summary, node conditions and taints,
 * pod ranking, admission under pressure, and the manager loop.
 */
export {
  createEvictionManager,
  type ContainerGarbage,
  type EvictionManager,
  type EvictionManagerOptions,
  type EvictionPods,
  type ImageFsLayout,
  type NodeReclaim,
  type UnusedImages,
} from "./manager.ts";
export { admitUnderPressure, type EvictionAdmitResult } from "./admit.ts";
export { nodeConditions, nodeConditionsLastObservedAt, nodeConditionsObservedSince, taintsFor, type PressureTaint } from "./conditions.ts";
export { evaluate, initialEvictionState, type Evaluation, type EvictionState } from "./evaluate.ts";
export { localStorageViolations, type LocalStorageViolation } from "./local-storage.ts";
export { evictionMessage, nodeConditionMessage, OFFENDING_CONTAINERS_KEY, OFFENDING_CONTAINERS_USAGE_KEY, STARVED_RESOURCE_KEY } from "./message.ts";
export { makeSignalObservations, podStatsLookup, SYSTEM_CONTAINER_PODS, type PodStatsLookup } from "./observations.ts";
export { canonicalQuantity, formatQuantity } from "./quantity-format.ts";
export { rankDiskPressure, rankFuncFor, rankMemoryPressure, rankPidPressure, type RankFunc } from "./rank.ts";
export { EvictionConfigError, parseThresholdConfig, thresholdsMet } from "./thresholds.ts";
export {
  IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS,
  REASON,
  type NodeConditionType,
  type Observation,
  type Observations,
  type Signal,
  type StarvedResource,
  type Threshold,
  type ThresholdValue,
} from "./types.ts";
