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
 *
 * A caller that gives up while it waits gets back what no later caller has
 * counted on (x/time/rate's Reservation.Cancel): the last reservation returns
 * its whole token, an earlier one only the part not yet reserved after it.
 * Without that, requests cancelled while throttled (a watch closed, a pod
 * deleted) went on costing the ones behind them their turns.
 */
import type { Clock } from "../util/clock.ts";

export class TokenBucket {
  private tokens: number;
  private last: number;
  /** When the newest reservation may act. */
  private lastDue: number;

  constructor(private readonly opts: { qps: number; burst: number; clock: Clock }) {
    this.tokens = opts.burst;
    this.last = opts.clock.now();
    this.lastDue = this.last;
  }

  /** Resolves when the caller may make one call; rejects with the signal's reason if it is aborted first. */
  async take(signal?: AbortSignal): Promise<void> {
    if (this.opts.qps <= 0) return; // upstream: QPS < 0 disables the limit
    signal?.throwIfAborted();
    const now = this.refill();
    this.tokens -= 1;
    if (this.tokens >= 0) return;
    // Exact, not rounded: a cancel counts the reservations after this one from it.
    const due = now + (-this.tokens / this.opts.qps) * 1000;
    this.lastDue = Math.max(this.lastDue, due);
    try {
      await this.opts.clock.sleep(Math.ceil(due - now), signal);
    } catch (err) {
      this.cancel(due);
      throw err;
    }
  }

  private refill(): number {
    const now = this.opts.clock.now();
    this.tokens = Math.min(this.opts.burst, this.tokens + ((now - this.last) / 1000) * this.opts.qps);
    this.last = now;
    return now;
  }

  /** Gives back the token of the reservation due at `due`, less the tokens reserved after it. */
  private cancel(due: number): void {
    const restore = 1 - ((this.lastDue - due) / 1000) * this.opts.qps;
    if (restore <= 1e-9) return;
    this.refill();
    this.tokens = Math.min(this.opts.burst, this.tokens + restore);
    // The newest reservation gone, the one a token before it is the newest (if it is still ahead).
    if (due === this.lastDue) this.lastDue = Math.max(this.opts.clock.now(), due - 1000 / this.opts.qps);
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
