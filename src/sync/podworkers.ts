/**
 * The per-UID queue of pods (upstream pod_workers.go): work on one pod is
 * serialized, pods proceed in parallel. The workers decide which step a pod
 * takes (its lifecycle, pods/lifecycle.ts) and when (resyncs, retries, the
 * wakes of pod-worker.ts); the PodSyncer does each step's work, as upstream's
 * podSyncer (SyncPod, SyncTerminatingPod, SyncTerminatedPod).
 */
import { transition, type PodLifecycle } from "../pods/lifecycle.ts";
import type { KubeletMetricsSink } from "../metrics/kubelet.ts";
import type { Pod } from "../pods/schema.ts";
import { defaultGracePeriodSeconds } from "../pods/spec.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { type PodRef, podFullName, podUid, podRef } from "../pods/identity.ts";
import type { Requests } from "../util/requests.ts";
import type { PodStatusReader, PodStatusWriter } from "../pleg/cache.ts";
import type { EntityState } from "../pleg/diff.ts";
import type { PodSyncer, StepRead } from "./pod-syncer.ts";
import { PodWorker, type WorkerSteps } from "./pod-worker.ts";
import type { PodWorkersView, PodWorkersQueries } from "./view.ts";

export { STALE_WAKE_DELAY_MS } from "./pod-worker.ts";

/** upstream workerResyncIntervalJitterFactor: a resync comes after syncFrequency × [1, 1.5). */
const RESYNC_JITTER_FACTOR = 0.5;
/** upstream workerBackOffPeriodJitterFactor. */
const ERROR_RETRY_JITTER_FACTOR = 0.5;

export interface PodWorkersOptions {
  /** Does each step's work (admit, sync, kill, clean up); the workers decide which step and when. */
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
  /** How long stopping waits for the steps in flight (2 s by default); then they are left to the next start. */
  stopWaitMs?: number;
  /** Retry delay after a failed step (upstream backOffPeriod, 10s), plus up to half of it at random (`random`). */
  errorRetryMs?: number;
  /** Pod worker step durations. */
  metrics?: Pick<KubeletMetricsSink, "podWorkerStep">;
  /** Syncs asked for by subsystems built before the workers (the prober); served from construction on. */
  requests?: Requests<string>;
  /** What subsystems built before the workers ask of them (active pods, evict, shut down); served from construction on. */
  view?: PodWorkersView;
  /**
   * The pod status cache the PLEG reads (pleg/cache.ts): each step's read of
   * its pod is written there, so that the relist that then sees what the
   * step made finds it already seen and wakes nothing (a second step and
   * read per start otherwise). A finished pod's entry goes. A step that
   * only a timer ran (a resync) plans from the pod's entry once a relist
   * confirmed it (PodWorker.readDue).
   */
  cache?: Pick<PodStatusWriter, "set" | "delete"> & Pick<PodStatusReader, "confirmed">;
}

export class PodWorkers implements AsyncDisposable, PodWorkersQueries, WorkerSteps {
  private readonly workers = new Map<string, PodWorker>();
  /** Refused by admission: nothing of them runs here; a delete still goes through termination. */
  private readonly rejected = new Set<string>();
  /** Pods whose worker finished (nothing of them left here): no update starts them again until `forgetFinished` (upstream's finished pod sync status). */
  private readonly finished = new Set<string>();
  private isStopped = false;

  constructor(private readonly opts: PodWorkersOptions) {
    opts.requests?.serve((uid) => this.sync(uid));
    opts.view?.serve(this);
  }

  /** A pod its source did not have before (upstream SyncPodCreate): see `upsert`. */
  add(pod: Pod): void {
    this.upsert(pod, "add");
  }

  /** A change of what a pod its source already had should be (spec, labels, deletion; upstream SyncPodUpdate): see `upsert`. */
  update(pod: Pod): void {
    this.upsert(pod, "update");
  }

  /**
   * A desired pod was added or changed. A pod being deleted through the API
   * (deletionTimestamp) is terminated with its deletion grace period; one
   * the API already reports Succeeded or Failed is never started again.
   * A pod whose worker finished gets no further updates (upstream UpdatePod:
   * the API server's own writes during and after the DELETE would otherwise
   * kill, remove and delete it a second time); only the same UID added
   * again at its source (a restored static manifest) starts afresh.
   */
  private upsert(pod: Pod, kind: "add" | "update"): void {
    const uid = podUid(pod);
    if (this.finished.has(uid)) {
      if (kind === "update" || pod.metadata.deletionTimestamp) {
        this.opts.logger.v(4).info("pod is finished, no further updates", { pod: podFullName(pod), uid, update: kind });
        return;
      }
      this.finished.delete(uid);
    }
    const existing = this.workers.get(uid);
    if (pod.metadata.deletionTimestamp) {
      this.rejected.delete(uid);
      const worker = existing ?? this.create(podRef(pod), pod);
      worker.pod = pod;
      worker.restartWith = undefined;
      worker.push({ type: "deleted", gracePeriodSeconds: defaultGracePeriodSeconds(pod) });
      return;
    }
    if (this.rejected.has(uid)) return;
    const apiPhase = (pod.status as { phase?: string } | undefined)?.phase;
    if (!existing && (apiPhase === "Succeeded" || apiPhase === "Failed")) {
      this.create(podRef(pod), pod).push({ type: "completed", gracePeriodSeconds: defaultGracePeriodSeconds(pod) });
      return;
    }
    if (existing && existing.lifecycle.stage !== "syncing") {
      // Upstream: a pod never runs again once termination started; the same
      // UID added again (a restored static manifest) starts after it finished.
      if (kind === "add") existing.restartWith = pod;
      return;
    }
    // Admission runs once per pod, against the pods already running; a refused pod is never started.
    if (!existing && !this.opts.syncer.admitPod(pod, this.activePods())) {
      this.rejected.add(uid);
      return;
    }
    const worker = existing ?? this.create(podRef(pod), pod);
    worker.pod = pod;
    worker.kick();
  }

  /**
   * Only the pod's status changed (a reconcile): a worker that runs it keeps
   * the newer object, with no sync (upstream HandlePodReconcile).
   */
  refresh(pod: Pod): void {
    const worker = this.workers.get(podUid(pod));
    if (!worker?.pod || worker.lifecycle.stage !== "syncing") return;
    worker.pod = pod;
    this.opts.syncer.reconcile(pod);
  }

  /** A desired pod was removed from its source. */
  remove(uid: string): void {
    this.rejected.delete(uid);
    const worker = this.workers.get(uid);
    if (!worker) return;
    worker.restartWith = undefined;
    worker.push({ type: "deleted", gracePeriodSeconds: defaultGracePeriodSeconds(worker.pod) });
  }

  /** Something changed in the runtime for this pod (PLEG, stamped `eventAt`, or the states a relist `listed`), or a prober asks: see PodWorker.wake. */
  sync(uid: string, eventAt?: number, listed?: ReadonlyMap<string, EntityState>): void {
    this.workers.get(uid)?.wake(eventAt, listed);
  }

  /** The eviction manager chose this pod: stopped within the grace period, Failed with reason Evicted; false when it is not running here. */
  evict(uid: string, message: string, gracePeriodSeconds: number): boolean {
    const worker = this.workers.get(uid);
    if (worker?.lifecycle.stage !== "syncing") return false;
    worker.push({ type: "evicted", gracePeriodSeconds, message });
    return true;
  }

  /** The node is shutting down: stopped within the grace period, Failed with reason Terminated; false when it is not running here. */
  shutdownPod(uid: string, gracePeriodSeconds: number): boolean {
    const worker = this.workers.get(uid);
    if (worker?.lifecycle.stage !== "syncing") return false;
    worker.push({ type: "nodeShutdown", gracePeriodSeconds });
    return true;
  }

  /** A pod the runtime has but no source wants: kill and remove it (not again when its worker finished: see `forgetFinished`). */
  terminateOrphan(ref: PodRef): void {
    if (!this.knows(ref.uid)) this.create(ref, undefined).push({ type: "deleted", gracePeriodSeconds: 30 });
  }

  /**
   * Housekeeping (upstream SyncKnownPods): the finished pods no source wants
   * any more are forgotten, so that a pod of the same UID is a new one; a
   * finished pod still desired (its DELETE not seen yet) stays finished.
   */
  forgetFinished(desired: ReadonlySet<string>): void {
    for (const uid of this.finished) if (!desired.has(uid)) this.finished.delete(uid);
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

  /** A worker has this pod, or it finished and housekeeping has not forgotten it yet. */
  knows(uid: string): boolean {
    return this.workers.has(uid) || this.finished.has(uid);
  }

  /** A worker still has this pod (not finished). */
  has(uid: string): boolean {
    return this.workers.has(uid);
  }

  /** The pod's lifecycle stage; "finished" until housekeeping forgets it, undefined for a pod not known here. */
  stageOf(uid: string): PodLifecycle["stage"] | undefined {
    return this.workers.get(uid)?.lifecycle.stage ?? (this.finished.has(uid) ? "finished" : undefined);
  }

  /** Resolves when no worker has a step in flight; for tests and shutdown. */
  async idle(): Promise<void> {
    for (;;) {
      const running = [...this.workers.values()].map((w) => w.inFlight).filter(Boolean);
      if (!running.length) return;
      await Promise.all(running);
    }
  }

  /**
   * Nothing new starts; the steps in flight get `stopWaitMs` to end. A step
   * can wait on the runtime for minutes (a container stop within a long
   * grace period, an image pull): the agent does not wait for it, as
   * upstream's does not; the pods are named, and the next start takes
   * them up where the runtime left them.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    this.isStopped = true;
    for (const w of this.workers.values()) w.stop();
    const inFlight = [...this.workers.values()].filter((w) => w.inFlight);
    if (!inFlight.length) return;
    let cancel = () => {};
    const waited = await Promise.race([
      Promise.allSettled(inFlight.map((w) => w.inFlight)).then(() => true),
      new Promise<false>((resolve) => (cancel = this.opts.clock.setTimer(this.opts.stopWaitMs ?? 2_000, () => resolve(false)))),
    ]);
    cancel();
    if (waited) return;
    const pods = inFlight.filter((w) => w.inFlight).map((w) => `${w.ref.namespace}/${w.ref.name} (${w.lifecycle.stage})`);
    this.opts.logger.warn("stopping with pod steps in flight; the next start takes them up", { pods: pods.join(", ") });
  }

  stopped(): boolean {
    return this.isStopped;
  }

  /** One step of a pod: the pending lifecycle events applied, the step run, timed, and retried after an error. */
  async step(worker: PodWorker): Promise<void> {
    for (const event of worker.events.splice(0)) worker.lifecycle = transition(worker.lifecycle, event);
    const stage = worker.lifecycle.stage;
    const operation = stage === "syncing" ? (worker.synced ? "sync" : "create") : stage === "terminating" ? "kill" : "remove";
    const started = this.opts.clock.now();
    try {
      await this.runStage(worker);
      if (stage !== "finished") this.opts.metrics?.podWorkerStep(operation, this.opts.clock.now() - started);
    } catch (err) {
      // Stopping left this step behind (its runtime calls end with the connection): the next start does it again.
      if (this.isStopped)
        return void this.logFor(worker)
          .v(2)
          .info("pod step ended by the agent's stop", { stage: worker.lifecycle.stage, err: errorMessage(err) });
      this.logFor(worker).error("pod sync failed; will retry", { stage: worker.lifecycle.stage, err: errorMessage(err) });
      worker.mustRead();
      worker.schedule(this.errorDelayMs());
    }
  }

  /** The syncer does the stage's work; the worker moves the lifecycle on and times the next step. */
  private async runStage(worker: PodWorker): Promise<void> {
    const { syncer } = this.opts;
    const state = worker.lifecycle;
    switch (state.stage) {
      case "syncing": {
        // Upstream allowStaticPodStart: a replaced static pod starts only
        // after its predecessor of the same full name is gone (host ports, names).
        if (this.predecessorTerminating(worker)) return;
        // Upstream's worker plans from the PLEG's cache (pod_workers.go:1279): a step nothing woke but a timer (a resync)
        // plans from the pod's entry once a relist confirmed it, and reads nothing before acting.
        const readDue = worker.takeReadDue();
        const known = readDue || !worker.synced ? undefined : this.opts.cache?.confirmed(worker.ref, worker.readAt);
        worker.synced = true;
        const result = await syncer.syncPod({
          ref: worker.ref,
          pod: worker.pod!,
          seenAt: worker.seenAt,
          others: () => this.activePods(),
          // A termination asked for while this step runs (a delete during a long probe kill or postStart hook) cancels it.
          signal: worker.beginSync(),
          ...(known ? { known } : {}),
        });
        this.remember(worker, result);
        if (result.kind === "terminate") return worker.push(result.event);
        // A failed action may have left what the step's read did not see: the retry reads.
        if (result.failed) worker.mustRead();
        const next = result.retryAfterMs ?? (result.failed ? this.errorDelayMs() : this.resyncDelayMs());
        worker.schedule(result.deadlineMs === undefined ? next : Math.min(next, result.deadlineMs));
        // Its PLEG event is covered by the step's read and wakes nothing: the step after is due as that event would have made it.
        if (result.dueSoon) worker.soon();
        return;
      }
      case "terminating":
        this.remember(worker, await syncer.syncTerminatingPod({ ref: worker.ref, pod: worker.pod, state }));
        return worker.push({ type: "killed" });
      case "terminated":
        if (!state.deleted) return; // a completed pod keeps its containers for logs
        worker.readAt = (await syncer.syncTerminatedPod(worker.ref, worker.pod)).readAt;
        return worker.push({ type: "cleanedUp" });
      case "finished":
        return this.finish(worker);
    }
  }

  /** A step's read of its pod: the worker's last read, and the PLEG's cache entry. */
  private remember(worker: PodWorker, read: StepRead): void {
    if (read.readAt === undefined) return;
    worker.readAt = read.readAt;
    if (read.observed) worker.stepRead(read.observed);
    if (read.observed) this.opts.cache?.set(worker.ref.uid, read.observed, read.readAt);
  }

  /** Nothing of the pod is left: its worker goes (the pod stays finished, unless added again), and the pods waiting on it run. */
  private finish(worker: PodWorker): void {
    worker.stop();
    this.workers.delete(worker.ref.uid);
    this.opts.cache?.delete(worker.ref.uid);
    if (!worker.restartWith) this.finished.add(worker.ref.uid);
    // Resources were freed: resizes waiting for room (Deferred) are decided again (upstream retries them on pod removal).
    for (const other of this.workers.values()) if (this.opts.syncer.resizePending(other.ref.uid)) other.kick();
    this.logFor(worker).info("pod removed from the runtime");
    if (worker.restartWith) this.add(worker.restartWith);
    // Wake a successor of the same full name waiting for this one.
    for (const other of this.workers.values()) if (other.fullName === worker.fullName) other.kick();
  }

  private predecessorTerminating(worker: PodWorker): boolean {
    for (const other of this.workers.values()) {
      if (other === worker || other.fullName !== worker.fullName) continue;
      const { lifecycle } = other;
      if (lifecycle.stage === "terminating" || (lifecycle.stage === "terminated" && lifecycle.deleted)) return true;
    }
    return false;
  }

  private create(ref: PodRef, pod: Pod | undefined): PodWorker {
    const worker = new PodWorker(ref, pod, this.opts.clock, this);
    this.workers.set(ref.uid, worker);
    return worker;
  }

  /** Upstream's wait.Jitter(backOffPeriod, workerBackOffPeriodJitterFactor 0.5): pods failing together retry apart. */
  private errorDelayMs(): number {
    return Math.round((this.opts.errorRetryMs ?? 10_000) * (1 + ERROR_RETRY_JITTER_FACTOR * (this.opts.random?.() ?? 0)));
  }

  private resyncDelayMs(): number {
    return Math.round(this.opts.resyncIntervalMs * (1 + RESYNC_JITTER_FACTOR * (this.opts.random?.() ?? 0)));
  }

  private logFor(worker: PodWorker): Logger {
    return this.opts.logger.with({ pod: worker.fullName, uid: worker.ref.uid });
  }
}
