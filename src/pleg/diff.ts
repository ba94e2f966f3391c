/**
 * The generic PLEG's core (upstream pleg/generic.go): compare two relists
 * and turn each entity's change of state into an event for its pod.
 * Sandboxes count as entities too, so a dead sandbox wakes its pod.
 */
import type { ContainerState, RuntimePodRecord } from "../runtime/types.ts";

export type PlegEventType = "ContainerStarted" | "ContainerDied" | "ContainerRemoved" | "ContainerChanged";

export interface PlegEvent {
  uid: string;
  type: PlegEventType;
  id: string;
  /**
   * When the runtime made the change (ms since the epoch), on events the
   * runtime stamps (CRI container events). A relist's events have none: what
   * a relist saw may be newer than its start.
   */
  at?: number;
  /** The entity's state as the relist listed it (a relist's events): a read of the pod that shows the same already holds the change. */
  state?: EntityState;
}

/** An entity's state in a relist; "nonexistent" when it is not listed. */
export type EntityState = ContainerState | "nonexistent";
type Observed = EntityState;

function eventFor(before: Observed, after: Observed): PlegEventType | undefined {
  if (before === after) return undefined;
  switch (after) {
    case "running":
      return "ContainerStarted";
    case "exited":
      return "ContainerDied";
    case "unknown":
    case "created":
      return "ContainerChanged";
    case "nonexistent":
      // Upstream reports a container that vanished while running as died, then removed.
      return before === "exited" ? "ContainerRemoved" : "ContainerDied";
  }
}

export function diffRelists(previous: ReadonlyMap<string, RuntimePodRecord>, next: ReadonlyMap<string, RuntimePodRecord>): PlegEvent[] {
  const events: PlegEvent[] = [];
  const uids = new Set([...previous.keys(), ...next.keys()]);
  for (const uid of uids) {
    const before = previous.get(uid)?.entities ?? new Map<string, ContainerState>();
    const after = next.get(uid)?.entities ?? new Map<string, ContainerState>();
    for (const id of new Set([...before.keys(), ...after.keys()])) {
      const b = before.get(id) ?? "nonexistent";
      const a = after.get(id) ?? "nonexistent";
      const type = eventFor(b, a);
      if (type) events.push({ uid, type, id, state: a });
      if (b === "running" && a === "nonexistent") events.push({ uid, type: "ContainerRemoved", id, state: a });
    }
  }
  return events;
}

/** One pod's wake from a batch of events: what PodWorkers.sync takes. */
export interface PodWake {
  /** The newest runtime stamp of its events; undefined when one is unstamped (a relist's). */
  at: number | undefined;
  /** The states its relist events listed, when every one of its events is a relist's (PodWorker.wake checks a running step's read against them). */
  listed: Map<string, EntityState> | undefined;
}

/** The events of a batch grouped into one wake per pod. */
export function podWakes(events: PlegEvent[]): Map<string, PodWake> {
  const wakes = new Map<string, PodWake>();
  for (const e of events) {
    const prior = wakes.get(e.uid);
    const at = e.at === undefined || (prior && prior.at === undefined) ? undefined : Math.max(prior?.at ?? e.at, e.at);
    const states = prior ? prior.listed : new Map<string, EntityState>();
    const listed = states && e.state !== undefined && e.at === undefined ? states.set(e.id, e.state) : undefined;
    wakes.set(e.uid, { at, listed });
  }
  return wakes;
}
