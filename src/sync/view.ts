/**
 * What the subsystems built before the pod workers ask of them: the pod
 * cgroups (QoS totals), stats, eviction and node shutdown. Those are built
 * first because the workers' admission asks them in turn (under pressure?
 * shutting down?); the view is built before all of them and the workers
 * serve it from their construction on. Until then there are no pods.
 */
import type { ActivePods, PodStopper } from "../pods/active.ts";
import type { PodLifecycle } from "../pods/lifecycle.ts";
import type { Pod } from "../pods/schema.ts";

export interface PodWorkersQueries extends ActivePods, PodStopper {
  has(uid: string): boolean;
}

export class PodWorkersView implements PodWorkersQueries {
  private workers: PodWorkersQueries | undefined;

  /** Called once, by the pod workers' constructor. */
  serve(workers: PodWorkersQueries): void {
    if (this.workers) throw new Error("the pod workers view is already served");
    this.workers = workers;
  }

  activePods(): Pod[] {
    return this.workers?.activePods() ?? [];
  }

  activePod(uid: string): Pod | undefined {
    return this.workers?.activePod(uid);
  }

  has(uid: string): boolean {
    return this.workers?.has(uid) ?? false;
  }

  stageOf(uid: string): PodLifecycle["stage"] | undefined {
    return this.workers?.stageOf(uid);
  }

  evict(uid: string, message: string, gracePeriodSeconds: number): boolean {
    return this.workers?.evict(uid, message, gracePeriodSeconds) ?? false;
  }

  shutdownPod(uid: string, gracePeriodSeconds: number): boolean {
    return this.workers?.shutdownPod(uid, gracePeriodSeconds) ?? false;
  }
}
