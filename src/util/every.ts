import type { Clock } from "./clock.ts";

/** Wraps `fn` so that calling it more often than every `periodMs` does nothing. */
export function everyMs(periodMs: number, clock: Clock, fn: () => Promise<void>): () => void {
  let last = -Infinity;
  let running = false;
  return () => {
    if (running || clock.now() - last < periodMs) return;
    last = clock.now();
    running = true;
    void fn().finally(() => (running = false));
  };
}
