/**
 * The API server pod source: pods bound to this node (`spec.nodeName`),
 * listed once, then watched from the list's resourceVersion (upstream
 * reflector). Bookmarks move the resourceVersion on; `410 Gone` (the
 * version was compacted) means list again; any other failure reconnects
 * with backoff from 1s to 30s. The source reports its whole view, so a
 * relist after an outage reconciles adds, updates and deletes it missed.
 *
 * Offline autonomy (bunlet): with a checkpoint store, every real view is
 * written to `checkpoints/pods/<uid>` (debounced; status, managedFields and
 * resourceVersion left out, so status updates cause no writes). If the
 * first list fails, the checkpointed pods not older than `maxAgeMs` are
 * reported as a provisional view, so they run while the API server is
 * unreachable; its first list then replaces them by UID (unchanged pods are
 * not restarted).
 */
import { isApiReason, type ApiObject, type KubeApi } from "../api/index.ts";
import type { CheckpointStore } from "../checkpoint/index.ts";
import { isMirrorPod } from "../pods/mirror.ts";
import { parsePod, type Pod } from "../pods/schema.ts";
import { canonicalJson } from "./defaults.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { PodSource, SourceSnapshot } from "./types.ts";

export interface ApiServerSourceOptions {
  api: Pick<KubeApi, "listPods" | "watchPods">;
  nodeName: string;
  clock: Clock;
  logger: Logger;
  /** Mirror pods are the API's copies of static pods: never run, handed here instead. */
  onMirrorPods?: (mirrors: Pod[]) => void;
  /** Offline autonomy; without it nothing is written or read. */
  checkpoint?: { store: CheckpointStore; maxAgeMs: number; debounceMs?: number };
}

/** The checkpoint kind for the node's API pods. */
export const POD_CHECKPOINT_KIND = "pods";

/**
 * What is kept of an API pod: its spec and metadata, and of its status only
 * what decides whether it runs again (a terminal phase) and its start time
 * (activeDeadlineSeconds). Volatile fields are left out so that status
 * updates do not rewrite the file.
 */
export function checkpointForm(object: ApiObject): ApiObject {
  const { status, ...rest } = object as ApiObject & { status?: { phase?: string; startTime?: string } };
  const { managedFields: _m, resourceVersion: _r, ...metadata } = object.metadata ?? {};
  const kept = { ...(status?.phase ? { phase: status.phase } : {}), ...(status?.startTime ? { startTime: status.startTime } : {}) };
  return { ...rest, metadata, ...(Object.keys(kept).length ? { status: kept } : {}) };
}

const keyOf = (o: ApiObject) => `${o.metadata?.namespace}/${o.metadata?.name}`;

export class ApiServerSource implements PodSource {
  readonly name = "api" as const;
  private readonly pods = new Map<string, Pod>();
  /** The API objects behind `pods`, in checkpoint form, by the same key. */
  private readonly raw = new Map<string, ApiObject>();
  /** Checkpoint file contents last written, by UID; seeded with the files found at start. */
  private written: Map<string, string> | undefined;
  private cancelCheckpoint: (() => void) | undefined;
  private listedOnce = false;
  private offlineViewTried = false;
  private resourceVersion = "";
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private emitScheduled = false;
  private emitFn: (s: SourceSnapshot) => void = () => {};

  constructor(private readonly opts: ApiServerSourceOptions) {}

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
    if (this.opts.checkpoint && !isMirrorPod(parsed.value)) this.raw.set(keyOf(object), checkpointForm(object));
  }

  /**
   * The first list failed: report the checkpointed pods (once) as a
   * provisional view, so they run until the API server answers.
   */
  private startFromCheckpoint(err: unknown): void {
    const checkpoint = this.opts.checkpoint;
    if (!checkpoint || this.offlineViewTried) return;
    this.offlineViewTried = true;
    const { logger, clock } = this.opts;
    const pods: Pod[] = [];
    let tooOld = 0;
    for (const entry of checkpoint.store.list(POD_CHECKPOINT_KIND)) {
      if (clock.now() - entry.writtenAt > checkpoint.maxAgeMs) {
        tooOld++;
        continue;
      }
      const parsed = parsePod(entry.data);
      if (parsed.ok && parsed.value.metadata.uid === entry.key) pods.push(parsed.value);
      else logger.warn("ignoring checkpointed pod: it does not parse", { uid: entry.key, reason: parsed.ok ? "UID differs from its key" : parsed.error });
    }
    logger.warn("API server unreachable at start; running the pods of the local checkpoint until it answers", {
      err: errorMessage(err),
      pods: pods.length,
      ...(tooOld ? { olderThanMaxAge: tooOld } : {}),
    });
    if (pods.length === 0) return;
    this.emitFn({ source: "api", pods, provisional: true });
  }

  /** Debounced: a burst of changes makes one pass over the checkpoint files. */
  private scheduleCheckpoint(): void {
    const checkpoint = this.opts.checkpoint;
    if (!checkpoint || this.cancelCheckpoint) return;
    this.cancelCheckpoint = this.opts.clock.setTimer(checkpoint.debounceMs ?? 500, () => {
      this.cancelCheckpoint = undefined;
      this.writeCheckpoint();
    });
  }

  /** Writes changed pods and removes the files of pods gone; a failed write is retried on the next change. */
  private writeCheckpoint(): void {
    const checkpoint = this.opts.checkpoint;
    if (!checkpoint || !this.listedOnce) return;
    const { store } = checkpoint;
    const written = (this.written ??= new Map(store.keys(POD_CHECKPOINT_KIND).map((uid) => [uid, ""])));
    const current = new Map<string, ApiObject>();
    for (const object of this.raw.values()) current.set(object.metadata?.uid ?? "", object);
    try {
      for (const [uid, object] of current) {
        if (!uid) continue;
        const json = canonicalJson(object);
        if (written.get(uid) === json) continue;
        store.write(POD_CHECKPOINT_KIND, uid, object);
        written.set(uid, json);
      }
      for (const uid of [...written.keys()]) {
        if (current.has(uid)) continue;
        store.remove(POD_CHECKPOINT_KIND, uid);
        written.delete(uid);
      }
    } catch (err) {
      this.opts.logger.warn("could not write the pod checkpoint; will retry on the next change", { err: errorMessage(err) });
    }
  }

  /** Coalesces a burst of watch events into one snapshot. */
  private scheduleEmit(): void {
    if (this.emitScheduled) return;
    this.emitScheduled = true;
    queueMicrotask(() => {
      this.emitScheduled = false;
      if (this.abort.signal.aborted) return;
      const all = [...this.pods.values()];
      this.opts.onMirrorPods?.(all.filter(isMirrorPod));
      this.emitFn({ source: "api", pods: all.filter((p) => !isMirrorPod(p)) });
      this.scheduleCheckpoint();
    });
  }

  /** Stops watching; a checkpoint write still pending is made now, so a restart finds the latest view. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.abort.abort();
    await this.running?.catch(() => {});
    if (this.cancelCheckpoint) {
      this.cancelCheckpoint();
      this.cancelCheckpoint = undefined;
      this.writeCheckpoint();
    }
  }
}

class WatchExpired extends Error {}
