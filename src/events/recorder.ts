/**
 * Events as the kubelet records them (client-go record): a repeat of the
 * same object, type, reason and message within 10 minutes bumps `count`
 * and `lastTimestamp` of the existing Event instead of creating another;
 * writes wait for the event client's own rate limit (eventRecordQPS /
 * eventBurst, agent/cluster.ts), and are dropped only when 1000 are already
 * waiting or under way, as upstream's broadcaster queue (client-go record,
 * maxQueuedEvents). Recording never blocks or throws.
 */
import { randomBytes } from "node:crypto";
import type { KubeApi } from "../api/index.ts";
import { podRef } from "../pods/identity.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";

export interface ObjectRef {
  kind: "Pod" | "Node" | "PersistentVolumeClaim";
  name: string;
  namespace?: string;
  uid: string;
  fieldPath?: string;
}

export type EventType = "Normal" | "Warning";

export interface EventRecorder {
  event(object: ObjectRef, type: EventType, reason: string, message: string): void;
}

type Named = { name: string }[] | undefined;

/**
 * A pod (and one of its containers) as the object of an event. The
 * container's fieldPath says which list it is in, as upstream's
 * GenerateContainerRef (pkg/kubelet/container/ref.go:33-78):
 * spec.containers{c}, spec.initContainers{c} (sidecars too),
 * spec.ephemeralContainers{c}; one the spec lacks is an "implicitly
 * required container c". Without the spec (only metadata known):
 * spec.containers{c}.
 */
export const podEventRef = (
  pod: { metadata: { name?: string; namespace?: string; uid?: string }; spec?: { containers?: Named; initContainers?: Named; ephemeralContainers?: Named } },
  container?: string,
): ObjectRef => ({
  kind: "Pod",
  ...podRef(pod),
  ...(container ? { fieldPath: containerFieldPath(pod.spec, container) } : {}),
});

function containerFieldPath(spec: { containers?: Named; initContainers?: Named; ephemeralContainers?: Named } | undefined, container: string): string {
  if (!spec) return `spec.containers{${container}}`;
  for (const list of ["containers", "initContainers", "ephemeralContainers"] as const) {
    if (spec[list]?.some((c) => c.name === container)) return `spec.${list}{${container}}`;
  }
  return `implicitly required container ${container}`;
}

/** Upstream's node reference: the UID is the node name, events go to "default". */
export const nodeRef = (nodeName: string): ObjectRef => ({ kind: "Node", name: nodeName, uid: nodeName });

export class LogEventRecorder implements EventRecorder {
  constructor(private readonly logger: Logger) {}
  event(object: ObjectRef, type: EventType, reason: string, message: string): void {
    this.logger.v(1).info("event", { object: `${object.kind}/${object.namespace ? object.namespace + "/" : ""}${object.name}`, type, reason, message });
  }
}

const AGGREGATE_WINDOW_MS = 10 * 60_000;
/** Upstream's aggregation cache holds 4096 events (an LRU); the oldest beyond that are forgotten. */
export const AGGREGATE_CACHE_SIZE = 4096;

/** client-go record's maxQueuedEvents: writes waiting or under way before new events are dropped. */
export const MAX_QUEUED_EVENTS = 1000;

export class ApiEventRecorder implements EventRecorder {
  private queued = 0;
  /** Events of the last 10 minutes by key, oldest use first (a repeat moves its entry to the end). */
  private readonly recent = new Map<string, { name: string; namespace: string; count: number; first: string; at: number }>();
  private readonly log: LogEventRecorder;

  constructor(
    private readonly opts: {
      api: Pick<KubeApi, "createEvent" | "patchEvent">;
      nodeName: string;
      clock: Clock;
      logger: Logger;
    },
  ) {
    this.log = new LogEventRecorder(opts.logger);
  }

  event(object: ObjectRef, type: EventType, reason: string, message: string): void {
    this.log.event(object, type, reason, message);
    if (this.queued >= MAX_QUEUED_EVENTS) {
      this.opts.logger.error("Unable to record event: too many queued events, dropped event", { reason, object: object.name });
      return;
    }
    const now = this.opts.clock.now();
    const stamp = new Date(now).toISOString().replace(/\.\d{3}Z$/, "Z");
    const key = JSON.stringify([object.uid, object.fieldPath, type, reason, message]);
    const seen = this.recent.get(key);
    const namespace = object.namespace ?? "default";
    if (seen && now - seen.at < AGGREGATE_WINDOW_MS) {
      seen.count++;
      seen.at = now;
      this.recent.delete(key);
      this.recent.set(key, seen);
      this.write(this.opts.api.patchEvent(seen.namespace, seen.name, { count: seen.count, lastTimestamp: stamp }), "event patch failed", reason);
      return;
    }
    this.prune(now);
    const name = `${object.name}.${randomBytes(8).toString("hex")}`;
    this.recent.set(key, { name, namespace, count: 1, first: stamp, at: now });
    this.write(
      this.opts.api.createEvent(namespace, {
        apiVersion: "v1",
        kind: "Event",
        metadata: { name, namespace },
        involvedObject: {
          apiVersion: "v1",
          kind: object.kind,
          name: object.name,
          uid: object.uid,
          ...(object.namespace ? { namespace: object.namespace } : {}),
          ...(object.fieldPath ? { fieldPath: object.fieldPath } : {}),
        },
        reason,
        message,
        type,
        count: 1,
        firstTimestamp: stamp,
        lastTimestamp: stamp,
        source: { component: "kubelet", host: this.opts.nodeName },
        reportingComponent: "kubelet",
        reportingInstance: this.opts.nodeName,
      }),
      "event create failed",
      reason,
    );
  }

  /** Counts a write while it waits for the rate limit or the API server. */
  private write(call: Promise<unknown>, failure: string, reason: string): void {
    this.queued++;
    void call
      .catch((err) => this.opts.logger.v(2).info(failure, { reason, err: errorMessage(err) }))
      .finally(() => {
        this.queued--;
      });
  }

  /** From the oldest use on, up to the first entry still in the window: a burst of pod starts made scanning them all quadratic. */
  private prune(now: number): void {
    for (const [k, v] of this.recent) {
      if (now - v.at < AGGREGATE_WINDOW_MS && this.recent.size < AGGREGATE_CACHE_SIZE) return;
      this.recent.delete(k);
    }
  }
}
