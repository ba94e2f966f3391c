/**
 * Merges the sources' snapshots into one desired state and reports the
 * difference as adds, updates, reconciles and removes (upstream
 * pkg/kubelet/config). An update is a change of what the pod should be
 * (upstream podsDifferSemantically: spec, labels, annotations, deletion);
 * a change of the status alone (above all the one this agent wrote, coming
 * back from the API server) is a reconcile: the newer object is kept,
 * nothing is synced.
 * A source is "ready" once it delivered its first full view; until every
 * configured source is ready, housekeeping must not remove pods it does not
 * know, or an agent restart would kill pods whose source is still loading.
 */
import type { Pod } from "../pods/schema.ts";
import type { PodUpdate, SourceName, SourceSnapshot } from "./types.ts";
import { canonicalJson } from "../util/canonical-json.ts";

/** What makes a change an update; the rest of the object may change freely. */
export function semanticJson(pod: Pod): string {
  const { labels, annotations, deletionTimestamp, deletionGracePeriodSeconds } = pod.metadata;
  return canonicalJson({ spec: pod.spec, labels, annotations, deletionTimestamp, deletionGracePeriodSeconds });
}

interface Entry {
  pod: Pod;
  semantic: string;
}

export class PodConfig {
  private readonly bySource = new Map<SourceName, Map<string, Entry>>();
  private readonly ready = new Set<SourceName>();

  constructor(private readonly sources: readonly SourceName[]) {}

  /** Applies one snapshot; returns the changes in remove, add, update, reconcile order. */
  apply(snapshot: SourceSnapshot): PodUpdate[] {
    const previous = this.bySource.get(snapshot.source) ?? new Map<string, Entry>();
    const next = new Map<string, Entry>();
    const added: Pod[] = [];
    const updated: Pod[] = [];
    const reconciled: Pod[] = [];
    for (const pod of snapshot.pods) {
      const uid = pod.metadata.uid;
      if (!uid || next.has(uid)) continue;
      const before = previous.get(uid);
      // The very object of the last snapshot (the API source hands back the pods no event touched;
      // nothing changes a pod in place): unchanged, without serializing it again.
      if (before?.pod === pod) {
        next.set(uid, before);
        continue;
      }
      const semantic = semanticJson(pod);
      next.set(uid, { pod, semantic });
      if (!before) added.push(pod);
      else if (before.semantic !== semantic) updated.push(pod);
      else if (canonicalJson(before.pod.status) !== canonicalJson(pod.status)) reconciled.push(pod);
      // else: an equal copy (a file read again); the newer object is kept all the same.
    }
    const removed = [...previous].filter(([uid]) => !next.has(uid)).map(([, e]) => e.pod);
    this.bySource.set(snapshot.source, next);
    if (!snapshot.provisional) this.ready.add(snapshot.source);
    const updates: PodUpdate[] = [];
    if (removed.length) updates.push({ op: "remove", source: snapshot.source, pods: removed });
    if (added.length) updates.push({ op: "add", source: snapshot.source, pods: added });
    if (updated.length) updates.push({ op: "update", source: snapshot.source, pods: updated });
    if (reconciled.length) updates.push({ op: "reconcile", source: snapshot.source, pods: reconciled });
    return updates;
  }

  allSourcesReady(): boolean {
    return this.sources.every((s) => this.ready.has(s));
  }

  desiredPods(): Pod[] {
    return [...this.bySource.values()].flatMap((m) => [...m.values()].map((e) => e.pod));
  }
}
