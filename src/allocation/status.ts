/**
 * What a pod's status says about in-place resize (upstream 1.33+):
 * `allocatedResources` and `resources` of each container, and the
 * PodResizePending / PodResizeInProgress conditions (status/api.ts writes
 * them). Pure, given the allocation manager's records.
 */
import type { Pod } from "../pods/schema.ts";
import type { ObservedPod, SyncResult } from "../runtime/types.ts";
import type { ContainerStatusView, PodStatusView } from "../status/phase.ts";
import type { ResizePending } from "./manager.ts";
import { resizableContainers, resourcesOf, sameResources, type ContainerResources } from "../runtime/container-resources.ts";
import { podUid } from "../pods/identity.ts";

export interface ResizeRecords {
  actuated(uid: string, container: string): ContainerResources | undefined;
  pendingResize(uid: string): ResizePending | undefined;
}

/**
 * `pod` holds the allocated resources; `observed` is the runtime after the
 * sync; `results` the sync's actions. A resize is in progress while a
 * running container's applied resources differ from its allocation.
 */
export function withResizeStatus(view: PodStatusView, pod: Pod, observed: ObservedPod, results: SyncResult[], records: ResizeRecords): PodStatusView {
  const uid = podUid(pod);
  const sandboxId = observed.sandboxes[0]?.id;
  let inProgress = false;
  const withResources = (status: ContainerStatusView): ContainerStatusView => {
    const spec = resizableContainers(pod).find((c) => c.name === status.name);
    if (!spec) return status;
    const allocated = resourcesOf(spec);
    const latest = observed.containers.find((c) => c.name === status.name);
    const running = latest?.state === "running" && latest.sandboxId === sandboxId;
    const applied = records.actuated(uid, status.name);
    if (running && applied && !sameResources(applied, allocated)) inProgress = true;
    const requests = allocated.requests ?? allocated.limits;
    const resources = applied ?? allocated;
    return {
      ...status,
      ...(requests ? { allocatedResources: requests } : {}),
      // A container without cpu or memory settings (BestEffort) reports none.
      ...(running && (resources.requests || resources.limits) ? { resources } : {}),
    };
  };
  const containerStatuses = view.containerStatuses.map(withResources);
  const initContainerStatuses = view.initContainerStatuses?.map(withResources);
  const failure = results.find((r) => r.action === "ResizePodInPlace" && r.error);
  const pending = records.pendingResize(uid);
  const resize = {
    ...(pending ? { pending } : {}),
    ...(inProgress || failure ? { inProgress: failure ? { error: failure.error!.message } : {} } : {}),
  };
  return { ...view, containerStatuses, ...(initContainerStatuses ? { initContainerStatuses } : {}), ...(Object.keys(resize).length ? { resize } : {}) };
}
