/**
 * Relists the runtime every period and reports what changed. A relist that
 * has not succeeded for `unhealthyAfterMs` makes the PLEG unhealthy (upstream
 * 3 minutes), which the healthz syncloop check reports.
 *
 * The evented PLEG (evented.ts) drives one of these as its safety net: it
 * stretches the period while the runtime's event stream is open
 * (`relistPeriodMs` / `unhealthyAfterMs` as functions), asks for a relist now
 * when the stream breaks (`relistNow`) and feeds what an event says about one
 * pod into the same records (`observe`).
 */
import type { PodRuntime } from "../runtime/index.ts";
import type { RuntimePodRecord } from "../runtime/types.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { entitiesOf } from "../runtime/observe.ts";
import type { PodStatusReader, PodStatusWriter } from "./cache.ts";
import { diffRelists, type PlegEvent } from "./diff.ts";
import type { RuntimePodsView } from "./view.ts";
import type { KubeletMetricsSink } from "../metrics/kubelet.ts";

export interface PlegOptions {
  runtime: Pick<PodRuntime, "relist">;
  clock: Clock;
  logger: Logger;
  /** Default 1 s (upstream relistPeriod); read again before each relist is scheduled. */
  relistPeriodMs?: number | (() => number);
  /** Default 3 min (upstream relistThreshold); read at each health check. */
  unhealthyAfterMs?: number | (() => number);
  /** Each relist's duration and the time since the previous one started (upstream's relist metrics). */
  metrics?: Pick<KubeletMetricsSink, "plegRelist">;
  /** What the metrics (built before the PLEG) read the runtime's pods through; served from construction on. */
  view?: RuntimePodsView;
  /**
   * The pods' last reads (the pod workers write each step's read there): a
   * pod whose changed entities that read already shows in their listed
   * states gets no events (its step made them, or saw them and acted), and
   * a pod gone from the runtime loses its entry. With `updateTime`, each
   * relist then confirms every entry read before it began (upstream
   * generic.go:365): a pod's step plans from its confirmed entry rather
   * than reading the runtime (sync/podworkers.ts). Without it, no entry is
   * ever confirmed and every step reads.
   */
  cache?: Pick<PodStatusReader, "get"> & Pick<PodStatusWriter, "delete"> & { updateTime?: PodStatusWriter["updateTime"] };
}

/** What the sync loop and the agent need of a PLEG (generic or evented). */
export interface Pleg extends AsyncDisposable {
  start(onEvents: (events: PlegEvent[]) => void): void;
  /** Pods the runtime held, as last seen (relist or event). */
  runtimePods(): RuntimePodRecord[];
  hasRelisted(): boolean;
  healthy(): { ok: boolean; message: string };
}

const valueOf = (v: number | (() => number) | undefined, fallback: number) => (typeof v === "function" ? v() : (v ?? fallback));

export class GenericPleg implements Pleg {
  private records = new Map<string, RuntimePodRecord>();
  private lastRelistAt: number | undefined;
  private cancel: (() => void) | undefined;
  private stopped = false;
  private relisting: Promise<void> | undefined;
  private relistedOnce = false;
  private lastRelistStart: number | undefined;
  /** When the last relist that succeeded began. */
  private lastListedFrom: number | undefined;
  private onEvents: ((events: PlegEvent[]) => void) | undefined;
  /** Bumped by each observe(); a relist keeps the records of pods observed after it began. */
  private generation = 0;
  private observedAt = new Map<string, number>();
  private relistAgain = false;

  constructor(private readonly opts: PlegOptions) {
    opts.view?.serve(this);
  }

  start(onEvents: (events: PlegEvent[]) => void): void {
    this.onEvents = onEvents;
    this.tick();
  }

  private tick(): void {
    if (this.stopped || !this.onEvents) return;
    this.cancel?.();
    this.cancel = undefined;
    this.relisting = this.relist(this.onEvents).finally(() => {
      this.relisting = undefined;
      if (this.stopped) return;
      if (this.relistAgain) {
        this.relistAgain = false;
        this.tick();
        return;
      }
      this.cancel = this.opts.clock.setTimer(valueOf(this.opts.relistPeriodMs, 1000), () => this.tick());
    });
  }

  /** Relists at once (or right after the relist in flight), then on the period again. */
  relistNow(): void {
    if (this.stopped || !this.onEvents) return;
    if (this.relisting) this.relistAgain = true;
    else this.tick();
  }

  /**
   * Replaces what is known of one pod with what the runtime just said about
   * it (`undefined`: the pod is gone) and returns the events that change
   * makes, as a relist would have. A relist that began before this call
   * keeps this record rather than its older view of the pod.
   */
  observe(uid: string, update: (previous: RuntimePodRecord | undefined) => RuntimePodRecord | undefined): PlegEvent[] {
    const previous = this.records.get(uid);
    const next = update(previous);
    this.observedAt.set(uid, ++this.generation);
    const before = new Map(previous ? [[uid, previous]] : []);
    const after = new Map(next ? [[uid, next]] : []);
    if (next) this.records.set(uid, next);
    else this.records.delete(uid);
    return diffRelists(before, after);
  }

  /** The pod holding entity `id` (sandbox or container), as last seen. */
  podOf(id: string): RuntimePodRecord | undefined {
    for (const r of this.records.values()) if (r.entities.has(id)) return r;
    return undefined;
  }

  /** Pods the runtime held at the last successful relist. */
  runtimePods(): RuntimePodRecord[] {
    return [...this.records.values()];
  }

  hasRelisted(): boolean {
    return this.relistedOnce;
  }

  /** When the last relist that succeeded began: what the runtime held then is in the records. */
  listedFrom(): number | undefined {
    return this.lastListedFrom;
  }

  healthy(): { ok: boolean; message: string } {
    const threshold = valueOf(this.opts.unhealthyAfterMs, 3 * 60_000);
    const since = this.lastRelistAt === undefined ? undefined : this.opts.clock.now() - this.lastRelistAt;
    if (since !== undefined && since <= threshold) return { ok: true, message: "ok" };
    return {
      ok: false,
      message: since === undefined ? "PLEG has not relisted yet" : `PLEG was last seen active ${Math.round(since / 1000)}s ago; threshold is ${threshold / 1000}s`,
    };
  }

  private async relist(onEvents: (events: PlegEvent[]) => void): Promise<void> {
    let pods: RuntimePodRecord[];
    const started = this.opts.clock.now();
    const generation = this.generation;
    const interval = this.lastRelistStart === undefined ? undefined : started - this.lastRelistStart;
    this.lastRelistStart = started;
    this.opts.logger.v(5).info("GenericPLEG: Relisting");
    try {
      pods = await this.opts.runtime.relist();
    } catch (err) {
      this.opts.logger.warn("PLEG relist failed", { err: errorMessage(err) });
      return;
    } finally {
      this.opts.metrics?.plegRelist(this.opts.clock.now() - started, interval);
    }
    const next = new Map(pods.map((p) => [p.uid, p]));
    // Pods an event told about while this relist was in flight: the event is newer.
    for (const [uid, at] of this.observedAt) {
      if (at <= generation) continue;
      const seen = this.records.get(uid);
      if (seen) next.set(uid, seen);
      else next.delete(uid);
    }
    this.observedAt.clear();
    const events = this.notSeenYet(diffRelists(this.records, next), this.records, next, started);
    this.records = next;
    this.lastRelistAt = this.opts.clock.now();
    this.lastListedFrom = started;
    this.relistedOnce = true;
    if (events.length) onEvents(events);
    // After the wakes: a pod this relist saw change has its step read the runtime, the others' entries were current at its start.
    this.opts.cache?.updateTime?.(started);
  }

  /**
   * The events of the pods whose last read (the cache) does not show them
   * yet: a pod's events are dropped when the read has each changed entity
   * in the state this relist listed. A pod gone from the list loses its
   * entry unless the entry is newer than this relist.
   */
  private notSeenYet(events: PlegEvent[], previous: ReadonlyMap<string, RuntimePodRecord>, next: ReadonlyMap<string, RuntimePodRecord>, relistStart: number): PlegEvent[] {
    const { cache } = this.opts;
    if (!cache || !events.length) return events;
    const byPod = new Map<string, PlegEvent[]>();
    for (const e of events) byPod.set(e.uid, [...(byPod.get(e.uid) ?? []), e]);
    const kept: PlegEvent[] = [];
    for (const [uid, podEvents] of byPod) {
      const listed = next.get(uid);
      const known = listed ?? previous.get(uid);
      const cached = cache.get({ uid, name: known?.name ?? "", namespace: known?.namespace ?? "" });
      if (!listed) {
        if (cached && cached.at < relistStart) cache.delete(uid);
        kept.push(...podEvents);
        continue;
      }
      const seen = cached ? entitiesOf(cached.observed) : new Map();
      const covered = seen.size > 0 && podEvents.every((e) => (listed.entities.get(e.id) ?? "nonexistent") === (seen.get(e.id) ?? "nonexistent"));
      if (!covered) kept.push(...podEvents);
      else this.opts.logger.v(4).info("GenericPLEG: the pod's last read already shows these changes; no wake", { uid, events: podEvents.length });
    }
    return kept;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    this.cancel?.();
    await this.relisting;
  }
}
