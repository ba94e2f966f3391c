import type { PodLifecycle } from "./lifecycle.ts";
import { podUid } from "./identity.ts";
import type { Pod } from "./schema.ts";

/** The pods this node runs now (admitted, not terminating), as the pod workers know them. */
export interface ActivePods {
  activePods(): Pod[];
  activePod(uid: string): Pod | undefined;
}

/** Every pod source delivered its first view (upstream's sourcesReady): from then on, what pods no source wants hold may be released. */
export interface SourcesReady {
  allSourcesReady(): boolean;
}

/** Stops pods for the node (graceful node shutdown, eviction), as the pod workers do. */
export interface PodStopper {
  /** Stops the pod within the grace period for the node's shutdown (Failed, reason Terminated); false when it is not running here. */
  shutdownPod(uid: string, gracePeriodSeconds: number): boolean;
  /** Stops an evicted pod within the grace period (Failed, reason Evicted); false when it is not running here. */
  evict(uid: string, message: string, gracePeriodSeconds: number): boolean;
  /** Where the pod is in its lifecycle; undefined when nothing of it is known here. */
  stageOf(uid: string): PodLifecycle["stage"] | undefined;
}

/**
 * The entries of containers no active pod has, in a table keyed by pod UID
 * then container name (upstream's removeStaleState, as the CPU and memory
 * managers ask it): a pod gone, or a container its spec no longer names.
 * Init containers count as the pod's; ephemeral containers do not.
 */
export function staleContainerEntries(entries: Readonly<Record<string, Readonly<Record<string, unknown>>>>, active: readonly Pod[]): { uid: string; container: string }[] {
  const containers = new Map(active.map((p) => [podUid(p), new Set([...(p.spec.initContainers ?? []), ...p.spec.containers].map((c) => c.name))]));
  return Object.entries(entries).flatMap(([uid, cs]) =>
    Object.keys(cs)
      .filter((name) => !containers.get(uid)?.has(name))
      .map((container) => ({ uid, container })),
  );
}
