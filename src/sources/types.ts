import type { Pod } from "../pods/schema.ts";

/** Where a desired pod came from; upstream's kubetypes.FileSource etc. */
export type SourceName = "file" | "http" | "api";

/** A source's complete current view; podConfig turns snapshots into diffs. */
export interface SourceSnapshot {
  source: SourceName;
  pods: Pod[];
  /**
   * A stand-in view (the API source's local checkpoint while the API server
   * cannot be reached): its pods run, but the source does not count as
   * ready, so housekeeping removes no pod it does not know.
   */
  provisional?: boolean;
}

/**
 * A pod source watches one origin of desired pods and reports its whole
 * view each time it changes (upstream's SET semantics).
 */
export interface PodSource extends AsyncDisposable {
  readonly name: SourceName;
  /** Starts watching; `emit` is called with the first full view, then on change. */
  start(emit: (snapshot: SourceSnapshot) => void): void;
}

/** reconcile: only the status changed (podconfig.ts): the newer object, no sync. */
export type PodOp = "add" | "update" | "reconcile" | "remove";

/** A change to the merged desired state, as the syncLoop consumes it. */
export interface PodUpdate {
  op: PodOp;
  source: SourceName;
  pods: Pod[];
}
