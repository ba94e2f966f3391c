/**
 * The seam between the syncLoop and a container runtime: all the pod
 * workers and the PLEG need. The CRI implementation is manager.ts; fake.ts
 * is an in-memory one for unit tests of the loop.
 */
import type { Mount } from "../cri/index.ts";
import type { PodRef } from "../pods/identity.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { KnownPodStatus, ObservedPod, PodRemoveOutcome, PodStepOutcome, RuntimePodRecord } from "./types.ts";

export interface PodRuntime {
  /** The runtime's current view of one pod; empty when it has nothing. Read-only. The steps below read it themselves. */
  observe(ref: PodRef): Promise<ObservedPod>;
  /**
   * Converges one pod toward its spec: one step of read, plan, execute;
   * returns what it did and the pod as the runtime holds it after.
   * `signal` aborts when the pod must stop (it is being deleted, evicted...
   * during this step), as upstream cancels a sync's context: nothing more is
   * started (a sandbox, a container), a wait at the start gate or for an
   * image pull ends (the pull's CRI call is cancelled), and a postStart hook
   * still running is abandoned (the pod's termination, next, kills its
   * container). Aborted because the agent stops (PodSyncCancelledError's
   * agentStopping), the step throws that reason and leaves no event, kill
   * or status behind, as upstream's kubelet just exits.
   * `known`: the pod as read at `at` and still current (the PLEG's cache,
   * confirmed by a later relist): the step plans from it and reads the
   * runtime only after acting, as upstream's SyncPod plans from the cache.
   */
  syncPod(pod: Pod, signal?: AbortSignal, known?: KnownPodStatus): Promise<PodStepOutcome>;
  /**
   * Stops every container (within the grace period) and the sandboxes. With
   * the pod's spec, sidecars stop after the app containers, last one first.
   * Idempotent; returns the pod as the runtime holds it after.
   */
  killPod(ref: PodRef, gracePeriodSeconds: number, pod?: Pod): Promise<PodStepOutcome>;
  /** Removes the stopped containers and sandboxes of a deleted pod. Idempotent. */
  removePod(ref: PodRef): Promise<PodRemoveOutcome>;
  /** Every pod the runtime holds, for the PLEG relist and orphan housekeeping. */
  relist(): Promise<RuntimePodRecord[]>;
  /** Removes dead containers and sandboxes beyond what upstream keeps. */
  garbageCollect(): Promise<void>;
}

/**
 * What the runtime asks of the host while it starts a pod: everything the
 * pod needs outside the container runtime. The pod syncer's PodHost serves
 * it (sync/pod-host.ts), and sets up and tears down the rest (volumes, the
 * pod's files and directories) around the runtime's steps.
 */
export interface PodHostResources {
  /** The pod cgroup's path for the sandbox config, touching nothing ("" when the runtime places pods itself). */
  cgroupParent(pod: Pod): string;
  /** Creates or updates the pod cgroup with the pod's limits (QoS totals first); returns its path. Idempotent. */
  ensureCgroup(pod: Pod): Promise<string>;
  /** Creates a log directory (the pod's, or one container's in it) before the runtime writes there. */
  ensureLogDirectory(path: string): void;
  /**
   * What one container start mounts: its volumes, then the pod's own files
   * (the managed hosts file for `podIPs`, a new termination message file).
   * Throws VolumeMountError when a mount cannot be made.
   */
  containerMounts(pod: Pod, container: ContainerSpec, podIPs: string[]): Promise<Mount[]>;
}

export type { ObservedPod, PodRemoveOutcome, PodStepOutcome, PodSyncOutcome, RuntimePodRecord, SyncResult } from "./types.ts";
