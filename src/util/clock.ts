/**
 * Time is injected everywhere so that backoff, probes and resyncs are
 * deterministic in tests. Only `realClock` touches the wall clock.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`, or rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Calls `fn` after `ms`; the returned function cancels it (idempotent). */
  setTimer(ms: number, fn: () => void): () => void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        clearTimeout(t);
        reject(signal?.reason);
      };
      const t = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
  setTimer: (ms, fn) => {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
};

/** A clock that only moves when the test says so. */
export class FakeClock implements Clock {
  private current: number;
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private nextId = 0;

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  setTimer(ms: number, fn: () => void): () => void {
    const id = this.nextId++;
    this.timers.push({ at: this.current + Math.max(0, ms), fn, id });
    return () => {
      this.timers = this.timers.filter((t) => t.id !== id);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const cancel = this.setTimer(ms, resolve);
      signal?.addEventListener(
        "abort",
        () => {
          cancel();
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }

  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.current = Math.max(this.current, due.at);
      due.fn();
    }
    this.current = target;
  }

  pendingTimers(): number {
    return this.timers.length;
  }
}
