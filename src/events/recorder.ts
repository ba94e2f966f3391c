/**
 * Events as the kubelet records them (client-go record): each event goes
 * through upstream's EventCorrelator (correlator.ts: similar events
 * combined, repeats patched as a count, each object limited to 25 events
 * then one every 5 minutes), then is written one at a time, as upstream's
 * recordToSink, through the event client's own rate limit (eventRecordQPS /
 * eventBurst, agent/cluster.ts). A write that got no answer is tried again,
 * up to 12 times 10 s apart; one the server answered with an error is not;
 * a patch of an event the server no longer has creates it again. Events
 * are dropped when 1000 are already waiting or being written (upstream's
 * maxQueuedEvents), and when the recorder stops. Recording never blocks
 * or throws.
 */
import { ApiError, type ApiObject, hasStatusCause, type KubeApi } from "../api/index.ts";
import { podRef } from "../pods/identity.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { type CoreEvent, EventCorrelator, type EventPatch, timestamp } from "./correlator.ts";

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
    // Upstream's broadcaster logs every event so (StartStructuredLogging(3) in cmd/kubelet).
    this.logger.v(3).info("Event occurred", {
      object: `${object.namespace ? object.namespace + "/" : ""}${object.name}`,
      fieldPath: object.fieldPath ?? "",
      kind: object.kind,
      apiVersion: "v1",
      type,
      reason,
      message,
    });
  }
}

/** client-go record's maxQueuedEvents: events waiting or being written (their retries too) before new ones are dropped. */
export const MAX_QUEUED_EVENTS = 1000;
/** maxTriesPerEvent and defaultSleepDuration: a write that could not reach the server is tried 12 times, 10 s apart. */
export const MAX_TRIES_PER_EVENT = 12;
export const RETRY_INTERVAL_MS = 10_000;

interface Pending {
  object: ObjectRef;
  type: EventType;
  reason: string;
  message: string;
  stamp: string;
}

export class ApiEventRecorder implements EventRecorder, Disposable {
  /** Events not yet taken by the writer, oldest first. */
  private readonly queue: Pending[] = [];
  /** An event is being written (or waits to retry): it counts against MAX_QUEUED_EVENTS. */
  private writing = false;
  private readonly stopped = new AbortController();
  private readonly correlator: EventCorrelator;
  private readonly eventName: (objectName: string) => string;
  private readonly log: LogEventRecorder;

  constructor(
    private readonly opts: {
      api: Pick<KubeApi, "createEvent" | "patchEvent">;
      nodeName: string;
      clock: Clock;
      logger: Logger;
      /** Jitters the first retry, as upstream's rand.Float64. */
      random: () => number;
    },
  ) {
    this.log = new LogEventRecorder(opts.logger);
    this.eventName = eventNamer(() => opts.clock.now());
    this.correlator = new EventCorrelator({ now: () => opts.clock.now(), newName: this.eventName });
  }

  event(object: ObjectRef, type: EventType, reason: string, message: string): void {
    this.log.event(object, type, reason, message);
    if (this.stopped.signal.aborted) {
      this.opts.logger.v(2).info("event not written: the event recorder is stopped", { reason, object: object.name });
      return;
    }
    if (this.queue.length + (this.writing ? 1 : 0) >= MAX_QUEUED_EVENTS) {
      this.opts.logger.error("Unable to record event: too many queued events, dropped event", { reason, object: object.name });
      return;
    }
    this.queue.push({ object, type, reason, message, stamp: timestamp(this.opts.clock.now()) });
    if (!this.writing) void this.drain();
  }

  /** Stops writing: what is queued is dropped and a write waiting to retry gives up, so no timer is left behind. */
  [Symbol.dispose](): void {
    if (this.stopped.signal.aborted) return;
    this.stopped.abort(new Error("the event recorder is stopped"));
    if (this.queue.length) this.opts.logger.v(2).info("event recorder stopped: queued events not written", { events: this.queue.length });
    this.queue.length = 0;
  }

  /** One event at a time, as upstream's recordToSink: while the server cannot be reached, the others wait. */
  private async drain(): Promise<void> {
    this.writing = true;
    try {
      for (let next = this.queue.shift(); next && !this.stopped.signal.aborted; next = this.queue.shift()) {
        // A bug here must lose one event, not the writer (or the agent, to an unhandled rejection).
        await this.record(next).catch((err) => this.opts.logger.error("Unable to write event", { reason: next?.reason, err: errorMessage(err) }));
      }
    } finally {
      this.writing = false;
    }
  }

  private async record(p: Pending): Promise<void> {
    const namespace = p.object.namespace ?? "default";
    const result = this.correlator.correlate({
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: this.eventName(p.object.name), namespace },
      involvedObject: {
        apiVersion: "v1",
        kind: p.object.kind,
        name: p.object.name,
        uid: p.object.uid,
        ...(p.object.namespace ? { namespace: p.object.namespace } : {}),
        ...(p.object.fieldPath ? { fieldPath: p.object.fieldPath } : {}),
      },
      reason: p.reason,
      message: p.message,
      type: p.type,
      count: 1,
      firstTimestamp: p.stamp,
      lastTimestamp: p.stamp,
      source: { component: "kubelet", host: this.opts.nodeName },
      reportingComponent: "kubelet",
      reportingInstance: this.opts.nodeName,
    });
    if (result.skip) {
      // Upstream drops these without a word; here at a verbosity where one looks for a missing event.
      this.opts.logger.v(5).info("event dropped: its object is over the event rate limit (25, then one every 5 minutes)", { reason: p.reason, object: p.object.name });
      return;
    }
    const { event, patch } = result;
    for (let tries = 1; ; tries++) {
      if (await this.write(event, patch)) return;
      if (tries >= MAX_TRIES_PER_EVENT) {
        this.opts.logger.error("Unable to write event (retry limit exceeded!)", { reason: event.reason, object: p.object.name });
        return;
      }
      // The first sleep is random so that the nodes do not all retry at once when the API server comes back.
      const delay = tries === 1 ? RETRY_INTERVAL_MS * this.opts.random() : RETRY_INTERVAL_MS;
      try {
        await this.opts.clock.sleep(delay, this.stopped.signal);
      } catch {
        this.opts.logger.error("Unable to write event (the event recorder is stopped)", { reason: event.reason, object: p.object.name });
        return;
      }
    }
  }

  /**
   * recordEvent: true when the event is written or the server rejected it for good (any answer with a
   * status: upstream's StatusError is never retried), false when it should be tried again (no answer).
   */
  private async write(event: CoreEvent, patch: EventPatch | undefined): Promise<boolean> {
    const { namespace, name } = event.metadata;
    try {
      if (patch) {
        try {
          await this.opts.api.patchEvent(namespace, name, patch);
          return true;
        } catch (err) {
          // The event is gone (the API server's event TTL): written afresh, with its count.
          if (!(err instanceof ApiError && err.status === 404)) throw err;
        }
      }
      await this.opts.api.createEvent(namespace, event as unknown as ApiObject);
      return true;
    } catch (err) {
      const fields = { reason: event.reason, object: event.involvedObject.name, err: errorMessage(err) };
      if (err instanceof ApiError && err.status > 0) {
        // As upstream's recordEvent: expected rejections (the event already written; its namespace being deleted) are quiet.
        if (err.reason === "AlreadyExists" || hasStatusCause(err, "NamespaceTerminating")) this.opts.logger.v(5).info("Server rejected event (will not retry!)", fields);
        else this.opts.logger.error("Server rejected event (will not retry!)", fields);
        return true;
      }
      this.opts.logger.error("Unable to write event (may retry after sleeping)", fields);
      return false;
    }
  }
}

/**
 * Event names as upstream makes them: the object's name and the time in
 * nanoseconds, in hex. The clock has milliseconds, so names made in the same
 * millisecond count on by one nanosecond: a name is never reused (a second
 * create would be refused as AlreadyExists and the event lost).
 */
export function eventNamer(now: () => number): (objectName: string) => string {
  let last = 0n;
  return (objectName) => {
    const nanos = BigInt(Math.floor(now())) * 1_000_000n;
    last = nanos > last ? nanos : last + 1n;
    return `${objectName}.${last.toString(16)}`;
  };
}
