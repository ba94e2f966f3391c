/**
 * The node's view of every Service in the cluster, kept by one list+watch
 * (upstream's service informer: the kubelet lists and watches all services,
 * which the Node authorizer allows), so that building a container's
 * environment never asks the API server.
 */
import * as v from "valibot";
import { isApiReason, type KubeApi } from "../api/index.ts";
import { reflect } from "../api/reflector.ts";
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

  /** The reflector over every Service; `unreachable` follows the last list's outcome. */
  private run(): Promise<void> {
    const { api, clock, logger } = this.opts;
    return reflect({
      list: async () => {
        try {
          const list = await api.listServices();
          this.unreachable = false;
          return list;
        } catch (err) {
          this.unreachable = isApiReason(err, "Unreachable") || isApiReason(err, "Timeout");
          throw err;
        }
      },
      watch: (rv, onEvent, signal) => api.watchServices(rv, onEvent, signal),
      onList: (items) => {
        this.services.clear();
        for (const item of items) this.put(item);
        this.synced = true;
      },
      onEvent: (e) => {
        if (e.type === "ADDED" || e.type === "MODIFIED") this.put(e.object);
        else if (e.type === "DELETED") this.services.delete(`${e.object.metadata?.namespace}/${e.object.metadata?.name}`);
      },
      onFailure: (err) => {
        logger.warn("watching services failed; retrying", { err: errorMessage(err) });
        return this.opts.retryMs ?? 1000;
      },
      clock,
      signal: this.abort.signal,
    });
  }
}
