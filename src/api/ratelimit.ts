/**
 * Client-side rate limit for API calls (kubeAPIQPS / kubeAPIBurst), a token
 * bucket like client-go's: up to `burst` calls at once, refilled at `qps`
 * per second. Waiters are served in order.
 */
import type { Clock } from "../util/clock.ts";

export class TokenBucket {
  private tokens: number;
  private last: number;
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly opts: { qps: number; burst: number; clock: Clock }) {
    this.tokens = opts.burst;
    this.last = opts.clock.now();
  }

  /** Resolves when the caller may make one call. */
  take(): Promise<void> {
    const turn = this.queue.then(() => this.wait());
    this.queue = turn;
    return turn;
  }

  private async wait(): Promise<void> {
    if (this.opts.qps <= 0) return; // upstream: QPS < 0 disables the limit
    const now = this.opts.clock.now();
    this.tokens = Math.min(this.opts.burst, this.tokens + ((now - this.last) / 1000) * this.opts.qps);
    this.last = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return;
    }
    const waitMs = Math.ceil(((1 - this.tokens) / this.opts.qps) * 1000);
    await this.opts.clock.sleep(waitMs);
    this.tokens = 0;
    this.last = this.opts.clock.now();
  }
}
