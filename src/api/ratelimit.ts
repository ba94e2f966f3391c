/**
 * Client-side rate limit for API calls (kubeAPIQPS / kubeAPIBurst), a token
 * bucket like client-go's (golang.org/x/time/rate): up to `burst` calls at
 * once, refilled at `qps` per second. Waiters are served in order.
 *
 * Each call reserves its token when it asks, and the bucket may go into
 * debt: a caller waits until its own token is due. Why: waking late (a busy
 * event loop fires a 20 ms timer after 30) then costs nobody else's turn;
 * when each waiter instead restarted the count from its own wake, 50 QPS
 * ran at 30-40 during a burst of 110 pod starts, and status patches waited
 * up to 3 s for their turn.
 */
import type { Clock } from "../util/clock.ts";

export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(private readonly opts: { qps: number; burst: number; clock: Clock }) {
    this.tokens = opts.burst;
    this.last = opts.clock.now();
  }

  /** Resolves when the caller may make one call. */
  take(): Promise<void> {
    if (this.opts.qps <= 0) return Promise.resolve(); // upstream: QPS < 0 disables the limit
    const now = this.opts.clock.now();
    this.tokens = Math.min(this.opts.burst, this.tokens + ((now - this.last) / 1000) * this.opts.qps);
    this.last = now;
    this.tokens -= 1;
    if (this.tokens >= 0) return Promise.resolve();
    return this.opts.clock.sleep(Math.ceil((-this.tokens / this.opts.qps) * 1000));
  }
}

/**
 * A client's limit as client-go's rest config reads it (rest/config.go
 * RESTClientFor): QPS 0 means 5 and burst 0 means 10, a negative QPS no
 * limit. Upstream's event client is made with eventRecordQPS and eventBurst
 * so (cmd/kubelet/app/server.go).
 */
export const clientGoRateLimit = (qps: number, burst: number): { qps: number; burst: number } => ({
  qps: qps === 0 ? 5 : Math.max(qps, 0),
  burst: burst === 0 ? 10 : burst,
});
