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
import { Served } from "../util/served.ts";

export interface PodWorkersQueries extends ActivePods, PodStopper {
  has(uid: string): boolean;
}

export class PodWorkersView extends Served<PodWorkersQueries> implements PodWorkersQueries {
  constructor() {
    super("the pod workers view");
  }

  activePods(): Pod[] {
    return this.ask((w) => w.activePods(), []);
  }

  activePod(uid: string): Pod | undefined {
    return this.ask((w) => w.activePod(uid), undefined);
  }

  has(uid: string): boolean {
    return this.ask((w) => w.has(uid), false);
  }

  stageOf(uid: string): PodLifecycle["stage"] | undefined {
    return this.ask((w) => w.stageOf(uid), undefined);
  }

  evict(uid: string, message: string, gracePeriodSeconds: number): boolean {
    return this.ask((w) => w.evict(uid, message, gracePeriodSeconds), false);
  }

  shutdownPod(uid: string, gracePeriodSeconds: number): boolean {
    return this.ask((w) => w.shutdownPod(uid, gracePeriodSeconds), false);
  }
}
