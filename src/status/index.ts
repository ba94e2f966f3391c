/**
 * Where pod workers put the statuses they compute. The standalone store
 * keeps them for local readers (the /pods endpoint, tests); the API
 * implementation patches them to the API server.
 */
import type { Pod } from "../pods/schema.ts";
import type { PodStatusView } from "./phase.ts";
import type { ReportedPods } from "../oom/index.ts";
import { podUid } from "../pods/identity.ts";
import { type Clock, realClock } from "../util/clock.ts";
import { type ApiPodStatus, apiPodStatus } from "./api.ts";

export interface StatusSink {
  /** Records the latest status of a pod; cheap and idempotent. */
  set(pod: Pod, status: PodStatusView): void;
  /** Forgets a pod whose worker finished; `pod` is its latest spec, when known. */
  delete(uid: string, pod?: Pod): void;
  /** The API server's copy of a running pod changed in its status only (a reconcile). */
  reconcile?(pod: Pod): void;
}

export interface LocalPodStatus {
  pod: Pod;
  status: PodStatusView;
  /** The v1 PodStatus made from `status`; absent where only a view is known (tests). */
  apiStatus?: ApiPodStatus;
}

/** The pods with a status here, each with its view and v1 status: what the node's own endpoints serve (`/pods`, logs, exec). */
export interface ReportedStatuses {
  list(): LocalPodStatus[];
}

/**
 * The statuses the node's own endpoints serve (`/pods` on 10250 and 10255):
 * each pod's latest view and the v1 PodStatus made from it, as upstream's
 * /pods lists its pods with the status manager's statuses (conditions,
 * hostIP, qosClass...). The previous v1 status keeps conditions' transition
 * times across updates.
 */
export class LocalStatusStore implements StatusSink, ReportedPods, ReportedStatuses {
  /** `api` is made when first read (most views are never served), from the view and the time it was set. */
  private readonly statuses = new Map<string, { pod: Pod; status: PodStatusView; setAt: number; api?: ApiPodStatus; previousApi?: ApiPodStatus }>();
  private readonly hostIPs: string[];
  private readonly clock: Clock;

  constructor(opts: { hostIPs?: readonly string[]; clock?: Clock } = {}) {
    this.hostIPs = [...(opts.hostIPs ?? [])];
    this.clock = opts.clock ?? realClock;
  }

  set(pod: Pod, status: PodStatusView): void {
    const uid = podUid(pod);
    const before = this.statuses.get(uid);
    this.statuses.set(uid, { pod, status, setAt: this.clock.now(), previousApi: before?.api ?? before?.previousApi });
  }

  delete(uid: string): void {
    this.statuses.delete(uid);
  }

  /** The latest view of a pod (phase, container states) for the agent's own decisions. */
  get(uid: string): PodStatusView | undefined {
    return this.statuses.get(uid)?.status;
  }

  /** The pod of a status here, terminal ones included (the OOM watcher names the pod a kill hit). */
  reportedPod(uid: string): Pod | undefined {
    return this.statuses.get(uid)?.pod;
  }

  /** Pods with their views and v1 statuses (`apiStatus`: what /pods serves). */
  list(): LocalPodStatus[] {
    return [...this.statuses.values()].map((entry) => {
      entry.api ??= apiPodStatus(entry.pod, entry.status, { hostIPs: this.hostIPs, previous: entry.previousApi, now: entry.setAt });
      return { pod: entry.pod, status: entry.status, apiStatus: entry.api };
    });
  }
}

export * from "./phase.ts";
