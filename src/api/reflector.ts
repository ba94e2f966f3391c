/**
 * One list+watch loop (upstream's reflector) for the caches that mirror API
 * objects: list, hand over the items, then watch from the list's version;
 * a watch that ends is resumed from the last version seen, an ERROR event
 * (410 Gone: that version is too old) or a failure lists again. What a
 * cache keeps, how it logs and how long it waits after a failure are its own.
 */
import type { Clock } from "../util/clock.ts";
import type { ApiObject, PodList } from "./index.ts";
import type { WatchEvent } from "./rest.ts";

export interface ReflectorOptions {
  list(): Promise<PodList>;
  watch(resourceVersion: string, onEvent: (e: WatchEvent<ApiObject>) => void, signal: AbortSignal): Promise<void>;
  /** A successful list: the whole current set. */
  onList(items: ApiObject[]): void;
  /** ADDED, MODIFIED or DELETED after the list. */
  onEvent(e: WatchEvent<ApiObject>): void;
  /** A list or watch failed; `failures` counts the failures since the last good list. Returns how long to wait before listing again. */
  onFailure(err: unknown, failures: number): number;
  clock: Clock;
  /** Ends the loop. */
  signal: AbortSignal;
}

export async function reflect(opts: ReflectorOptions): Promise<void> {
  const { signal } = opts;
  let failures = 0;
  while (!signal.aborted) {
    try {
      const list = await opts.list();
      if (signal.aborted) return;
      failures = 0;
      opts.onList(list.items);
      let rv = list.resourceVersion;
      for (let relist = false; !relist && !signal.aborted; ) {
        const watch = new AbortController();
        const stop = () => watch.abort();
        signal.addEventListener("abort", stop, { once: true });
        try {
          await opts.watch(
            rv,
            (e) => {
              if (e.type === "ERROR") {
                relist = true; // 410 Gone and friends: our version is too old
                watch.abort();
                return;
              }
              rv = e.object.metadata?.resourceVersion ?? rv;
              if (e.type !== "BOOKMARK") opts.onEvent(e);
            },
            watch.signal,
          );
        } finally {
          signal.removeEventListener("abort", stop);
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      const waitMs = opts.onFailure(err, failures);
      failures++;
      await opts.clock.sleep(waitMs, signal).catch(() => {});
    }
  }
}
