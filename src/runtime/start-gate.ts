/**
 * Lets a few pods at a time go through their first start: preparation
 * (volumes, pod cgroup, sandbox config), RunPodSandbox, and creating and
 * starting the containers.
 *
 * Why: containerd serves many sandboxes at once by sharing its time among
 * them, so 110 asked for together all finish near the end (p50 15.6-17.6 s,
 * p99 16.6-18.9 s straight through the CRI on the CI machine), while 8 at a
 * time finish in turn and sooner in total (p50 5.2-5.8 s, p99 10.2-11.7 s;
 * 30 pods: p50 2.8-3.0 s all at once, 1.6-1.7 s 8 at a time). The JS thread
 * gains the same way: each pod's preparation no longer waits behind every
 * other pod's.
 *
 * A pod keeps its slot `maxHoldMs` at most, then loses it to the next one
 * (and finishes without it): a pod in a slow API call, an image pull or a
 * runtime under heavy load holds the others back that long, and when every
 * start is slow the gate opens up towards all at once, no worse than
 * without it.
 */
import type { Clock } from "../util/clock.ts";
import { waitInLine } from "../util/waiting-line.ts";

export class StartGate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly slots: number,
    private readonly maxHoldMs: number,
    private readonly clock: Clock,
  ) {}

  /**
   * Resolves, once the pod has a slot, with the function that gives it back
   * (idempotent). Rejects with the signal's reason when `signal` aborts
   * first (the pod must stop): it no longer waits, nor holds up the pods behind it.
   */
  enter(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.active < this.slots) return Promise.resolve(this.take());
    return waitInLine(this.waiting, () => this.take(), signal);
  }

  /** Pods holding a slot and waiting for one; for tests. */
  load(): { active: number; waiting: number } {
    return { active: this.active, waiting: this.waiting.length };
  }

  private take(): () => void {
    this.active++;
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      cancelTimer();
      this.active--;
      this.waiting.shift()?.();
    };
    const cancelTimer = this.clock.setTimer(this.maxHoldMs, release);
    return release;
  }
}
