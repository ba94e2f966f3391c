/**
 * The pods the runtime holds, as the PLEG last saw them, for what is built
 * before the PLEG: the kubelet metrics (running pods and containers, read at
 * scrape time) come first because the CRI client and the runtime the PLEG
 * relists are built with them. The PLEG serves the view from its
 * construction on; until then the runtime holds no pods.
 */
import type { RuntimePodRecord } from "../runtime/index.ts";

export interface RuntimePods {
  runtimePods(): RuntimePodRecord[];
}

export class RuntimePodsView implements RuntimePods {
  private pleg: RuntimePods | undefined;

  /** Called once, by the PLEG's constructor. */
  serve(pleg: RuntimePods): void {
    if (this.pleg) throw new Error("the runtime pods view is already served");
    this.pleg = pleg;
  }

  runtimePods(): RuntimePodRecord[] {
    return this.pleg?.runtimePods() ?? [];
  }
}
