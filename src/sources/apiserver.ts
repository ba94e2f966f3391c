/**
 * The API server pod source: pods bound to this node (`spec.nodeName`),
 * listed once, then watched from the list's resourceVersion (upstream
 * reflector). Bookmarks move the resourceVersion on; `410 Gone` (the
 * version was compacted) means list again; any other failure reconnects
 * with backoff from 1s to 30s. The source reports its whole view, so a
 * relist after an outage reconciles adds, updates and deletes it missed.
 *
 * Offline autonomy (bunlet): with a checkpoint, every real view is kept on
 * disk (pod-checkpoint.ts). If the first list fails, the checkpointed pods
 * are reported as a provisional view, so they run while the API server is
 * unreachable; its first list then replaces them by UID, so unchanged pods
 * are not restarted.
 */
import { isApiReason, type ApiObject, type KubeApi } from "../api/index.ts";
import { parsePod, type Pod } from "../pods/schema.ts";
import { PodCheckpoint, type PodCheckpointOptions } from "./pod-checkpoint.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { PodSource, SourceSnapshot } from "./types.ts";
import { isMirrorPod } from "../pods/source.ts";

/** What hears of the mirror pods the API server has for this node (its copies of static pods, never run here) whenever they may have changed. */
export interface MirrorPodsObserver {
  mirrorPodsChanged(mirrors: Pod[]): void;
}

export interface ApiServerSourceOptions {
  api: Pick<KubeApi, "listPods" | "watchPods">;
  nodeName: string;
  clock: Clock;
  logger: Logger;
  /** Mirror pods are never run: they are handed to these instead, in this order (the mirror pod manager, then the status manager that sends to them). */
  mirrorPods?: readonly MirrorPodsObserver[];
  /** Offline autonomy; without it nothing is written or read. */
  checkpoint?: Omit<PodCheckpointOptions, "clock" | "logger">;
}

const keyOf = (o: ApiObject) => `${o.metadata?.namespace}/${o.metadata?.name}`;

export class ApiServerSource implements PodSource {
  readonly name = "api" as const;
  private readonly pods = new Map<string, Pod>();
  /** The API objects behind `pods` (mirror pods excluded), kept for the checkpoint. */
  private readonly raw = new Map<string, ApiObject>();
  private readonly checkpoint: PodCheckpoint | undefined;
  private listedOnce = false;
  private offlineViewTried = false;
  private resourceVersion = "";
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private emitScheduled = false;
  private emitFn: (s: SourceSnapshot) => void = () => {};

  constructor(private readonly opts: ApiServerSourceOptions) {
    this.checkpoint = opts.checkpoint && new PodCheckpoint({ ...opts.checkpoint, clock: opts.clock, logger: opts.logger }, () => this.raw.values());
  }

  start(emit: (snapshot: SourceSnapshot) => void): void {
    this.emitFn = emit;
    this.running = this.run();
  }

  /** The resourceVersion the next watch resumes from; for tests and debugging. */
  lastResourceVersion(): string {
    return this.resourceVersion;
  }

  private get selector(): string {
    return `spec.nodeName=${this.opts.nodeName}`;
  }

  private async run(): Promise<void> {
    const { clock, logger } = this.opts;
    const signal = this.abort.signal;
    let backoffMs = 1000;
    let needList = true;
    while (!signal.aborted) {
      try {
        if (needList) {
          await this.list();
          needList = false;
        }
        await this.watchOnce(signal);
        backoffMs = 1000; // the server ended a healthy watch (timeout): resume at once
      } catch (err) {
        if (signal.aborted) return;
        if (needList && !this.listedOnce) this.startFromCheckpoint(err);
        if (isApiReason(err, "Gone") || isApiReason(err, "Expired") || err instanceof WatchExpired) {
          logger.info("pod watch resourceVersion too old; listing again", { resourceVersion: this.resourceVersion });
          needList = true;
          continue;
        }
        logger.warn("pod watch failed; reconnecting", { err: errorMessage(err), retryInMs: backoffMs });
        await clock.sleep(backoffMs, signal).catch(() => {});
        backoffMs = Math.min(backoffMs * 2, 30_000);
      }
    }
  }

  /** One watch; an ERROR event ends it and is rethrown here, outside the stream's callback. */
  private async watchOnce(signal: AbortSignal): Promise<void> {
    const watch = new AbortController();
    const both = AbortSignal.any([signal, watch.signal]);
    let failure: unknown;
    await this.opts.api.watchPods(
      this.selector,
      this.resourceVersion,
      (e) => {
        if (failure) return;
        try {
          this.onEvent(e.type, e.object);
        } catch (err) {
          failure = err;
          watch.abort();
        }
      },
      both,
    );
    if (failure) throw failure;
  }

  private async list(): Promise<void> {
    const list = await this.opts.api.listPods(this.selector);
    this.pods.clear();
    this.raw.clear();
    for (const item of list.items) this.store(item);
    this.resourceVersion = list.resourceVersion;
    if (!this.listedOnce && this.offlineViewTried) this.opts.logger.info("API server reachable again; its pods replace the checkpoint", { pods: this.pods.size });
    this.listedOnce = true;
    this.scheduleEmit();
    this.checkpoint?.confirmed();
  }

  private onEvent(type: string, object: ApiObject): void {
    switch (type) {
      case "ADDED":
      case "MODIFIED":
        this.store(object);
        break;
      case "DELETED":
        this.pods.delete(keyOf(object));
        this.raw.delete(keyOf(object));
        break;
      case "BOOKMARK":
        this.checkpoint?.confirmed();
        break;
      case "ERROR": {
        const status = object as { code?: number; reason?: string; message?: string };
        if (status.code === 410 || status.reason === "Expired" || status.reason === "Gone") throw new WatchExpired();
        throw new Error(`watch error: ${status.message ?? status.reason ?? "unknown"}`);
      }
    }
    const rv = object.metadata?.resourceVersion;
    if (rv) this.resourceVersion = rv;
    if (type !== "BOOKMARK") this.scheduleEmit();
  }

  private store(object: ApiObject): void {
    const parsed = parsePod(object);
    if (!parsed.ok) {
      this.opts.logger.error("ignoring pod the API server sent: it does not parse", { pod: keyOf(object), reason: parsed.error });
      return;
    }
    this.pods.set(keyOf(object), parsed.value);
    if (this.checkpoint && !isMirrorPod(parsed.value)) this.raw.set(keyOf(object), object);
  }

  /** The first list failed: report the checkpointed pods (once) as a provisional view, so they run until the API server answers. */
  private startFromCheckpoint(err: unknown): void {
    if (!this.checkpoint || this.offlineViewTried) return;
    this.offlineViewTried = true;
    const { pods, tooOld } = this.checkpoint.restore();
    this.opts.logger.warn("API server unreachable at start; running the pods of the local checkpoint until it answers", {
      err: errorMessage(err),
      pods: pods.length,
      ...(tooOld ? { olderThanMaxAge: tooOld } : {}),
    });
    if (pods.length > 0) this.emitFn({ source: "api", pods, provisional: true });
  }

  /** Coalesces a burst of watch events into one snapshot. */
  private scheduleEmit(): void {
    if (this.emitScheduled) return;
    this.emitScheduled = true;
    queueMicrotask(() => {
      this.emitScheduled = false;
      if (this.abort.signal.aborted) return;
      const all = [...this.pods.values()];
      const mirrors = all.filter(isMirrorPod);
      for (const o of this.opts.mirrorPods ?? []) o.mirrorPodsChanged(mirrors);
      this.emitFn({ source: "api", pods: all.filter((p) => !isMirrorPod(p)) });
      this.checkpoint?.changed();
    });
  }

  /** Stops watching; a checkpoint pass still pending is made now. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.abort.abort();
    await this.running?.catch(() => {});
    this.checkpoint?.flush();
  }
}

class WatchExpired extends Error {}
