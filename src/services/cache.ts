/**
 * The node's view of every Service in the cluster, kept by one list+watch
 * (upstream's service informer: the kubelet lists and watches all services,
 * which the Node authorizer allows), so that building a container's
 * environment never asks the API server.
 */
import * as v from "valibot";
import { isApiReason, type KubeApi } from "../api/index.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { Service } from "./envvars.ts";
import type { ServiceLister } from "./index.ts";

export interface WatchedServicesOptions {
  api: Pick<KubeApi, "listServices" | "watchServices">;
  clock: Clock;
  logger: Logger;
  /** Pause before listing again after a failed list or watch. */
  retryMs?: number;
}

export class WatchedServices implements ServiceLister, AsyncDisposable {
  private readonly services = new Map<string, Service>();
  private synced = false;
  private unreachable = false;
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;

  constructor(private readonly opts: WatchedServicesOptions) {}

  /** Starts the list+watch loop; idempotent. */
  start(): this {
    this.running ??= this.run();
    return this;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  apiUnreachable(): boolean {
    return this.unreachable;
  }

  list(): Service[] {
    return [...this.services.values()];
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.abort.abort();
    await this.running;
  }

  /** A service the API server sent that this agent cannot read is left out (logged), never a crash. */
  private parse(o: unknown): Service | undefined {
    const r = v.safeParse(Service, o);
    if (r.success) return r.output;
    this.opts.logger.warn("ignoring a service that does not parse", { issue: r.issues[0]?.message });
    return undefined;
  }

  private put(o: unknown): void {
    const s = this.parse(o);
    if (s) this.services.set(`${s.metadata.namespace}/${s.metadata.name}`, s);
  }

  /** List, then watch from the list's version; relist after an error, a 410 or the end of the watch. */
  private async run(): Promise<void> {
    const { api, clock, logger } = this.opts;
    const signal = this.abort.signal;
    while (!signal.aborted) {
      try {
        let list;
        try {
          list = await api.listServices();
          this.unreachable = false;
        } catch (err) {
          this.unreachable = isApiReason(err, "Unreachable") || isApiReason(err, "Timeout");
          throw err;
        }
        if (signal.aborted) return;
        this.services.clear();
        for (const item of list.items) this.put(item);
        this.synced = true;
        let rv = list.resourceVersion;
        for (let relist = false; !relist && !signal.aborted; ) {
          const watch = new AbortController();
          const stop = () => watch.abort();
          signal.addEventListener("abort", stop, { once: true });
          try {
            await api.watchServices(
              rv,
              (e) => {
                if (e.type === "ERROR") {
                  relist = true; // 410 Gone: our version is too old
                  watch.abort();
                  return;
                }
                rv = e.object.metadata?.resourceVersion ?? rv;
                if (e.type === "ADDED" || e.type === "MODIFIED") this.put(e.object);
                else if (e.type === "DELETED") this.services.delete(`${e.object.metadata?.namespace}/${e.object.metadata?.name}`);
              },
              watch.signal,
            );
          } finally {
            signal.removeEventListener("abort", stop);
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        logger.warn("watching services failed; retrying", { err: errorMessage(err) });
        await clock.sleep(this.opts.retryMs ?? 1000, signal).catch(() => {});
      }
    }
  }
}
