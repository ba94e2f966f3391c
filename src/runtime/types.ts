/**
 * What the runtime manager observes of a pod, in the agent's own terms
 * (milliseconds, plain strings), independent of the CRI wire types.
 */
import type { RestoredSpec } from "./orphan-spec.ts";

export type ContainerState = "created" | "running" | "exited" | "unknown";

export interface ObservedContainer {
  id: string;
  name: string;
  sandboxId: string;
  state: ContainerState;
  /** Hash of the spec fields that require a restart when changed (see hash.ts). */
  hash: string;
  restartCount: number;
  /** The pod's grace period written on the container when it was created (kills without the pod's spec use it). */
  podGracePeriodSeconds?: number;
  /** The spec its annotations restore (preStop handler, ports), for a kill without the pod's spec. */
  restoredSpec?: RestoredSpec;
  image: string;
  imageRef: string;
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
  exitCode?: number;
  reason?: string;
  message?: string;
}

export interface ObservedSandbox {
  id: string;
  ready: boolean;
  attempt: number;
  createdAt: number;
  ip?: string;
  additionalIps: string[];
}

/** Sandboxes and containers of one pod, newest first. */
export interface ObservedPod {
  uid: string;
  name: string;
  namespace: string;
  sandboxes: ObservedSandbox[];
  containers: ObservedContainer[];
}

export const emptyObservedPod = (uid: string, name = "", namespace = ""): ObservedPod => ({
  uid,
  name,
  namespace,
  sandboxes: [],
  containers: [],
});

/** The result of one action; a sync collects one per action instead of stopping at the first error. */
export interface SyncResult {
  action: "CreatePodSandbox" | "KillPodSandbox" | "RemovePodSandbox" | "PullImage" | "StartContainer" | "KillContainer" | "RemoveContainer" | "ResizePodInPlace";
  target: string;
  error?: { reason: string; message: string };
}

/** What one runtime step on a pod (sync, kill, remove) did, and when it wants to be synced again. */
export interface PodSyncOutcome {
  results: SyncResult[];
  /** Set when a container waits in backoff: sync again after this many ms. */
  retryAfterMs?: number;
  /** Why each container that should run does not (CrashLoopBackOff, ErrImagePull, ...); empty after a kill or remove. */
  waiting: Map<string, { reason: string; message?: string }>;
  /** False when there was nothing to do, so the caller can skip re-reading state. */
  changed: boolean;
}

/** A sync or kill and the pod as the runtime holds it after it (read again only when something changed). */
export interface PodStepOutcome extends PodSyncOutcome {
  observed: ObservedPod;
  /** When the read of `observed` began (clock ms): a runtime event older than this is in it. */
  readAt: number;
  /**
   * The next step is due within a second, as the PLEG's events for what
   * this read shows would have made it; they are covered by this read and
   * wake nothing (pleg/generic.ts). Set when the step changed the pod's
   * sandboxes or containers and the pod as read after still has something
   * to do: a sidecar started, then the app; a container that exited during
   * the step; a failed pull after the sandbox was made (ImagePullBackOff
   * comes with the next step, as upstream's).
   */
  dueSoon?: boolean;
}

/** A pod's state as read earlier and known to be current: what a step may plan from without reading the runtime. */
export interface KnownPodStatus {
  observed: ObservedPod;
  /** When the read that gave it began (clock ms). */
  at: number;
}

/** A removal, and when its read of the pod began (clock ms). */
export interface PodRemoveOutcome extends PodSyncOutcome {
  readAt: number;
}

/** The outcome of a kill or remove: its results, nothing waiting. */
export const actionsOutcome = (results: SyncResult[]): PodSyncOutcome => ({ results, waiting: new Map(), changed: results.length > 0 });

/** A pod as the runtime lists it, for the PLEG and orphan housekeeping. */
export interface RuntimePodRecord {
  uid: string;
  name: string;
  namespace: string;
  /** id → state, sandboxes included with state running (ready) or exited. */
  entities: Map<string, ContainerState>;
  /** Which of the entities are sandboxes (for the running pods count). */
  sandboxIds?: Set<string>;
}
