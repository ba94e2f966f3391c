/**
 * One worker per pod UID: work on one pod is serialized, pods proceed in
 * parallel (upstream pod_workers.go). A worker holds the pod's lifecycle
 * (pods/lifecycle.ts) and at most one pending request: new requests while
 * a step runs only mark the worker dirty, so bursts of PLEG events collapse
 * into one more step.
 *
 * A wake from a runtime event that happened before the worker's last read
 * of the pod's state runs the pod no sooner than a second later (upstream's
 * pod cache: the worker waits for a status newer than its last sync, which
 * the evented PLEG's global cache time gives every second). The events a
 * step causes itself (its sandbox's start, a failed pull's container state)
 * would otherwise run the next step at once, and a waiting reason such as
 * ErrImagePull would last milliseconds. The syncer says when the last read
 * of each step began.
 */
import { transition, type LifecycleEvent, type PodLifecycle } from "../pods/lifecycle.ts";
import type { KubeletMetricsSink } from "../metrics/kubelet.ts";
import type { Pod } from "../pods/schema.ts";
import type { AdmitResult } from "../node/admission.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { type PodRef, podUid, podRef } from "../pods/identity.ts";
import type { Requests } from "../util/requests.ts";
import { defaultGracePeriodSeconds, type PodSyncer } from "./pod-syncer.ts";
import type { PodWorkersView, PodWorkersQueries } from "./view.ts";

/** upstream workerResyncIntervalJitterFactor: a resync comes after syncFrequency × [1, 1.5). */
const RESYNC_JITTER_FACTOR = 0.5;
/** upstream evented PLEG's globalCacheUpdatePeriod: a worker waiting for a newer status than its last sync gets it within this. */
export const STALE_WAKE_DELAY_MS = 1000;

export interface PodWorkersOptions {
  /** Does each step's host work (sync, kill, clean up); the workers decide which step and when. */
  syncer: PodSyncer;
  clock: Clock;
  logger: Logger;
  /** How often a converged pod is synced again (syncFrequency), plus up to half of it at random. */
  resyncIntervalMs: number;
  /**
   * A number in [0, 1) for the resync jitter (Math.random in the agent; 0, no
   * jitter, when not given). As upstream's workerResyncIntervalJitterFactor:
   * pods started together would otherwise all resync in the same second, a
   * burst of CRI calls and memory every syncFrequency.
   */
  random?: () => number;
  /** Retry delay after a failed step (upstream backOffPeriod, 10s). */
  errorRetryMs?: number;
  /** Node admission for new pods, against the pods already running (upstream canAdmitPod). */
  admit?: (pod: Pod, active: Pod[]) => AdmitResult;
  /** Pod worker step durations. */
  metrics?: Pick<KubeletMetricsSink, "podWorkerStep">;
  /** Syncs asked for by subsystems built before the workers (the prober); served from construction on. */
  requests?: Requests<string>;
  /** What subsystems built before the workers ask of them (active pods, evict, shut down); served from construction on. */
  view?: PodWorkersView;
}

interface Worker {
  ref: PodRef;
  fullName: string;
  pod: Pod | undefined;
  lifecycle: PodLifecycle;
  events: LifecycleEvent[];
  dirty: boolean;
  running: Promise<void> | undefined;
  cancelTimer: (() => void) | undefined;
  /** When the scheduled timer fires (clock ms), while one is set. */
  timerAt: number | undefined;
  /** The pod was added again (same UID) while terminating: start over once finished. */
  restartWith: Pod | undefined;
  /** A sync step ran for this pod (the first is a "create" in the step metrics). */
  synced: boolean;
  /** When this agent first saw the pod (kubelet_pod_start_duration_seconds counts from it). */
  seenAt: number;
  /** When the last read of the pod's runtime state began: a runtime event older than this is in it. */
  readAt: number | undefined;
  /** The newest stamp of runtime events that woke the worker during a step, decided on when the step ends. */
  eventAt: number | undefined;
}

export class PodWorkers implements AsyncDisposable, PodWorkersQueries {
  private readonly workers = new Map<string, Worker>();
  private readonly rejected = new Set<string>();
  private stopped = false;

  constructor(private readonly opts: PodWorkersOptions) {
    opts.requests?.serve((uid) => this.sync(uid));
    opts.view?.serve(this);
  }

  /**
   * A desired pod was added or changed. A pod being deleted through the API
   * (deletionTimestamp) is terminated with its deletion grace period; one
   * the API already reports Succeeded or Failed is never started again.
   */
  upsert(pod: Pod): void {
    const uid = podUid(pod);
    const existing = this.workers.get(uid);
    // Failed by admission: nothing of it runs here; a delete still goes through termination.
    if (this.rejected.has(uid) && !pod.metadata.deletionTimestamp) return;
    if (pod.metadata.deletionTimestamp) {
      this.rejected.delete(uid);
      const worker = existing ?? this.create(podRef(pod), pod);
      worker.pod = pod;
      worker.restartWith = undefined;
      worker.events.push({ type: "deleted", gracePeriodSeconds: defaultGracePeriodSeconds(pod) });
      this.kick(worker);
      return;
    }
    const apiPhase = (pod.status as { phase?: string } | undefined)?.phase;
    if (!existing && (apiPhase === "Succeeded" || apiPhase === "Failed")) {
      const worker = this.create(podRef(pod), pod);
      worker.events.push({ type: "completed", gracePeriodSeconds: defaultGracePeriodSeconds(pod) });
      this.kick(worker);
      return;
    }
    if (existing && existing.lifecycle.stage !== "syncing") {
      // Upstream: a pod never runs again once termination started; a re-add
      // of the same UID (a restored static manifest) starts after it finished.
      existing.restartWith = pod;
      return;
    }
    if (!existing && !this.admitted(pod)) return;
    const worker = existing ?? this.create(podRef(pod), pod);
    worker.pod = pod;
    this.kick(worker);
  }

  /**
   * Only the pod's status changed (a reconcile): a worker
   * that runs it keeps the newer object, with no sync (upstream
   * HandlePodReconcile), and the status manager compares it with what it
   * sent. Nothing that decides how the pod runs changed.
   */
  refresh(pod: Pod): void {
    const worker = this.workers.get(podUid(pod));
    if (!worker?.pod || worker.lifecycle.stage !== "syncing") return;
    worker.pod = pod;
    this.opts.syncer.reconcile(pod);
  }

  /** Runs admission once per pod; a rejected pod is Failed with the reason and never started. */
  private admitted(pod: Pod): boolean {
    const uid = podUid(pod);
    if (this.rejected.has(uid)) return false;
    if (!this.opts.admit) return true;
    const result = this.opts.admit(pod, this.activePods());
    if (result.admit) return true;
    this.rejected.add(uid);
    this.opts.syncer.rejectPod(pod, result.reason, result.message);
    return false;
  }

  /** A desired pod was removed from its source. */
  remove(uid: string): void {
    this.rejected.delete(uid);
    const worker = this.workers.get(uid);
    if (!worker) return;
    worker.restartWith = undefined;
    worker.events.push({ type: "deleted", gracePeriodSeconds: defaultGracePeriodSeconds(worker.pod) });
    this.kick(worker);
  }

  /**
   * Something changed in the runtime for this pod (PLEG) or a timer fired.
   * `eventAt`, the runtime's stamp of the change (container events): a wake
   * that the worker's last read of the pod already covers runs it within
   * STALE_WAKE_DELAY_MS rather than at once. Without it (a relist, a prober)
   * the worker runs at once.
   */
  sync(uid: string, eventAt?: number): void {
    const worker = this.workers.get(uid);
    if (!worker) return;
    if (eventAt === undefined) this.kick(worker);
    // During a step, its own read decides once it ends.
    else if (worker.running) worker.eventAt = Math.max(worker.eventAt ?? eventAt, eventAt);
    else if (this.newerThanRead(worker, eventAt)) this.kick(worker);
    else this.wakeWithin(worker, STALE_WAKE_DELAY_MS);
  }

  private newerThanRead(worker: Worker, eventAt: number): boolean {
    return worker.readAt === undefined || eventAt >= worker.readAt;
  }

  /** Folds the event wakes that came during a step into `dirty`, or a wake within STALE_WAKE_DELAY_MS. */
  private settleEvents(worker: Worker): void {
    const eventAt = worker.eventAt;
    worker.eventAt = undefined;
    if (eventAt === undefined || this.workers.get(worker.ref.uid) !== worker) return;
    if (this.newerThanRead(worker, eventAt)) worker.dirty = true;
    else this.wakeWithin(worker, STALE_WAKE_DELAY_MS);
  }

  /** Runs the worker within `delayMs`: keeps a timer due sooner. */
  private wakeWithin(worker: Worker, delayMs: number): void {
    if (worker.timerAt !== undefined && worker.timerAt <= this.opts.clock.now() + delayMs) return;
    this.schedule(worker, delayMs);
  }

  /**
   * The eviction manager chose this pod: stop it within `gracePeriodSeconds`
   * and report it Failed with reason Evicted. False when the pod is not
   * running here (nothing to evict).
   */
  evict(uid: string, message: string, gracePeriodSeconds: number): boolean {
    const worker = this.workers.get(uid);
    if (worker?.lifecycle.stage !== "syncing") return false;
    worker.events.push({ type: "evicted", gracePeriodSeconds, message });
    this.kick(worker);
    return true;
  }

  /**
   * The node is shutting down: stop the pod within `gracePeriodSeconds` and
   * report it Failed with reason Terminated. False when it is not running here.
   */
  shutdownPod(uid: string, gracePeriodSeconds: number): boolean {
    const worker = this.workers.get(uid);
    if (worker?.lifecycle.stage !== "syncing") return false;
    worker.events.push({ type: "nodeShutdown", gracePeriodSeconds });
    this.kick(worker);
    return true;
  }

  /** The pod a worker runs, when it is active (admitted and not terminating). */
  activePod(uid: string): Pod | undefined {
    const worker = this.workers.get(uid);
    return worker?.lifecycle.stage === "syncing" ? worker.pod : undefined;
  }

  /** Pods admitted and not terminating, with their allocated resources: what admission, QoS cgroups and eviction weigh. */
  activePods(): Pod[] {
    return [...this.workers.values()].filter((w) => w.lifecycle.stage === "syncing" && w.pod).map((w) => this.opts.syncer.allocatedPod(w.pod!));
  }

  /** A pod the runtime has but no source wants: kill and remove it. */
  terminateOrphan(ref: PodRef): void {
    if (this.workers.has(ref.uid)) return;
    const worker = this.create(ref, undefined);
    worker.events.push({ type: "deleted", gracePeriodSeconds: 30 });
    this.kick(worker);
  }

  has(uid: string): boolean {
    return this.workers.has(uid);
  }

  stageOf(uid: string): PodLifecycle["stage"] | undefined {
    return this.workers.get(uid)?.lifecycle.stage;
  }

  /** Resolves when no worker has a step in flight; for tests and shutdown. */
  async idle(): Promise<void> {
    for (;;) {
      const running = [...this.workers.values()].map((w) => w.running).filter(Boolean);
      if (!running.length) return;
      await Promise.all(running);
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    for (const w of this.workers.values()) w.cancelTimer?.();
    await Promise.allSettled([...this.workers.values()].map((w) => w.running));
  }

  private create(ref: PodRef, pod: Pod | undefined): Worker {
    const worker: Worker = {
      ref,
      fullName: `${ref.name}_${ref.namespace}`,
      pod,
      lifecycle: { stage: "syncing" },
      events: [],
      dirty: false,
      running: undefined,
      cancelTimer: undefined,
      timerAt: undefined,
      restartWith: undefined,
      synced: false,
      seenAt: this.opts.clock.now(),
      readAt: undefined,
      eventAt: undefined,
    };
    this.workers.set(ref.uid, worker);
    return worker;
  }

  private kick(worker: Worker): void {
    worker.dirty = true;
    if (worker.running || this.stopped) return;
    worker.running = this.run(worker).finally(() => {
      worker.running = undefined;
      this.settleEvents(worker);
      if (worker.dirty && !this.stopped) this.kick(worker);
    });
  }

  private resyncDelayMs(): number {
    return Math.round(this.opts.resyncIntervalMs * (1 + RESYNC_JITTER_FACTOR * (this.opts.random?.() ?? 0)));
  }

  private schedule(worker: Worker, delayMs: number): void {
    worker.cancelTimer?.();
    worker.timerAt = this.opts.clock.now() + delayMs;
    worker.cancelTimer = this.opts.clock.setTimer(delayMs, () => {
      worker.timerAt = undefined;
      this.kick(worker);
    });
  }

  private async run(worker: Worker): Promise<void> {
    while (worker.dirty && !this.stopped) {
      worker.dirty = false;
      worker.cancelTimer?.();
      worker.timerAt = undefined;
      for (const event of worker.events.splice(0)) worker.lifecycle = transition(worker.lifecycle, event);
      const log = this.opts.logger.with({ pod: worker.fullName, uid: worker.ref.uid });
      const stage = worker.lifecycle.stage;
      const operation = stage === "syncing" ? (worker.synced ? "sync" : "create") : stage === "terminating" ? "kill" : "remove";
      const started = this.opts.clock.now();
      try {
        await this.step(worker, log);
        if (stage !== "finished") this.opts.metrics?.podWorkerStep(operation, this.opts.clock.now() - started);
      } catch (err) {
        log.error("pod sync failed; will retry", { stage: worker.lifecycle.stage, err: errorMessage(err) });
        this.schedule(worker, this.opts.errorRetryMs ?? 10_000);
      }
      this.settleEvents(worker);
    }
  }

  /** One step of the pod's lifecycle: the syncer does the work, the worker moves the lifecycle and times the next step. */
  private async step(worker: Worker, log: Logger): Promise<void> {
    const { syncer } = this.opts;
    const state = worker.lifecycle;
    switch (state.stage) {
      case "syncing": {
        // Upstream allowStaticPodStart: a replaced static pod starts only
        // after its predecessor of the same full name is gone (host ports, names).
        if (this.predecessorTerminating(worker)) return;
        worker.synced = true;
        const result = await syncer.syncPod({
          ref: worker.ref,
          pod: worker.pod!,
          seenAt: worker.seenAt,
          others: () => this.activePods(),
          // A termination asked for while this step runs (a delete during a long probe kill) starts nothing more.
          terminating: () => worker.events.length > 0 || this.stopped,
        });
        if (result.readAt !== undefined) worker.readAt = result.readAt;
        if (result.kind === "terminate") {
          worker.events.push(result.event);
          worker.dirty = true;
          return;
        }
        const next = result.retryAfterMs ?? (result.failed ? (this.opts.errorRetryMs ?? 10_000) : this.resyncDelayMs());
        this.schedule(worker, result.deadlineMs === undefined ? next : Math.min(next, result.deadlineMs));
        return;
      }
      case "terminating": {
        worker.readAt = (await syncer.syncTerminatingPod({ ref: worker.ref, pod: worker.pod, state })).readAt;
        worker.events.push({ type: "killed" });
        worker.dirty = true;
        return;
      }
      case "terminated": {
        if (!state.deleted) return; // a completed pod keeps its containers for logs
        worker.readAt = (await syncer.syncTerminatedPod(worker.ref, worker.pod)).readAt;
        worker.events.push({ type: "cleanedUp" });
        worker.dirty = true;
        return;
      }
      case "finished": {
        this.workers.delete(worker.ref.uid);
        // Resources were freed: resizes waiting for room (Deferred) are decided again (upstream retries them on pod removal).
        for (const other of this.workers.values()) if (syncer.resizePending(other.ref.uid)) this.kick(other);
        log.info("pod removed from the runtime");
        if (worker.restartWith) this.upsert(worker.restartWith);
        // Wake a successor of the same full name waiting for this one.
        for (const other of this.workers.values()) if (other.fullName === worker.fullName) this.kick(other);
        worker.dirty = false;
        return;
      }
    }
  }

  private predecessorTerminating(worker: Worker): boolean {
    for (const other of this.workers.values()) {
      if (other !== worker && other.fullName === worker.fullName && other.lifecycle.stage !== "syncing" && other.lifecycle.stage !== "finished") {
        if (other.lifecycle.stage === "terminated" && !other.lifecycle.deleted) continue;
        return true;
      }
    }
    return false;
  }
}
