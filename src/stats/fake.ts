/**
 * A StatsProvider that serves whatever the test set, for the eviction
 * manager and the `/stats/summary` handler. `summary()` returns a deep copy,
 * so a consumer that mutates it cannot change the next answer; `fail` makes
 * the next calls reject, as a provider whose first pass has not finished.
 */
import type { StatsProvider, Summary } from "./types.ts";

export class FakeStatsProvider implements StatsProvider {
  calls = 0;
  private current: Summary;
  private error: Error | undefined;

  constructor(initial: Summary = { node: { nodeName: "fake", startTime: new Date(0).toISOString() }, pods: [] }) {
    this.current = initial;
  }

  set(summary: Summary): void {
    this.current = summary;
    this.error = undefined;
  }

  /** Until the next `set`, `summary()` rejects with `err`. */
  fail(err: Error): void {
    this.error = err;
  }

  async summary(): Promise<Summary> {
    this.calls++;
    if (this.error) throw this.error;
    return structuredClone(this.current);
  }
}
