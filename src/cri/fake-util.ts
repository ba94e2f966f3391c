/** Small pieces FakeCri needs that are worth testing on their own. */
import type { CriService } from "./index.ts";

/** The CRI method name on the wire for a facade method name. */
export function wireName(method: Exclude<keyof CriService, "close">): string {
  if (method === "containerEvents") return "GetContainerEvents";
  return method.charAt(0).toUpperCase() + method.slice(1);
}

export function nsFromMs(ms: number): bigint {
  return BigInt(Math.trunc(ms)) * 1_000_000n;
}

/** CRI label selectors are exact matches on every given key. */
export function matchesLabels(labels: Record<string, string>, selector: Record<string, string> | undefined): boolean {
  if (!selector) return true;
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

/** An unbounded async queue; `end()` finishes iteration after what is queued. */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiter: (() => void) | undefined;
  private ended = false;
  private error: unknown;

  push(item: T): void {
    if (this.ended) return;
    this.items.push(item);
    this.wake();
  }

  end(): void {
    this.ended = true;
    this.wake();
  }

  /** Ends iteration with `err` once what is queued has been taken. */
  fail(err: unknown): void {
    this.error = err;
    this.end();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.ended) {
        if (this.error !== undefined) throw this.error;
        return;
      }
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }
}
