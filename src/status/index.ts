/**
 * Where pod workers put the statuses they compute. The standalone store
 * keeps them for local readers (the /pods endpoint, tests); the API
 * implementation patches them to the API server.
 */
import type { Pod } from "../pods/schema.ts";
import type { PodStatusView } from "./phase.ts";
import { podUid } from "../pods/identity.ts";

export interface StatusSink {
  /** Records the latest status of a pod; cheap and idempotent. */
  set(pod: Pod, status: PodStatusView): void;
  /** Forgets a pod whose worker finished; `pod` is its latest spec, when known. */
  delete(uid: string, pod?: Pod): void;
  /** The API server's copy of a running pod changed in its status only (a reconcile). */
  reconcile?(pod: Pod): void;
}

export class LocalStatusStore implements StatusSink {
  private readonly statuses = new Map<string, { pod: Pod; status: PodStatusView }>();

  set(pod: Pod, status: PodStatusView): void {
    this.statuses.set(podUid(pod), { pod, status });
  }

  delete(uid: string): void {
    this.statuses.delete(uid);
  }

  get(uid: string): PodStatusView | undefined {
    return this.statuses.get(uid)?.status;
  }

  /** Pods with their statuses, as the kubelet's /pods endpoint lists them. */
  list(): { pod: Pod; status: PodStatusView }[] {
    return [...this.statuses.values()];
  }
}

export * from "./phase.ts";
