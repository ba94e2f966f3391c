/**
 * Lets a few pods at a time prepare their first start (volumes, pod
 * cgroup, sandbox config) up to their RunPodSandbox request.
 *
 * Why: every pod's preparation runs on the one JS thread. When 110 pods
 * arrive at once and all prepare together, each step of each pod waits
 * behind the same step of all the others, and the first RunPodSandbox goes
 * out only when nearly all are prepared (1.9 s in the benchmark's logs)
 * while containerd, the slower part, has nothing to do. Through the gate
 * the first pods reach containerd at once and the rest prepare while it
 * works.
 *
 * A waiter gets through without a slot after `maxWaitMs`: a pod stuck in a
 * slow API call (a token, a configMap) holds the others back that long at
 * most.
 */
import type { Clock } from "../util/clock.ts";

export class StartGate {
  private active = 0;
  private readonly waiting: { grant: () => void }[] = [];

  constructor(
    private readonly slots: number,
    private readonly maxWaitMs: number,
    private readonly clock: Clock,
  ) {}

  /** Resolves with the function that leaves the gate (idempotent). */
  enter(): Promise<() => void> {
    if (this.active < this.slots) {
      this.active++;
      return Promise.resolve(this.leaver());
    }
    return new Promise((resolve) => {
      const waiter = {
        grant: () => {
          cancel();
          this.active++;
          resolve(this.leaver());
        },
      };
      const cancel = this.clock.setTimer(this.maxWaitMs, () => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        resolve(() => {}); // through without a slot
      });
      this.waiting.push(waiter);
    });
  }

  /** Pods inside and waiting; for tests. */
  load(): { active: number; waiting: number } {
    return { active: this.active, waiting: this.waiting.length };
  }

  private leaver(): () => void {
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.active--;
      this.waiting.shift()?.grant();
    };
  }
}
