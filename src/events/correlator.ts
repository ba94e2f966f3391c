/**
 * client-go record's EventCorrelator (tools/record/events_cache.go), which
 * decides what an event costs the API server before it is written:
 * - aggregation: the 10th distinct message of the same source, object,
 *   type and reason within 10 minutes (and every one after it) becomes one
 *   event "(combined from similar events): <message>", patched from then on;
 * - dedup: a repeat of an event already written (same source, object with
 *   its fieldPath, type, reason and message) patches its count, message and
 *   lastTimestamp, for as long as its key is among the 4096 last used (no
 *   time window, as upstream: the API server's event TTL deletes the event,
 *   and the patch's 404 then creates it afresh);
 * - spam filter: each source and object (and type) may send a burst of 25
 *   events, then one every 5 minutes; the rest are dropped.
 * The three run in upstream's order (aggregate, dedup, filter): a filtered
 * event still counts in the first two, as upstream's.
 */

/** The v1 Event as the kubelet writes it. */
export interface CoreEvent {
  apiVersion: "v1";
  kind: "Event";
  metadata: { name: string; namespace: string };
  involvedObject: { apiVersion: string; kind: string; name: string; uid: string; namespace?: string; fieldPath?: string };
  reason: string;
  message: string;
  type: string;
  count: number;
  firstTimestamp: string;
  lastTimestamp: string;
  source: { component: string; host: string };
  reportingComponent: string;
  reportingInstance: string;
}

/** What a repeat changes: upstream's two-way merge patch of the event against itself without these three. */
export interface EventPatch {
  count: number;
  lastTimestamp: string;
  message: string;
}

/** Upstream's maxLruCacheEntries: each of the three caches remembers this many keys, the least recently used are forgotten. */
export const CORRELATOR_CACHE_SIZE = 4096;
/** defaultAggregateMaxEvents and defaultAggregateIntervalInSeconds: distinct messages within the interval before they are combined. */
export const AGGREGATE_MAX_EVENTS = 10;
export const AGGREGATE_INTERVAL_MS = 600_000;
/** defaultSpamBurst and defaultSpamQPS: 25 events per source and object, then one every 300 s. */
export const SPAM_BURST = 25;
export const SPAM_REFILL_MS = 300_000;
export const AGGREGATE_MESSAGE_PREFIX = "(combined from similar events): ";

/** A Map kept in use order: a read or write moves the key to the end, the first is evicted beyond `size`. */
class Lru<V> {
  private readonly entries = new Map<string, V>();
  constructor(private readonly size: number) {}
  get(key: string): V | undefined {
    const v = this.entries.get(key);
    if (v !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, v);
    }
    return v;
  }
  set(key: string, v: V): void {
    this.entries.delete(key);
    this.entries.set(key, v);
    if (this.entries.size > this.size) this.entries.delete(this.entries.keys().next().value as string);
  }
}

/** The fields of every key: the event's source and its object (upstream's keys all begin so). */
const sourceAndObject = (e: CoreEvent) => [
  e.source.component,
  e.source.host,
  e.involvedObject.kind,
  e.involvedObject.namespace,
  e.involvedObject.name,
  e.involvedObject.uid,
  e.involvedObject.apiVersion,
];

// Upstream joins these fields without a separator; JSON keeps two different field lists from meeting in one key.
/** getEventKey: with the fieldPath and the message. */
const eventKey = (e: CoreEvent): string => JSON.stringify([...sourceAndObject(e), e.involvedObject.fieldPath, e.type, e.reason, e.message]);

/** getSpamKey: no fieldPath, reason or message, so all of a pod's containers share the pod's budget. */
const spamKey = (e: CoreEvent): string => JSON.stringify([...sourceAndObject(e), e.type]);

/** EventAggregatorByReasonFunc's aggregate key: no fieldPath and no message (the message is the local key). */
const aggregateKey = (e: CoreEvent): string => JSON.stringify([...sourceAndObject(e), e.type, e.reason, e.reportingComponent, e.reportingInstance]);

export type Correlated = { skip: true } | { skip: false; event: CoreEvent; patch?: EventPatch };

export class EventCorrelator {
  private readonly aggregates: Lru<{ messages: Set<string>; at: number }>;
  private readonly observed: Lru<{ name: string; count: number; firstTimestamp: string }>;
  private readonly buckets: Lru<{ tokens: number; at: number }>;

  constructor(
    private readonly opts: {
      /** Milliseconds since the epoch (the injected clock). */
      now: () => number;
      /** A fresh event name for an aggregate event, as the recorder names its events. */
      newName: (objectName: string) => string;
      cacheSize?: number;
    },
  ) {
    const size = opts.cacheSize ?? CORRELATOR_CACHE_SIZE;
    this.aggregates = new Lru(size);
    this.observed = new Lru(size);
    this.buckets = new Lru(size);
  }

  /** EventCorrelate: the event to write (a patch when it repeats one already written), or skip it. */
  correlate(event: CoreEvent): Correlated {
    const { event: aggregated, key } = this.aggregate(event);
    const observed = this.observe(aggregated, key);
    if (!this.accept(observed.event)) return { skip: true };
    return { skip: false, ...observed };
  }

  /** EventAggregator.EventAggregate. */
  private aggregate(event: CoreEvent): { event: CoreEvent; key: string } {
    const now = this.opts.now();
    const group = aggregateKey(event);
    let record = this.aggregates.get(group);
    if (!record || now - record.at > AGGREGATE_INTERVAL_MS) record = { messages: new Set(), at: now };
    record.messages.add(event.message);
    record.at = now;
    this.aggregates.set(group, record);
    if (record.messages.size < AGGREGATE_MAX_EVENTS) return { event, key: eventKey(event) };
    // Upstream pops any one message so the set stays at its bound; the oldest here.
    record.messages.delete(record.messages.values().next().value as string);
    const stamp = timestamp(now);
    return {
      event: {
        ...event,
        metadata: { name: this.opts.newName(event.involvedObject.name), namespace: event.metadata.namespace },
        message: AGGREGATE_MESSAGE_PREFIX + event.message,
        count: 1,
        firstTimestamp: stamp,
        lastTimestamp: stamp,
      },
      key: group,
    };
  }

  /** eventLogger.eventObserve: a key seen before keeps its first name and timestamp and bumps the count. */
  private observe(event: CoreEvent, key: string): { event: CoreEvent; patch?: EventPatch } {
    const last = this.observed.get(key);
    const observed: CoreEvent = last ? { ...event, metadata: { ...event.metadata, name: last.name }, firstTimestamp: last.firstTimestamp, count: last.count + 1 } : event;
    this.observed.set(key, { name: observed.metadata.name, count: observed.count, firstTimestamp: observed.firstTimestamp });
    return last ? { event: observed, patch: { count: observed.count, lastTimestamp: observed.lastTimestamp, message: observed.message } } : { event: observed };
  }

  /** EventSourceObjectSpamFilter: a token bucket per key, full at first, refilled one token every SPAM_REFILL_MS. */
  private accept(event: CoreEvent): boolean {
    const now = this.opts.now();
    const key = spamKey(event);
    const bucket = this.buckets.get(key) ?? { tokens: SPAM_BURST, at: now };
    bucket.tokens = Math.min(SPAM_BURST, bucket.tokens + Math.max(0, now - bucket.at) / SPAM_REFILL_MS);
    bucket.at = now;
    const accepted = bucket.tokens >= 1;
    if (accepted) bucket.tokens -= 1;
    this.buckets.set(key, bucket);
    return accepted;
  }
}

/** An event timestamp: RFC 3339 in seconds, as metav1.Time is serialized. */
export const timestamp = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
