/**
 * Where a pod came from, as upstream marks it: pods from the file and http
 * sources carry `kubernetes.io/config.source` (and a hash of their
 * manifest); their mirror pods in the API carry `kubernetes.io/config.mirror`.
 */
import type { Pod } from "./schema.ts";

/** Annotations upstream sets on pods from non-API sources. */
export const ConfigSourceAnnotation = "kubernetes.io/config.source";
export const ConfigHashAnnotation = "kubernetes.io/config.hash";
export const ConfigMirrorAnnotation = "kubernetes.io/config.mirror";

export const isMirrorPod = (pod: { metadata: { annotations?: Record<string, string> } }): boolean => pod.metadata.annotations?.[ConfigMirrorAnnotation] !== undefined;

/** Pods from the API source carry no config.source annotation, or "api". */
export const isApiPod = (pod: Pod): boolean => {
  const source = pod.metadata.annotations?.[ConfigSourceAnnotation];
  return source === undefined || source === "api";
};

/** scheduling.SystemCriticalPriority: 2 * HighestUserDefinablePriority. */
export const SYSTEM_CRITICAL_PRIORITY = 2_000_000_000;

/**
 * upstream kubelettypes.IsCriticalPod: static pods (a config.source other
 * than "api"), mirror pods, and pods at system-cluster-critical priority or
 * above. Eviction never evicts them; admission always admits them.
 */
export const isCriticalPod = (pod: Pod): boolean => !isApiPod(pod) || isMirrorPod(pod) || (pod.spec.priority ?? 0) >= SYSTEM_CRITICAL_PRIORITY;
