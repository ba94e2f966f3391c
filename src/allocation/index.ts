/**
 * allocation/: in-place pod resize. Which cpu and memory each pod is given
 * (allocated, decided against the node) and which the runtime applied
 * (actuated), checkpointed; the order a resize is applied in; what the
 * status says about it.
 */
import type { Pod } from "../pods/schema.ts";
import type { ObservedPod, SyncResult } from "../runtime/types.ts";
import type { PodStatusView } from "../status/phase.ts";

export { AllocationManager, ACTUATED_KIND, ALLOCATED_KIND, type AllocationManagerOptions, type ResizePending } from "./manager.ts";
export { podResizeSteps, type PodResizeSteps } from "../runtime/resize-steps.ts";
export { withResizeStatus, type ResizeRecords } from "./status.ts";
export * from "../runtime/container-resources.ts";

/** What the pod workers need: the pod to run, the resize facts for its status, and forgetting it. */
export interface PodAllocation {
  /** Before each sync: decides a pending resize against `others` (asked for only then); returns the pod with its allocated resources. */
  allocate(pod: Pod, others: () => Pod[]): Pod;
  /** The pod with its allocated resources, deciding nothing: how other subsystems must weigh it. */
  allocatedPod(pod: Pod): Pod;
  /** A resize of this pod waits (Infeasible or Deferred). */
  pendingResize(uid: string): unknown;
  resizeStatus(view: PodStatusView, pod: Pod, observed: ObservedPod, results: SyncResult[]): PodStatusView;
  /** The pod's worker finished: its records go. */
  removePod(uid: string): void;
}
