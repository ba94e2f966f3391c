/**
 * Offline autonomy for the API pod source (a bunlet extension): the pods the
 * API server binds to this node, kept in the local checkpoint store
 * (`checkpoints/pods/<uid>`), so an agent that starts while the API server
 * cannot be reached (an edge node rebooted offline) can run them.
 *
 * Only what decides how a pod runs is kept (checkpointForm): status updates
 * do not rewrite the files. Writes are debounced and only changed pods are
 * written. `maxAge` counts from the API server's last confirmation of the
 * view (a list, an event, a bookmark; recorded at most every
 * `confirmEveryMs` in `checkpoints/pod-view/confirmed`), not from a pod's
 * last change: a pod unchanged for weeks was still wanted yesterday.
 */
import type { ApiObject } from "../api/index.ts";
import type { CheckpointStore } from "../checkpoint/index.ts";
import { parsePod, type Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { canonicalJson } from "../util/canonical-json.ts";
import { CONFIGMAP_CHECKPOINT_KIND, SECRET_CHECKPOINT_KIND, TOKEN_CHECKPOINT_KIND } from "../checkpoint/objects.ts";

export const POD_CHECKPOINT_KIND = "pods";
const VIEW_KIND = "pod-view";
const VIEW_KEY = "confirmed";

export interface PodCheckpointOptions {
  store: CheckpointStore;
  /** offlineAutonomy.maxAge: older checkpoints are not run. */
  maxAgeMs: number;
  /** How long a burst of changes is gathered into one pass; 500 ms by default. */
  debounceMs?: number;
  /** How often a confirmation is recorded; default a tenth of maxAge, at most 5 minutes. */
  confirmEveryMs?: number;
  clock: Clock;
  logger: Logger;
}

/**
 * What is kept of an API pod: its spec and metadata, and of its status only
 * what decides whether it runs again (a terminal phase) and its start time
 * (activeDeadlineSeconds). Volatile fields are left out.
 */
export function checkpointForm(object: ApiObject): ApiObject {
  const { status, ...rest } = object as ApiObject & { status?: { phase?: string; startTime?: string } };
  const { managedFields: _m, resourceVersion: _r, ...metadata } = object.metadata ?? {};
  const kept = { ...(status?.phase ? { phase: status.phase } : {}), ...(status?.startTime ? { startTime: status.startTime } : {}) };
  return { ...rest, metadata, ...(Object.keys(kept).length ? { status: kept } : {}) };
}

/** Removes every pod checkpoint (offline autonomy turned off). */
export function removePodCheckpoints(store: CheckpointStore): void {
  for (const uid of store.keys(POD_CHECKPOINT_KIND)) store.remove(POD_CHECKPOINT_KIND, uid);
  store.remove(VIEW_KIND, VIEW_KEY);
}

export class PodCheckpoint {
  /** File contents last written, by UID; seeded from the files on the first pass. */
  private written: Map<string, string> | undefined;
  /** The API object each file was last compared with, by UID: the same object again needs no new comparison. */
  private readonly compared = new Map<string, ApiObject>();
  private cancelTimer: (() => void) | undefined;
  private confirmedWrittenAt = -Infinity;

  /** `view` returns the source's current pods (as the API sent them, mirror pods excluded). */
  constructor(
    private readonly opts: PodCheckpointOptions,
    private readonly view: () => Iterable<ApiObject>,
  ) {}

  private get confirmEveryMs(): number {
    return this.opts.confirmEveryMs ?? Math.min(5 * 60_000, this.opts.maxAgeMs / 10);
  }

  /** The API's view changed; called only for real views (a list or watch events), never for a restored one. */
  changed(): void {
    if (this.cancelTimer) return;
    this.cancelTimer = this.opts.clock.setTimer(this.opts.debounceMs ?? 500, () => {
      this.cancelTimer = undefined;
      this.write();
    });
  }

  /** The API server answered and the view is current (a list, a bookmark). */
  confirmed(): void {
    if (this.opts.clock.now() - this.confirmedWrittenAt >= this.confirmEveryMs) this.changed();
  }

  /** Shutdown: a pass still pending is made now, so the next start finds the latest view. */
  flush(): void {
    if (!this.cancelTimer) return;
    this.cancelTimer();
    this.cancelTimer = undefined;
    this.write();
  }

  /**
   * The pods to run while the API server cannot be reached: verified
   * (corrupt files are reported by the store and skipped), parsed, and
   * confirmed within maxAge.
   */
  restore(): { pods: Pod[]; tooOld: number } {
    const { store, clock, logger, maxAgeMs } = this.opts;
    const view = store.read(VIEW_KIND, VIEW_KEY);
    const confirmedAt = view.ok ? view.writtenAt : -Infinity;
    const pods: Pod[] = [];
    let tooOld = 0;
    for (const entry of store.list(POD_CHECKPOINT_KIND)) {
      if (clock.now() - Math.max(entry.writtenAt, confirmedAt) > maxAgeMs) {
        tooOld++;
        continue;
      }
      const parsed = parsePod(entry.data);
      if (parsed.ok && parsed.value.metadata.uid === entry.key) pods.push(parsed.value);
      else logger.warn("ignoring checkpointed pod: it does not parse", { uid: entry.key, reason: parsed.ok ? "UID differs from its key" : parsed.error });
    }
    return { pods, tooOld };
  }

  /** Writes changed pods, removes the files of pods gone, then records the confirmation; a failure is retried on the next pass. */
  private write(): void {
    const { store, clock, logger } = this.opts;
    try {
      // Seeded from the previous run's files, so a restart rewrites (and fsyncs) only what changed.
      const written = (this.written ??= new Map(
        store.keys(POD_CHECKPOINT_KIND).map((uid) => {
          const r = store.read(POD_CHECKPOINT_KIND, uid);
          return [uid, r.ok ? canonicalJson(r.data) : ""];
        }),
      ));
      const current = new Set<string>();
      const changed: { key: string; data: ApiObject; json: string; object: ApiObject }[] = [];
      for (const object of this.view()) {
        const uid = object.metadata?.uid;
        if (!uid) continue;
        current.add(uid);
        if (this.compared.get(uid) === object) continue;
        const form = checkpointForm(object);
        const json = canonicalJson(form);
        if (written.get(uid) === json) this.compared.set(uid, object);
        else changed.push({ key: uid, data: form, json, object });
      }
      // One directory sync for the pass (a burst of new pods is one pass).
      store.writeMany(POD_CHECKPOINT_KIND, changed);
      for (const c of changed) {
        written.set(c.key, c.json);
        this.compared.set(c.key, c.object);
      }
      for (const uid of [...written.keys()]) {
        if (current.has(uid)) continue;
        store.remove(POD_CHECKPOINT_KIND, uid);
        written.delete(uid);
        this.compared.delete(uid);
      }
      // Only once the files match the view: the confirmation vouches for them.
      const now = clock.now();
      if (now - this.confirmedWrittenAt >= this.confirmEveryMs) {
        store.write(VIEW_KIND, VIEW_KEY, { pods: current.size });
        this.confirmedWrittenAt = now;
      }
    } catch (err) {
      logger.warn("could not write the pod checkpoint; will retry on the next change", { err: errorMessage(err) });
    }
  }
}

/**
 * Offline autonomy (bunlet extension): checkpoints of the API pods and of
 * the configMaps, secrets and tokens they reference, under
 * <rootDir>/checkpoints. Turned off, old checkpoints are removed so that a
 * later start with it on never runs a stale set.
 */
export function offlineCheckpoint(
  settings: { enabled: boolean; maxAge: number },
  store: CheckpointStore,
  logger: Logger,
): { store: CheckpointStore; maxAgeMs: number } | undefined {
  const { enabled, maxAge } = settings;
  if (enabled) return { store, maxAgeMs: maxAge };
  try {
    removePodCheckpoints(store);
    for (const kind of [CONFIGMAP_CHECKPOINT_KIND, SECRET_CHECKPOINT_KIND, TOKEN_CHECKPOINT_KIND]) for (const key of store.keys(kind)) store.remove(kind, key);
  } catch (err) {
    logger.warn("could not remove old checkpoints", { err: errorMessage(err) });
  }
  return undefined;
}
