/**
 * The evented PLEG (upstream pkg/kubelet/pleg/evented.go): where the runtime
 * streams container events (CRI GetContainerEvents: containerd 1.7 and
 * later), each event updates what is known of its pod and wakes the pod at
 * once; the relist stays as the safety net, at upstream's evented period
 * (300 s, unhealthy after 10 min without a relist).
 *
 * Where the runtime answers Unimplemented (containerd 1.6) it relists every
 * second, as the generic PLEG, for good. When an open stream fails or ends,
 * it relists at once and every second while it reconnects, with a backoff
 * from 1 s to 30 s; each reconnection relists once more, for what happened
 * while no stream was open.
 *
 * An event carries the sandbox's status and the statuses of every container
 * of that sandbox (as containerd sends them), so the pod's record is rebuilt
 * from it and compared with the previous one: the same PlegEvents a relist
 * would have given (upstream: STARTED -> ContainerStarted, STOPPED ->
 * ContainerDied, DELETED -> ContainerDied + ContainerRemoved, CREATED only
 * updates the record).
 */
import { ContainerEventType, isCriError, PodSandboxState, type ContainerEventResponse, type CriErrorKind, type RuntimeService } from "../cri/index.ts";
import { containerStateOf } from "../runtime/container-state.ts";
import { identityFromLabels } from "../runtime/labels.ts";
import type { PodRuntime } from "../runtime/index.ts";
import type { RuntimePodsView } from "./view.ts";
import type { ContainerState, RuntimePodRecord } from "../runtime/types.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { PlegEvent } from "./diff.ts";
import { GenericPleg, type Pleg, type PlegOptions } from "./generic.ts";
import type { KubeletMetricsSink } from "../metrics/kubelet.ts";

/** Upstream's generic PLEG: relistPeriod 1 s, relistThreshold 3 min. */
export const RELIST_PERIOD_MS = 1000;
export const RELIST_THRESHOLD_MS = 3 * 60_000;
/** Upstream's evented PLEG: eventedPlegRelistPeriod 300 s, eventedPlegRelistThreshold 10 min. */
export const EVENTED_RELIST_PERIOD_MS = 300_000;
export const EVENTED_RELIST_THRESHOLD_MS = 10 * 60_000;
/** Upstream's globalCacheUpdatePeriod: how often an open stream moves the status cache's time on. */
export const CACHE_TIME_PERIOD_MS = 5000;
/** The cache's time stays this far behind the clock: an event the runtime sent just before is still on its way. */
export const CACHE_TIME_MARGIN_MS = 1000;
const RECONNECT_FIRST_MS = 1000;
const RECONNECT_MAX_MS = 30_000;
/** A stream open this long (or that delivered an event) worked: the next failure backs off from the start. */
const STREAM_STABLE_MS = 30_000;

/** Why the event stream is not open: the CRI's error kind, or "Ended" when the runtime closed it. */
export class PlegStreamError extends Error {
  override readonly name = "PlegStreamError";
  readonly kind: CriErrorKind | "Ended";
  constructor(kind: CriErrorKind | "Ended", detail: string) {
    super(`container event stream: ${kind}: ${detail}`);
    this.kind = kind;
  }

  static from(err: unknown): PlegStreamError {
    if (isCriError(err)) return new PlegStreamError(err.kind, err.detail);
    return new PlegStreamError("Unknown", errorMessage(err));
  }
}

/** Where the event stream stands; the relist period follows from it. */
export type EventStreamState =
  | { kind: "connecting" }
  | { kind: "streaming"; since: number }
  | { kind: "reconnecting"; attempt: number; retryInMs: number; error: PlegStreamError }
  | { kind: "unsupported"; error: PlegStreamError }
  | { kind: "stopped" };

export interface EventedPlegOptions {
  runtime: Pick<PodRuntime, "relist">;
  cri: Pick<RuntimeService, "containerEvents">;
  clock: Clock;
  logger: Logger;
  metrics?: Pick<KubeletMetricsSink, "plegRelist">;
  /** What the metrics (built before the PLEG) read the runtime's pods through; served from construction on. */
  view?: RuntimePodsView;
  /** The pods' last reads, for the relist's (see PlegOptions.cache, which its relists confirm); the stream's events are stamped and the pod workers weigh them. */
  cache?: PlegOptions["cache"];
}

export class EventedPleg implements Pleg {
  private state: EventStreamState = { kind: "connecting" };
  private readonly relister: GenericPleg;
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private cancelCacheTimer: (() => void) | undefined;

  constructor(private readonly opts: EventedPlegOptions) {
    const streaming = () => this.state.kind === "streaming";
    this.relister = new GenericPleg({
      runtime: opts.runtime,
      clock: opts.clock,
      logger: opts.logger,
      ...(opts.metrics ? { metrics: opts.metrics } : {}),
      // Its relists confirm the cache's entries too: every second where the runtime does not stream (containerd 1.6,
      // the default here), every 300 s while it streams; between those, moveCacheTime does (a change comes as an event
      // and wakes its pod, whose step then reads).
      ...(opts.cache ? { cache: opts.cache } : {}),
      relistPeriodMs: () => (streaming() ? EVENTED_RELIST_PERIOD_MS : RELIST_PERIOD_MS),
      unhealthyAfterMs: () => (streaming() ? EVENTED_RELIST_THRESHOLD_MS : RELIST_THRESHOLD_MS),
    });
    opts.view?.serve(this);
  }

  start(onEvents: (events: PlegEvent[]) => void): void {
    // The stream is asked for first, so that the first relist begins after it opened (moveCacheTime waits for that).
    this.running = this.watch(onEvents);
    this.relister.start(onEvents);
    if (this.opts.cache?.updateTime) this.scheduleCacheTime();
  }

  private scheduleCacheTime(): void {
    this.cancelCacheTimer = this.opts.clock.setTimer(CACHE_TIME_PERIOD_MS, () => {
      this.moveCacheTime();
      // A runtime without the stream never gets one (the relist every second confirms the cache there).
      if (!this.abort.signal.aborted && this.state.kind !== "unsupported") this.scheduleCacheTime();
    });
  }

  /**
   * Upstream's updateGlobalCache: while the stream is open, a pod whose
   * read no event has overtaken is current, so its resync step plans from
   * that read rather than reading the runtime again. Only once a relist that
   * began after the stream opened has succeeded: what changed while no
   * stream was open is in the records (and woke its pods) by then.
   */
  private moveCacheTime(): void {
    if (this.state.kind !== "streaming") return;
    const listedFrom = this.relister.listedFrom();
    if (listedFrom === undefined || listedFrom < this.state.since) return;
    this.opts.cache?.updateTime?.(this.opts.clock.now() - CACHE_TIME_MARGIN_MS);
  }

  /** The event stream's state (for logs, tests and metrics). */
  streamState(): EventStreamState {
    return this.state;
  }

  runtimePods(): RuntimePodRecord[] {
    return this.relister.runtimePods();
  }

  hasRelisted(): boolean {
    return this.relister.hasRelisted();
  }

  healthy(): { ok: boolean; message: string } {
    return this.relister.healthy();
  }

  private async watch(onEvents: (events: PlegEvent[]) => void): Promise<void> {
    const { clock, logger } = this.opts;
    const signal = this.abort.signal;
    let attempt = 0;
    for (let first = true; !signal.aborted; first = false) {
      const opened = clock.now();
      let delivered = false;
      this.state = { kind: "streaming", since: opened };
      // The first relist runs from start(); a reconnection relists for the gap.
      if (!first) this.relister.relistNow();
      let error: PlegStreamError;
      try {
        for await (const ev of this.opts.cri.containerEvents(signal)) {
          if (!delivered) logger.v(2).info("evented PLEG: container events arriving");
          delivered = true;
          const events = this.apply(ev);
          if (events.length && !signal.aborted) onEvents(events);
        }
        if (signal.aborted) break;
        error = new PlegStreamError("Ended", "the runtime closed the stream");
      } catch (err) {
        if (signal.aborted) break;
        error = PlegStreamError.from(err);
      }
      if (error.kind === "Unimplemented") {
        this.state = { kind: "unsupported", error };
        logger.info("the runtime does not stream container events; relisting every second", { err: error.message });
        this.relister.relistNow();
        return;
      }
      if (delivered || clock.now() - opened >= STREAM_STABLE_MS) attempt = 0;
      attempt++;
      const retryInMs = Math.min(RECONNECT_FIRST_MS * 2 ** (attempt - 1), RECONNECT_MAX_MS);
      this.state = { kind: "reconnecting", attempt, retryInMs, error };
      logger.warn("evented PLEG: container event stream lost; relisting every second until it is back", { err: error.message, attempt, retryInMs });
      this.relister.relistNow();
      try {
        await clock.sleep(retryInMs, signal);
      } catch {
        break;
      }
    }
    this.state = { kind: "stopped" };
  }

  /** Folds one event into its pod's record; the PlegEvents of the change. */
  private apply(ev: ContainerEventResponse): PlegEvent[] {
    const sandbox = ev.podSandboxStatus;
    const identity = sandbox ? identityFromLabels(sandbox.labels) : undefined;
    // A removed sandbox's event has no status (containerd cannot read it any more): the id says which pod.
    const known = this.relister.podOf(ev.containerId);
    const uid = identity?.uid ?? known?.uid;
    if (!uid) return []; // not a kubelet's pod, or not seen yet: the next relist has it
    // The runtime's stamp lets the pod worker drop a wake its last status read already covered.
    const at = ev.createdAt > 0n ? Number(ev.createdAt / 1_000_000n) : undefined;
    const events = this.relister.observe(uid, (previous) => {
      const entities = new Map(previous?.entities ?? []);
      const sandboxIds = new Set(previous?.sandboxIds ?? []);
      const listed = new Set<string>();
      if (sandbox?.id) {
        entities.set(sandbox.id, sandbox.state === PodSandboxState.SANDBOX_READY ? "running" : "exited");
        sandboxIds.add(sandbox.id);
        listed.add(sandbox.id);
      }
      for (const c of ev.containersStatuses) {
        if (!c.id) continue;
        entities.set(c.id, containerStateOf(c.state));
        listed.add(c.id);
      }
      const byType = stateAfter(ev.containerEventType);
      if (byType === "nonexistent") {
        entities.delete(ev.containerId);
        sandboxIds.delete(ev.containerId);
      } else if (byType && !listed.has(ev.containerId)) {
        entities.set(ev.containerId, byType);
      }
      if (entities.size === 0) return undefined;
      return {
        uid,
        name: identity?.name ?? previous?.name ?? "",
        namespace: identity?.namespace ?? previous?.namespace ?? "",
        entities,
        ...(sandboxIds.size ? { sandboxIds } : {}),
      };
    });
    return at === undefined ? events : events.map((e) => ({ ...e, at }));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.abort.abort();
    this.cancelCacheTimer?.();
    await this.relister[Symbol.asyncDispose]();
    await this.running;
  }
}

/** The state an event's type implies for its own container, when its status is not in the event. */
function stateAfter(type: ContainerEventType): ContainerState | "nonexistent" | undefined {
  switch (type) {
    case ContainerEventType.CONTAINER_CREATED_EVENT:
      return "created";
    case ContainerEventType.CONTAINER_STARTED_EVENT:
      return "running";
    case ContainerEventType.CONTAINER_STOPPED_EVENT:
      return "exited";
    case ContainerEventType.CONTAINER_DELETED_EVENT:
      return "nonexistent";
    default:
      return undefined;
  }
}
