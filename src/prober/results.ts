/**
 * The probe results cache (upstream pkg/kubelet/prober/results): the last
 * result that crossed its threshold, per container ID, one cache per probe
 * type. Listeners hear only changes, as upstream's Updates() channel sends
 * only when setInternal changed something.
 */
import type { ProbeResult } from "./types.ts";

export interface ResultUpdate {
  containerId: string;
  podUid: string;
  result: ProbeResult;
}

export class ResultsCache {
  private readonly results = new Map<string, { result: ProbeResult; podUid: string }>();
  private readonly listeners = new Set<(u: ResultUpdate) => void>();

  /** The cached result, or undefined when the container has no worker of this type. */
  get(containerId: string): ProbeResult | undefined {
    return this.results.get(containerId)?.result;
  }

  /** Records a result; listeners are told only when it differs from the cached one. */
  set(containerId: string, result: ProbeResult, podUid: string): void {
    const prev = this.results.get(containerId);
    if (prev?.result === result) return;
    this.results.set(containerId, { result, podUid });
    for (const fn of this.listeners) fn({ containerId, podUid, result });
  }

  /** Forgets a container (its worker stopped). Idempotent; not a change listeners hear of. */
  remove(containerId: string): void {
    this.results.delete(containerId);
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  onUpdate(fn: (u: ResultUpdate) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  get size(): number {
    return this.results.size;
  }
}
