/**
 * The allocation manager (upstream pkg/kubelet/allocation, 1.33+): which
 * cpu and memory each admitted pod's containers are given ("allocated"),
 * and which the runtime has actually applied ("actuated"). A resize (the
 * API's `resize` subresource changing a running pod's resources) is decided
 * here: it is accepted when the pod still fits the node next to the other
 * pods' allocations, Deferred when it would fit an emptier node, Infeasible
 * when it exceeds the node itself; a pod not accepted keeps running with what
 * was allocated before. Both records are checkpointed (one document per pod
 * and kind under <rootDir>/checkpoints), so an agent restart neither loses an
 * accepted resize nor repeats one already applied.
 *
 * When the agent calls what:
 *   pod worker, each sync   allocate(desired, others) → the pod to run (allocated resources);
 *                           `others` is asked for only when there is a resize to decide
 *   runtime, container start / UpdateContainerResources   setActuated
 *   runtime, planning       actuated (a difference from allocated is a resize to apply)
 *   pod worker, finished    removePod
 */
import type { CheckpointStore } from "../checkpoint/index.ts";
import { podRequests, type PodAdmitter } from "../node/admission.ts";
import type { Pod } from "../pods/schema.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { ObservedPod, SyncResult } from "../runtime/types.ts";
import type { PodStatusView } from "../status/phase.ts";
import { withResizeStatus } from "./status.ts";
import { podResourcesOf, samePodResources, sameResources, withPodResources, type ContainerResources, type PodResources } from "../runtime/container-resources.ts";
import { podUid } from "../pods/identity.ts";

export const ALLOCATED_KIND = "allocated-resources";
export const ACTUATED_KIND = "actuated-resources";

/** Why an asked-for resize is not applied (the PodResizePending condition's reason and message). */
export interface ResizePending {
  reason: "Infeasible" | "Deferred";
  message: string;
}

export interface AllocationManagerOptions {
  /** Where allocations survive restarts; without one they live in memory only. */
  store?: CheckpointStore;
  logger: Logger;
  /** Node allocatable: cpu in millicores, memory in bytes. */
  allocatable: { cpu: number; memory: number };
  /** Node admission of `pod` next to `others` (upstream canAdmitPod); others come with their allocated resources. */
  admission: PodAdmitter;
}

export class AllocationManager {
  private readonly allocated = new Map<string, PodResources>();
  private readonly actuatedByPod = new Map<string, PodResources>();
  private readonly pending = new Map<string, ResizePending>();
  /**
   * The last answer of allocatedPod per pod object, with the allocation it
   * was made from: every sync and every admission weighs all active pods,
   * so copying each one each time made a burst of starts quadratic in
   * copies. Pods are never changed in place (a new spec is a new object).
   */
  private readonly answered = new WeakMap<Pod, { from: PodResources; pod: Pod }>();

  constructor(private readonly opts: AllocationManagerOptions) {}

  /**
   * Called before each sync of an admitted pod. The first time, the pod's
   * resources become its allocation. Later, a difference between the pod's
   * spec and its allocation is a resize to decide (and retried on every sync
   * while Deferred). Returns the pod with its allocated resources: what the
   * runtime must run.
   */
  allocate(pod: Pod, others: () => Pod[]): Pod {
    const uid = podUid(pod);
    const desired = podResourcesOf(pod);
    const current = this.load(ALLOCATED_KIND, uid, this.allocated);
    if (!current) {
      this.save(ALLOCATED_KIND, uid, this.allocated, desired);
      // Containers an earlier agent version started run with the spec's resources.
      if (!this.load(ACTUATED_KIND, uid, this.actuatedByPod)) this.save(ACTUATED_KIND, uid, this.actuatedByPod, desired);
      this.pending.delete(uid);
      return pod;
    }
    if (samePodResources(current, desired)) {
      this.pending.delete(uid);
      return this.allocatedPod(pod);
    }
    const verdict = this.fits(
      pod,
      others()
        .filter((o) => o.metadata.uid !== uid)
        .map((o) => this.allocatedPod(o)),
    );
    if (verdict) {
      if (this.pending.get(uid)?.message !== verdict.message) {
        this.opts.logger.info("pod resize not accepted", { pod: `${pod.metadata.namespace}/${pod.metadata.name}`, reason: verdict.reason, message: verdict.message });
      }
      this.pending.set(uid, verdict);
      return this.allocatedPod(pod);
    }
    this.opts.logger.info("pod resize accepted", { pod: `${pod.metadata.namespace}/${pod.metadata.name}`, resources: JSON.stringify(desired) });
    this.save(ALLOCATED_KIND, uid, this.allocated, desired);
    this.pending.delete(uid);
    return pod;
  }

  /** The pod with its allocated resources, without deciding anything (others' pods for admission). */
  allocatedPod(pod: Pod): Pod {
    const current = this.load(ALLOCATED_KIND, podUid(pod), this.allocated);
    if (!current) return pod;
    const last = this.answered.get(pod);
    if (last?.from === current) return last.pod;
    const allocated = withPodResources(pod, (name) => current[name]);
    this.answered.set(pod, { from: current, pod: allocated });
    return allocated;
  }

  /** The resize that waits (Infeasible or Deferred), if any. */
  pendingResize(uid: string): ResizePending | undefined {
    return this.pending.get(uid);
  }

  allocatedResources(uid: string, container: string): ContainerResources | undefined {
    return this.load(ALLOCATED_KIND, uid, this.allocated)?.[container];
  }

  /** What the runtime last applied to the container; undefined when unknown. */
  actuated(uid: string, container: string): ContainerResources | undefined {
    return this.load(ACTUATED_KIND, uid, this.actuatedByPod)?.[container];
  }

  /** The runtime applied `resources` (container created, or UpdateContainerResources succeeded). */
  setActuated(uid: string, container: string, resources: ContainerResources): void {
    const current = this.load(ACTUATED_KIND, uid, this.actuatedByPod) ?? {};
    const before = current[container];
    if (before && sameResources(before, resources) && JSON.stringify(before) === JSON.stringify(resources)) return;
    this.save(ACTUATED_KIND, uid, this.actuatedByPod, { ...current, [container]: resources });
  }

  /** The status view with the pod's resize facts (allocated and applied resources, resize conditions). */
  resizeStatus(view: PodStatusView, pod: Pod, observed: ObservedPod, results: SyncResult[]): PodStatusView {
    return withResizeStatus(view, pod, observed, results, this);
  }

  /** The pod is gone: forget (and delete) its records. */
  removePod(uid: string): void {
    this.allocated.delete(uid);
    this.actuatedByPod.delete(uid);
    this.pending.delete(uid);
    for (const kind of [ALLOCATED_KIND, ACTUATED_KIND]) {
      try {
        this.opts.store?.remove(kind, uid);
      } catch (err) {
        this.opts.logger.warn("could not remove a resource checkpoint", { kind, uid, err: errorMessage(err) });
      }
    }
  }

  /**
   * Housekeeping (upstream RemoveOrphanedPods): records of pods that neither
   * the agent nor the runtime knows any more (deleted while the agent was
   * down) are removed. Returns how many pods' records went.
   */
  removeOrphans(known: (uid: string) => boolean): number {
    const uids = new Set([
      ...this.allocated.keys(),
      ...this.actuatedByPod.keys(),
      ...(this.opts.store?.keys(ALLOCATED_KIND) ?? []),
      ...(this.opts.store?.keys(ACTUATED_KIND) ?? []),
    ]);
    let removed = 0;
    for (const uid of uids) {
      if (known(uid)) continue;
      this.removePod(uid);
      removed++;
    }
    return removed;
  }

  /** Upstream canResizePod: beyond the node's allocatable is Infeasible; beyond what is left of it is Deferred. */
  private fits(pod: Pod, others: Pod[]): ResizePending | undefined {
    const wanted = podRequests(pod);
    const node = this.opts.allocatable;
    if (wanted.memory > node.memory) {
      return { reason: "Infeasible", message: `Node didn't have enough capacity: memory, requested: ${wanted.memory}, capacity: ${node.memory}` };
    }
    if (wanted.cpu > node.cpu) {
      return { reason: "Infeasible", message: `Node didn't have enough capacity: cpu, requested: ${wanted.cpu}, capacity: ${node.cpu}` };
    }
    const admitted = this.opts.admission.admit(pod, others);
    return admitted.admit ? undefined : { reason: "Deferred", message: admitted.message };
  }

  private load(kind: string, uid: string, cache: Map<string, PodResources>): PodResources | undefined {
    const cached = cache.get(uid);
    if (cached || !this.opts.store || !uid) return cached;
    const read = this.opts.store.read<PodResources>(kind, uid);
    if (read.ok) {
      cache.set(uid, read.data);
      return read.data;
    }
    if (read.reason === "corrupt") this.opts.logger.warn("ignoring corrupt resource checkpoint", { file: read.file, reason: read.message });
    return undefined;
  }

  /** Memory first, so the agent acts on the decision even when the disk refuses; the failure is logged. */
  private save(kind: string, uid: string, cache: Map<string, PodResources>, value: PodResources): void {
    cache.set(uid, value);
    try {
      this.opts.store?.write(kind, uid, value);
    } catch (err) {
      this.opts.logger.warn("could not checkpoint pod resources; they are lost if the agent restarts", { kind, uid, err: errorMessage(err) });
    }
  }
}
