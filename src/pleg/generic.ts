/**
 * Relists the runtime every period and reports what changed. A relist that
 * has not succeeded for `unhealthyAfterMs` makes the PLEG unhealthy (upstream
 * 3 minutes), which the healthz syncloop check reports.
 */
import type { PodRuntime } from "../runtime/index.ts";
import type { RuntimePodRecord } from "../runtime/types.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { diffRelists, type PlegEvent } from "./diff.ts";

export interface PlegOptions {
  runtime: Pick<PodRuntime, "relist">;
  clock: Clock;
  logger: Logger;
  relistPeriodMs?: number;
  unhealthyAfterMs?: number;
  /** Each relist's duration and the time since the previous one started (upstream's relist metrics). */
  onRelist?: (durationMs: number, intervalMs: number | undefined) => void;
}

export class GenericPleg implements AsyncDisposable {
  private records = new Map<string, RuntimePodRecord>();
  private lastRelistAt: number | undefined;
  private cancel: (() => void) | undefined;
  private stopped = false;
  private relisting: Promise<void> | undefined;
  private relistedOnce = false;
  private lastRelistStart: number | undefined;

  constructor(private readonly opts: PlegOptions) {}

  start(onEvents: (events: PlegEvent[]) => void): void {
    const tick = () => {
      this.relisting = this.relist(onEvents).finally(() => {
        this.relisting = undefined;
        if (!this.stopped) this.cancel = this.opts.clock.setTimer(this.opts.relistPeriodMs ?? 1000, tick);
      });
    };
    tick();
  }

  /** Pods the runtime held at the last successful relist. */
  runtimePods(): RuntimePodRecord[] {
    return [...this.records.values()];
  }

  hasRelisted(): boolean {
    return this.relistedOnce;
  }

  healthy(): { ok: boolean; message: string } {
    const threshold = this.opts.unhealthyAfterMs ?? 3 * 60_000;
    const since = this.lastRelistAt === undefined ? undefined : this.opts.clock.now() - this.lastRelistAt;
    if (since !== undefined && since <= threshold) return { ok: true, message: "ok" };
    return { ok: false, message: since === undefined ? "PLEG has not relisted yet" : `PLEG was last seen active ${Math.round(since / 1000)}s ago; threshold is ${threshold / 1000}s` };
  }

  private async relist(onEvents: (events: PlegEvent[]) => void): Promise<void> {
    let pods: RuntimePodRecord[];
    const started = this.opts.clock.now();
    const interval = this.lastRelistStart === undefined ? undefined : started - this.lastRelistStart;
    this.lastRelistStart = started;
    try {
      pods = await this.opts.runtime.relist();
    } catch (err) {
      this.opts.logger.warn("PLEG relist failed", { err: errorMessage(err) });
      return;
    } finally {
      this.opts.onRelist?.(this.opts.clock.now() - started, interval);
    }
    const next = new Map(pods.map((p) => [p.uid, p]));
    const events = diffRelists(this.records, next);
    this.records = next;
    this.lastRelistAt = this.opts.clock.now();
    this.relistedOnce = true;
    if (events.length) onEvents(events);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    this.cancel?.();
    await this.relisting;
  }
}
