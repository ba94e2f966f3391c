import type { ActivePods } from "../pods/active.ts";
import { podUid } from "../pods/identity.ts";
import type { Pod } from "../pods/schema.ts";
import type { PodCgroups } from "./pod-cgroups.ts";

/** Where a pod's cgroup is (relative to the hierarchy root), for the stats; undefined when it has none (yet). */
export interface PodCgroupPaths {
  podCgroupPath(ref: { uid: string }): string | undefined;
}

/**
 * Pod cgroups as the pod syncer and the stats see them: a pod's cgroup is
 * made after the QoS totals are updated with the pod counted once among the
 * active pods (upstream syncPod: it is active from its second sync on), and
 * an active pod's cgroup path is where its stats are read.
 */
export class ActivePodCgroups implements PodCgroupPaths {
  constructor(
    private readonly cgroups: Pick<PodCgroups, "updateQos" | "ensurePod" | "removePod" | "podCgroupPath">,
    private readonly pods: ActivePods,
  ) {}

  /** The QoS totals with the pod counted, then the pod's own cgroup; returns its cgroup parent for the runtime. */
  async ensurePod(pod: Pod): Promise<string> {
    const uid = podUid(pod);
    await this.cgroups.updateQos([...this.pods.activePods().filter((p) => podUid(p) !== uid), pod]);
    return this.cgroups.ensurePod(pod);
  }

  removePod(uid: string): Promise<void> {
    return this.cgroups.removePod(uid);
  }

  /** The cgroup of an active pod; undefined for a pod that is not active here. */
  podCgroupPath(ref: { uid: string }): string | undefined {
    const pod = this.pods.activePod(ref.uid);
    return pod ? this.cgroups.podCgroupPath(pod) : undefined;
  }
}
