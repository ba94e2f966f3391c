/**
 * The syncLoop (upstream kubelet.go syncLoopIteration): the one place that
 * reacts to config changes, PLEG events, housekeeping ticks and (through
 * the workers' own timers) periodic resyncs, and hands each pod to its
 * worker. It does no runtime work itself, so it never blocks on a pod.
 */
import { type PlegEvent, podWakes } from "../pleg/diff.ts";
import type { Pleg } from "../pleg/generic.ts";
import type { PodRuntime } from "../runtime/index.ts";
import type { Backoff } from "../runtime/backoff.ts";
import type { PodConfig } from "../sources/podconfig.ts";
import type { PodSource, PodUpdate, SourceSnapshot } from "../sources/types.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { MirrorPods } from "../mirror/index.ts";
import type { PodWorkers } from "./podworkers.ts";
import { isApiPod } from "../pods/source.ts";
import { podUid } from "../pods/identity.ts";

export interface SyncLoopOptions {
  sources: PodSource[];
  podConfig: PodConfig;
  workers: PodWorkers;
  pleg: Pleg;
  runtime: Pick<PodRuntime, "garbageCollect">;
  backoff: Backoff;
  clock: Clock;
  logger: Logger;
  housekeepingIntervalMs?: number;
  gcIntervalMs?: number;
  /** Cluster mode: keeps a mirror pod in the API for each static pod. */
  mirrors?: Pick<MirrorPods, "sync">;
  /** More work for each housekeeping pass (QoS cgroup totals, ...); must not block. */
  housekeepingTasks?: (() => void)[];
  /** Kill pods no source wants (default true); run-once leaves other pods alone, as upstream's runonce has no housekeeping. */
  removeOrphans?: boolean;
}

export class SyncLoop implements AsyncDisposable {
  private lastIterationAt: number | undefined;
  /** The pending timer of each periodic task, by task: one entry each, replaced at every tick. */
  private readonly timers = new Map<string, () => void>();
  private gcRunning: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly opts: SyncLoopOptions) {}

  start(): void {
    const { clock } = this.opts;
    for (const source of this.opts.sources) source.start((snapshot) => this.onSnapshot(snapshot));
    this.opts.pleg.start((events) => this.onPlegEvents(events));
    this.every("housekeeping", this.opts.housekeepingIntervalMs ?? 2000, () => this.housekeeping());
    this.every("gc", this.opts.gcIntervalMs ?? 60_000, () => this.garbageCollect());
    this.lastIterationAt = clock.now();
  }

  /** For the healthz syncloop check: when the loop last handled anything. */
  lastIteration(): number | undefined {
    return this.lastIterationAt;
  }

  private every(name: string, periodMs: number, fn: () => void): void {
    const tick = () => {
      if (this.stopped) return;
      fn();
      this.timers.set(name, this.opts.clock.setTimer(periodMs, tick));
    };
    this.timers.set(name, this.opts.clock.setTimer(periodMs, tick));
  }

  /** Timers the loop holds (one per periodic task); exposed for tests. */
  pendingTimers(): number {
    return this.timers.size;
  }

  private onSnapshot(snapshot: SourceSnapshot): void {
    if (this.stopped) return;
    this.lastIterationAt = this.opts.clock.now();
    for (const update of this.opts.podConfig.apply(snapshot)) this.onUpdate(update);
  }

  private onUpdate(update: PodUpdate): void {
    const log = this.opts.logger;
    for (const pod of update.pods) {
      const fields = { pod: `${pod.metadata.namespace}/${pod.metadata.name}`, uid: pod.metadata.uid, source: update.source };
      switch (update.op) {
        case "add":
          log.info("SyncLoop ADD", fields);
          this.opts.workers.add(pod);
          break;
        case "update":
          log.info("SyncLoop UPDATE", fields);
          this.opts.workers.update(pod);
          break;
        case "reconcile":
          log.v(4).info("SyncLoop RECONCILE", fields);
          this.opts.workers.refresh(pod);
          break;
        case "remove":
          log.info("SyncLoop REMOVE", fields);
          this.opts.workers.remove(podUid(pod));
          break;
      }
    }
  }

  private onPlegEvents(events: PlegEvent[]): void {
    if (this.stopped) return;
    this.lastIterationAt = this.opts.clock.now();
    for (const e of events) this.opts.logger.v(2).info("SyncLoop (PLEG): event for pod", { uid: e.uid, event: e.type, id: e.id });
    for (const [uid, { at, listed }] of podWakes(events)) this.opts.workers.sync(uid, at, listed);
  }

  /**
   * Kills pods the runtime runs but no source wants: left over from a
   * manifest deleted while the agent was down. Only once every source has
   * delivered its first view, or a restart would kill pods still loading.
   */
  private housekeeping(): void {
    this.lastIterationAt = this.opts.clock.now();
    this.opts.backoff.gc();
    for (const task of this.opts.housekeepingTasks ?? []) task();
    if (this.opts.removeOrphans === false || !this.opts.podConfig.allSourcesReady() || !this.opts.pleg.hasRelisted()) return;
    const desiredPods = this.opts.podConfig.desiredPods();
    void this.opts.mirrors?.sync(desiredPods.filter((p) => !isApiPod(p)));
    const desired = new Set(desiredPods.map((p) => podUid(p)));
    for (const record of this.opts.pleg.runtimePods()) {
      if (desired.has(record.uid) || this.opts.workers.knows(record.uid)) continue;
      this.opts.logger.info("housekeeping: removing pod no source wants", { pod: `${record.namespace}/${record.name}`, uid: record.uid });
      this.opts.workers.terminateOrphan({ uid: record.uid, name: record.name, namespace: record.namespace });
    }
    // After the orphans: a finished pod the runtime still lists is killed again only at the next pass.
    this.opts.workers.forgetFinished(desired);
  }

  private garbageCollect(): void {
    if (this.gcRunning) return;
    this.gcRunning = this.opts.runtime
      .garbageCollect()
      .catch((err) => this.opts.logger.warn("container garbage collection failed", { err: errorMessage(err) }))
      .finally(() => (this.gcRunning = undefined));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    for (const cancel of this.timers.values()) cancel();
    await this.gcRunning;
  }
}
