import type { ActivePods } from "../pods/active.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { PodCgroups } from "./index.ts";

/** The pods the runtime holds, as of the last relist (the PLEG). */
export interface RuntimePods {
  runtimePods(): readonly { uid: string }[];
  hasRelisted(): boolean;
}

/**
 * Once a minute (upstream): QoS cgroup totals from the active pods, and
 * pod cgroups whose pod is gone from the agent and the runtime removed.
 */
export async function podCgroupHousekeeping(podCgroups: PodCgroups, pods: ActivePods & { has(uid: string): boolean }, runtime: RuntimePods, logger: Logger): Promise<void> {
  try {
    await podCgroups.updateQos(pods.activePods());
    const inRuntime = new Set(runtime.runtimePods().map((p) => p.uid));
    for (const uid of await podCgroups.listPodUids()) {
      if (!pods.has(uid) && !inRuntime.has(uid) && runtime.hasRelisted()) await podCgroups.removePod(uid);
    }
  } catch (err) {
    logger.warn("pod cgroup housekeeping failed", { err: errorMessage(err) });
  }
}
