/**
 * Per-key exponential backoff, as upstream's flowcontrol.Backoff used for
 * CrashLoopBackOff and image pulls: 10s doubling to 5 minutes. An entry
 * remembers when it was last grown (the restart or retry, upstream's
 * lastUpdate = Clock.Now() in Next) and is forgotten once a failure comes
 * more than the stable window after that: a container that ran 10 minutes
 * starts again at 10s. The window is twice the maximum, or, for the crash
 * loop, a fixed 600 s (upstream kubelet's HasExpiredFunc).
 */
import type { Clock } from "../util/clock.ts";

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  clock: Clock;
  /** How long after its last growth an entry is still counted (default twice maxMs). */
  stableAfterMs?: number;
}

/** Upstream kubelet's crash-loop HasExpiredFunc: stable after 600 s whatever the maximum. */
export const CRASH_LOOP_STABLE_AFTER_MS = 600_000;

export interface CrashLoopLimits {
  initialMs: number;
  maxMs: number;
}

/** Upstream's container restart back-off: 10 s doubling to 5 minutes. */
export const DEFAULT_CRASH_LOOP: CrashLoopLimits = { initialMs: 10_000, maxMs: 300_000 };

/**
 * Upstream newCrashLoopBackOff: ReduceDefaultCrashLoopBackOffDecay makes it
 * 1 s to 1 minute; KubeletCrashLoopBackOffMax sets the maximum to
 * crashLoopBackOff.maxContainerRestartPeriod (validated to 1 s–300 s), and
 * the initial delay to that maximum when it is smaller.
 */
export function crashLoopLimits(opts: { reducedDecay: boolean; maxContainerRestartPeriodMs: number | undefined }): CrashLoopLimits {
  let { initialMs, maxMs } = opts.reducedDecay ? { initialMs: 1_000, maxMs: 60_000 } : DEFAULT_CRASH_LOOP;
  if (opts.maxContainerRestartPeriodMs !== undefined) {
    maxMs = opts.maxContainerRestartPeriodMs;
    initialMs = Math.min(initialMs, maxMs);
  }
  return { initialMs, maxMs };
}

interface Entry {
  backoffMs: number;
  lastUpdate: number;
}

export class Backoff {
  private readonly entries = new Map<string, Entry>();
  constructor(private readonly opts: BackoffOptions) {}

  static crashLoop(clock: Clock, limits: CrashLoopLimits = DEFAULT_CRASH_LOOP): Backoff {
    return new Backoff({ ...limits, clock, stableAfterMs: CRASH_LOOP_STABLE_AFTER_MS });
  }

  /**
   * Records a failure that happened at `eventTime`, when its retry is made
   * (the restart): grows the delay, or starts it again when the failure came
   * after the stable window. The entry is dated now, as upstream's Next: the
   * window is counted from the retry, not from the failure before it.
   */
  next(key: string, eventTime: number): void {
    const entry = this.entries.get(key);
    const now = this.opts.clock.now();
    if (!entry || this.expired(entry, eventTime)) {
      this.entries.set(key, { backoffMs: this.opts.initialMs, lastUpdate: now });
      return;
    }
    entry.backoffMs = Math.min(entry.backoffMs * 2, this.opts.maxMs);
    entry.lastUpdate = now;
  }

  /** Milliseconds still to wait after a failure at `eventTime`, or 0 when free to retry. */
  remainingSince(key: string, eventTime: number): number {
    const entry = this.entries.get(key);
    if (!entry || this.expired(entry, eventTime)) return 0;
    return Math.max(0, eventTime + entry.backoffMs - this.opts.clock.now());
  }

  /**
   * Milliseconds still to wait since the key's last recorded failure, or 0 when
   * free to retry (upstream IsInBackOffSinceUpdate with the clock's now).
   */
  remaining(key: string): number {
    const entry = this.entries.get(key);
    const now = this.opts.clock.now();
    if (!entry || this.expired(entry, now)) return 0;
    return Math.max(0, entry.lastUpdate + entry.backoffMs - now);
  }

  current(key: string): number | undefined {
    return this.entries.get(key)?.backoffMs;
  }

  /** Drops entries not grown for the stable window (called by housekeeping). */
  gc(): void {
    const now = this.opts.clock.now();
    for (const [key, entry] of this.entries) if (this.expired(entry, now)) this.entries.delete(key);
  }

  forgetPrefix(prefix: string): void {
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }

  private expired(entry: Entry, eventTime: number): boolean {
    return eventTime - entry.lastUpdate > (this.opts.stableAfterMs ?? 2 * this.opts.maxMs);
  }
}
