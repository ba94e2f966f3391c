/**
 * Merges the sources' snapshots into one desired state and reports the
 * difference as adds, updates and removes (upstream pkg/kubelet/config).
 * A source is "ready" once it delivered its first full view; until every
 * configured source is ready, housekeeping must not remove pods it does not
 * know, or an agent restart would kill pods whose source is still loading.
 */
import type { Pod } from "../pods/schema.ts";
import { canonicalJson } from "./defaults.ts";
import type { PodUpdate, SourceName, SourceSnapshot } from "./types.ts";

export class PodConfig {
  private readonly bySource = new Map<SourceName, Map<string, { pod: Pod; json: string }>>();
  private readonly ready = new Set<SourceName>();

  constructor(private readonly sources: readonly SourceName[]) {}

  /** Applies one snapshot; returns the changes in remove, add, update order. */
  apply(snapshot: SourceSnapshot): PodUpdate[] {
    const previous = this.bySource.get(snapshot.source) ?? new Map();
    const next = new Map<string, { pod: Pod; json: string }>();
    const added: Pod[] = [];
    const updated: Pod[] = [];
    for (const pod of snapshot.pods) {
      const uid = pod.metadata.uid;
      if (!uid || next.has(uid)) continue;
      const json = canonicalJson(pod);
      next.set(uid, { pod, json });
      const before = previous.get(uid);
      if (!before) added.push(pod);
      else if (before.json !== json) updated.push(pod);
    }
    const removed = [...previous].filter(([uid]) => !next.has(uid)).map(([, e]) => e.pod);
    this.bySource.set(snapshot.source, next);
    if (!snapshot.provisional) this.ready.add(snapshot.source);
    const updates: PodUpdate[] = [];
    if (removed.length) updates.push({ op: "remove", source: snapshot.source, pods: removed });
    if (added.length) updates.push({ op: "add", source: snapshot.source, pods: added });
    if (updated.length) updates.push({ op: "update", source: snapshot.source, pods: updated });
    return updates;
  }

  allSourcesReady(): boolean {
    return this.sources.every((s) => this.ready.has(s));
  }

  desiredPods(): Pod[] {
    return [...this.bySource.values()].flatMap((m) => [...m.values()].map((e) => e.pod));
  }
}
