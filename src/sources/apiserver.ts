/**
 * The API server pod source: pods bound to this node (`spec.nodeName`),
 * listed once, then watched from the list's resourceVersion (upstream
 * reflector). Bookmarks move the resourceVersion on; `410 Gone` (the
 * version was compacted) means list again; any other failure reconnects
 * with backoff from 1s to 30s. The source reports its whole view, so a
 * relist after an outage reconciles adds, updates and deletes it missed.
 */
import { isApiReason, type ApiObject, type KubeApi } from "../api/index.ts";
import { isMirrorPod } from "../pods/mirror.ts";
import { parsePod, type Pod } from "../pods/schema.ts";
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
}

const keyOf = (o: ApiObject) => `${o.metadata?.namespace}/${o.metadata?.name}`;

export class ApiServerSource implements PodSource {
  readonly name = "api" as const;
  private readonly pods = new Map<string, Pod>();
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
    for (const item of list.items) this.store(item);
    this.resourceVersion = list.resourceVersion;
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
    });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.abort.abort();
    await this.running?.catch(() => {});
  }
}

class WatchExpired extends Error {}
