/**
 * The pods the runtime holds, as the PLEG last saw them, for what is built
 * before the PLEG: the kubelet metrics (running pods and containers, read at
 * scrape time) come first because the CRI client and the runtime the PLEG
 * relists are built with them (it is their `RuntimeCounts`). The PLEG serves the view from its
 * construction on; until then the runtime holds no pods.
 */
import type { RuntimePodRecord } from "../runtime/index.ts";
import { Served } from "../util/served.ts";
import type { RuntimeCounts } from "../metrics/kubelet.ts";
import { runtimeCounts } from "./counts.ts";

export interface RuntimePods {
  runtimePods(): RuntimePodRecord[];
}

/** Whether the runtime held a pod when the PLEG last relisted: a pod it did not hold starts from nothing. */
export interface RuntimePodPresence {
  /** True or false once the PLEG has relisted; undefined before (nothing known yet). */
  heldAtLastRelist(uid: string): boolean | undefined;
}

export class RuntimePodsView extends Served<RuntimePods & { hasRelisted(): boolean }> implements RuntimePods, RuntimeCounts, RuntimePodPresence {
  constructor() {
    super("the runtime pods view");
  }

  runtimePods(): RuntimePodRecord[] {
    return this.ask((pleg) => pleg.runtimePods(), []);
  }

  heldAtLastRelist(uid: string): boolean | undefined {
    return this.ask((pleg) => (pleg.hasRelisted() ? pleg.runtimePods().some((p) => p.uid === uid) : undefined), undefined);
  }

  runtimeCounts(): ReturnType<RuntimeCounts["runtimeCounts"]> {
    return runtimeCounts(this.runtimePods());
  }
}
