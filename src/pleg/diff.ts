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
}

type Observed = ContainerState | "nonexistent";

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
      if (type) events.push({ uid, type, id });
      if (b === "running" && a === "nonexistent") events.push({ uid, type: "ContainerRemoved", id });
    }
  }
  return events;
}
