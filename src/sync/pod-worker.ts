/**
 * One pod's place in the per-UID queue (upstream pod_workers.go keeps the
 * same per pod: its pending update, whether a sync is in flight, when it
 * runs again). A worker holds the pod's lifecycle, the lifecycle events not
 * applied yet and at most one pending run: a wake while a step runs only
 * marks it dirty, so bursts of PLEG events collapse into one more step.
 *
 * A wake from a runtime event that happened before the worker's last read
 * of the pod's state runs the pod no sooner than a second later (upstream's
 * pod cache: the worker waits for a status newer than its last sync, which
 * the relist's update of the cache's time gives every second). The events a
 * step causes itself (its sandbox's start, a failed pull's container state)
 * would otherwise run the next step at once, and a waiting reason such as
 * ErrImagePull would last milliseconds. The syncer says when the last read
 * of each step began.
 */
import type { LifecycleEvent, PodLifecycle } from "../pods/lifecycle.ts";
import type { PodRef } from "../pods/identity.ts";
import type { Pod } from "../pods/schema.ts";
import type { EntityState } from "../pleg/diff.ts";
import { PodSyncCancelledError } from "../runtime/cancel.ts";
import { entitiesOf } from "../runtime/observe.ts";
import type { ObservedPod } from "../runtime/types.ts";
import type { Clock } from "../util/clock.ts";

export { PodSyncCancelledError } from "../runtime/cancel.ts";

/**
 * A worker waiting for a newer status than its last sync gets it within
 * this: the generic PLEG's relist period, which moves upstream's cache
 * time (generic.go:365); upstream's evented PLEG moves it every 5 s
 * (evented.go globalCacheUpdatePeriod), the relist period kept here.
 */
export const STALE_WAKE_DELAY_MS = 1000;

/** What runs a worker's steps (the pod workers): one step per run, and whether runs are still taken. */
export interface WorkerSteps {
  step(worker: PodWorker): Promise<void>;
  stopped(): boolean;
}

export class PodWorker {
  readonly fullName: string;
  pod: Pod | undefined;
  lifecycle: PodLifecycle = { stage: "syncing" };
  /** Lifecycle events not applied yet; the next step applies them. */
  events: LifecycleEvent[] = [];
  /** The pod was added again (same UID) while terminating: start over once finished. */
  restartWith: Pod | undefined;
  /** A sync step ran for this pod (the first is a "create" in the step metrics). */
  synced = false;
  /** When this agent first saw the pod (kubelet_pod_start_duration_seconds counts from it). */
  readonly seenAt: number;
  /** When the last read of the pod's runtime state began: a runtime event older than this is in it. */
  readAt: number | undefined;
  /**
   * The next sync step reads the runtime rather than planning from the
   * PLEG's cache: the runtime may hold what the cache does not (a runtime
   * event or a prober's request woke the worker, a follow-up is due, the
   * last step failed). Timers alone (the resync, a back-off's end) leave it.
   */
  private readDue = true;

  private dirty = false;
  private running: Promise<void> | undefined;
  private cancelTimer: (() => void) | undefined;
  /** When the scheduled timer fires (clock ms), while one is set. */
  private timerAt: number | undefined;
  /** The newest stamp of runtime events that woke the worker during a step, decided on when the step ends. */
  private eventAt: number | undefined;
  /** The entity states relist events reported while a step ran, decided on when the step ends (see wake). */
  private listedDuringStep: Map<string, EntityState> | undefined;
  /** The entities (id → state) of the running step's read of the pod, once it read it. */
  private stepEntities: ReadonlyMap<string, EntityState> | undefined;
  /** The running sync step's cancellation: a lifecycle event queued or the worker stopped aborts it. */
  private syncCancel = new AbortController();

  constructor(
    readonly ref: PodRef,
    pod: Pod | undefined,
    private readonly clock: Clock,
    private readonly steps: WorkerSteps,
  ) {
    this.fullName = `${ref.name}_${ref.namespace}`;
    this.pod = pod;
    this.seenAt = clock.now();
  }

  /** The step in flight, if any. */
  get inFlight(): Promise<void> | undefined {
    return this.running;
  }

  /** Queues a lifecycle event and runs the worker; a sync step in flight is cancelled (every event ends the syncing stage). */
  push(event: LifecycleEvent): void {
    this.events.push(event);
    this.syncCancel.abort(new PodSyncCancelledError(`the pod must stop (${event.type})`));
    this.kick();
  }

  /** A sync step begins: the signal it runs under, aborted once the pod must stop or the worker stops. */
  beginSync(): AbortSignal {
    this.syncCancel = new AbortController();
    return this.syncCancel.signal;
  }

  /** Runs the worker now, or once its running step ends. */
  kick(): void {
    this.dirty = true;
    if (this.running || this.steps.stopped()) return;
    this.running = this.loop().finally(() => {
      this.running = undefined;
      this.settleEvents();
      if (this.dirty && !this.steps.stopped()) this.kick();
    });
  }

  /**
   * Something changed in the runtime for this pod (PLEG) or a prober asked.
   * `eventAt`, the runtime's stamp of the change (container events): a wake
   * that the worker's last read of the pod already covers runs it within
   * STALE_WAKE_DELAY_MS rather than at once. Without it the worker runs at once.
   * `listed`, the entity states a relist's events reported: during a step,
   * they run the pod again only if the step's read does not show them (a
   * relist that saw the step's sandbox before its container; pleg/generic.ts
   * drops such events between steps against the cache).
   */
  wake(eventAt?: number, listed?: ReadonlyMap<string, EntityState>): void {
    if (listed && this.running) {
      this.listedDuringStep = new Map([...(this.listedDuringStep ?? []), ...listed]);
      return;
    }
    this.readDue = true;
    if (eventAt === undefined) this.kick();
    // During a step, its own read decides once it ends.
    else if (this.running) this.eventAt = Math.max(this.eventAt ?? eventAt, eventAt);
    else if (this.newerThanRead(eventAt)) this.kick();
    else this.wakeWithin(STALE_WAKE_DELAY_MS);
  }

  /** Runs the worker within STALE_WAKE_DELAY_MS, as a runtime event its last read already holds would. */
  soon(): void {
    this.readDue = true;
    this.wakeWithin(STALE_WAKE_DELAY_MS);
  }

  /** What the running step read of the pod: the relist events that came during the step are checked against it. */
  stepRead(observed: ObservedPod): void {
    this.stepEntities = entitiesOf(observed);
  }

  /** The next sync step must read the runtime (see readDue). */
  mustRead(): void {
    this.readDue = true;
  }

  /** Whether this sync step must read the runtime; a step that begins takes the flag. */
  takeReadDue(): boolean {
    const due = this.readDue;
    this.readDue = false;
    return due;
  }

  /** Runs the worker again after `delayMs`, replacing the timer set. */
  schedule(delayMs: number): void {
    this.cancelTimer?.();
    this.timerAt = this.clock.now() + delayMs;
    this.cancelTimer = this.clock.setTimer(delayMs, () => {
      this.timerAt = undefined;
      this.kick();
    });
  }

  /** Nothing more runs: the pod is finished (dropped by the workers) or the workers stop. */
  stop(): void {
    this.dirty = false;
    this.clearTimer();
    this.syncCancel.abort(new PodSyncCancelledError("the pod workers stop", true));
  }

  private async loop(): Promise<void> {
    while (this.dirty && !this.steps.stopped()) {
      this.dirty = false;
      this.clearTimer();
      this.stepEntities = undefined;
      await this.steps.step(this);
      this.settleEvents();
    }
  }

  private clearTimer(): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.timerAt = undefined;
  }

  private newerThanRead(eventAt: number): boolean {
    return this.readAt === undefined || eventAt >= this.readAt;
  }

  /**
   * Folds the event wakes that came during a step into `dirty`, or a wake
   * within STALE_WAKE_DELAY_MS; relist events its read already shows are
   * dropped.
   */
  private settleEvents(): void {
    const listed = this.listedDuringStep;
    this.listedDuringStep = undefined;
    const read = this.stepEntities;
    if (listed && this.lifecycle.stage !== "finished" && !(read && [...listed].every(([id, state]) => (read.get(id) ?? "nonexistent") === state))) {
      this.readDue = true;
      this.dirty = true;
    }
    const eventAt = this.eventAt;
    this.eventAt = undefined;
    if (eventAt === undefined || this.lifecycle.stage === "finished") return;
    if (this.newerThanRead(eventAt)) this.dirty = true;
    else this.wakeWithin(STALE_WAKE_DELAY_MS);
  }

  /** Runs the worker within `delayMs`: keeps a timer due sooner. */
  private wakeWithin(delayMs: number): void {
    if (this.timerAt !== undefined && this.timerAt <= this.clock.now() + delayMs) return;
    this.schedule(delayMs);
  }
}
