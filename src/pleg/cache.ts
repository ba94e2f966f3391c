/**
 * The pod status cache (upstream pkg/kubelet/container/cache.go): the last
 * status read of each pod, with when the read began, and a global time
 * that says "every pod not in here had nothing newer by then". A reader
 * waits for a status newer than a time it knows (upstream GetNewerThan),
 * so that what it plans from includes what it did last.
 *
 * Unlike upstream, older data is always refused (upstream refuses it only
 * with the EventedPLEG gate): a pod step's own read after acting and a
 * relist's read of the same pod race, and the newer one must stay.
 */
import type { PodRef } from "../pods/identity.ts";
import { emptyObservedPod, type ObservedPod } from "../runtime/types.ts";

/** One pod's status and when the read that gave it began (clock ms; an event's stamp for a runtime event). */
export interface CachedPod {
  observed: ObservedPod;
  at: number;
}

export interface PodStatusReader {
  /** The pod's entry; without one, an empty pod once the global time is set (nothing of it was there), else undefined. */
  get(ref: PodRef): CachedPod | undefined;
  /**
   * Resolves with the pod's status once the entry or the global time is
   * newer than `minAt` (no minimum: once either exists). Rejects with the
   * signal's reason when it aborts first.
   */
  newerThan(ref: PodRef, minAt: number | undefined, signal: AbortSignal): Promise<CachedPod>;
  /**
   * The pod's entry when a relist that began at or after its read found
   * nothing of the pod it did not show (the global time is not older than
   * the entry), and it holds the read at `notBefore` or a newer one: what a
   * step may plan from without reading the runtime. Undefined otherwise.
   */
  confirmed(ref: PodRef, notBefore: number | undefined): CachedPod | undefined;
}

export interface PodStatusWriter {
  /** Stores the pod's status read at `at`; false (nothing stored, nobody woken) when the entry is newer. */
  set(uid: string, observed: ObservedPod, at: number): boolean;
  /** Forgets the pod (it is gone from the runtime). */
  delete(uid: string): void;
  /** Every pod not in the cache had nothing at `at` (a relist that began then); wakes the readers it satisfies. */
  updateTime(at: number): void;
}

interface Waiter {
  ref: PodRef;
  minAt: number | undefined;
  resolve: (pod: CachedPod) => void;
}

export class PodStatusCache implements PodStatusReader, PodStatusWriter {
  private readonly pods = new Map<string, CachedPod>();
  private globalAt: number | undefined;
  private readonly waiters = new Set<Waiter>();

  get(ref: PodRef): CachedPod | undefined {
    return this.pods.get(ref.uid) ?? (this.globalAt === undefined ? undefined : { observed: emptyObservedPod(ref.uid, ref.name, ref.namespace), at: this.globalAt });
  }

  confirmed(ref: PodRef, notBefore: number | undefined): CachedPod | undefined {
    const entry = this.pods.get(ref.uid);
    if (!entry || this.globalAt === undefined || entry.at > this.globalAt) return undefined;
    return notBefore === undefined || entry.at >= notBefore ? entry : undefined;
  }

  newerThan(ref: PodRef, minAt: number | undefined, signal: AbortSignal): Promise<CachedPod> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const ready = this.newerEntry(ref, minAt);
    if (ready) return Promise.resolve(ready);
    return new Promise<CachedPod>((resolve, reject) => {
      const waiter: Waiter = {
        ref,
        minAt,
        resolve: (pod) => {
          signal.removeEventListener("abort", onAbort);
          resolve(pod);
        },
      };
      const onAbort = () => {
        this.waiters.delete(waiter);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiters.add(waiter);
    });
  }

  set(uid: string, observed: ObservedPod, at: number): boolean {
    const existing = this.pods.get(uid);
    if (existing && at < existing.at) return false;
    this.pods.set(uid, { observed, at });
    this.notify((w) => w.ref.uid === uid);
    return true;
  }

  delete(uid: string): void {
    this.pods.delete(uid);
  }

  updateTime(at: number): void {
    if (this.globalAt !== undefined && at <= this.globalAt) return;
    this.globalAt = at;
    this.notify(() => true);
  }

  /** Upstream getIfNewerThan: the entry when it or the global time is newer than `minAt`; an empty pod when only the global time is. */
  private newerEntry(ref: PodRef, minAt: number | undefined): CachedPod | undefined {
    const entry = this.pods.get(ref.uid);
    const newer = (at: number | undefined) => at !== undefined && (minAt === undefined || at > minAt);
    if (entry && (newer(entry.at) || newer(this.globalAt))) return entry;
    if (!entry && newer(this.globalAt)) return this.get(ref);
    return undefined;
  }

  private notify(which: (w: Waiter) => boolean): void {
    for (const w of [...this.waiters]) {
      if (!which(w)) continue;
      const ready = this.newerEntry(w.ref, w.minAt);
      if (!ready) continue;
      this.waiters.delete(w);
      w.resolve(ready);
    }
  }
}
