/**
 * Per-key exponential backoff, as upstream's flowcontrol.Backoff used for
 * CrashLoopBackOff and image pulls: 10s doubling to 5 minutes, forgotten
 * when the last failure is more than twice the maximum old (a container that
 * ran 10 minutes starts again at 10s).
 */
import type { Clock } from "../util/clock.ts";

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  clock: Clock;
}

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
    return new Backoff({ ...limits, clock });
  }

  /** Records a failure that happened at `eventTime` and grows the delay. */
  next(key: string, eventTime: number): void {
    const entry = this.entries.get(key);
    if (!entry || this.expired(entry, eventTime)) {
      this.entries.set(key, { backoffMs: this.opts.initialMs, lastUpdate: eventTime });
      return;
    }
    entry.backoffMs = Math.min(entry.backoffMs * 2, this.opts.maxMs);
    entry.lastUpdate = eventTime;
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

  /** Drops entries untouched for twice the maximum (called by housekeeping). */
  gc(): void {
    const now = this.opts.clock.now();
    for (const [key, entry] of this.entries) if (this.expired(entry, now)) this.entries.delete(key);
  }

  forgetPrefix(prefix: string): void {
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }

  private expired(entry: Entry, eventTime: number): boolean {
    return eventTime - entry.lastUpdate > 2 * this.opts.maxMs;
  }
}
