/**
 * Node-wide image pull concurrency, as upstream's image pullers:
 * serializeImagePulls (the default) runs one pull at a time in arrival
 * order; otherwise maxParallelImagePulls bounds them (unset: no bound).
 *
 * And the pull rate, as upstream's throttled image service
 * (registryPullQPS, registryBurst): a token bucket of `burst` tokens refilled
 * at `qps` per second; each image pull (all its credentials) takes one, and without one the
 * pull fails at once with upstream's "pull QPS exceeded" (the pod's image
 * back-off retries it). qps 0 is no limit.
 */
import type { Clock } from "../util/clock.ts";
import { waitInLine } from "../util/waiting-line.ts";

export interface PullRate {
  qps: number;
  burst: number;
  /** The agent's clock, which refills the bucket. */
  clock: Pick<Clock, "now">;
}

export class PullQueue {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private tokens: number;
  private refilledAt: number;

  /** `limit`: pulls at once; undefined for no bound. `rate`: the pull rate limit; undefined or qps 0 for none. */
  constructor(
    private readonly limit: number | undefined,
    private readonly rate?: PullRate,
  ) {
    this.tokens = rate?.burst ?? 0;
    this.refilledAt = rate?.clock.now() ?? 0;
  }

  static fromConfig(serializeImagePulls: boolean, maxParallelImagePulls: number | undefined, rate?: PullRate): PullQueue {
    return new PullQueue(serializeImagePulls ? 1 : maxParallelImagePulls, rate);
  }

  /** Takes a token for one runtime pull; throws "pull QPS exceeded" when there is none. */
  throttle(): void {
    const r = this.rate;
    if (!r || r.qps <= 0) return;
    const now = r.clock.now();
    this.tokens = Math.min(Math.max(r.burst, 1), this.tokens + ((now - this.refilledAt) / 1000) * r.qps);
    this.refilledAt = now;
    if (this.tokens < 1) throw new Error("pull QPS exceeded");
    this.tokens -= 1;
  }

  /**
   * Runs `pull` when a slot is free; slots go in arrival order. A pull whose
   * `signal` aborts before its turn leaves the queue, rejecting with the
   * signal's reason (its pod no longer needs it), and holds up no pull behind it.
   */
  async run<T>(pull: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) throw signal.reason;
    if (this.limit !== undefined && this.active >= this.limit) await waitInLine(this.waiting, () => {}, signal);
    else this.active++;
    try {
      return await pull();
    } finally {
      const next = this.waiting.shift();
      if (next)
        next(); // the slot passes straight to the next pull
      else this.active--;
    }
  }

  /** Pulls running and waiting, for tests and metrics. */
  get size(): { active: number; waiting: number } {
    return { active: this.active, waiting: this.waiting.length };
  }
}
