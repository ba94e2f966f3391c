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

/**
 * Normalizes an image reference the way containerd's CRI plugin (via the
 * docker reference library) does: `busybox` -> `docker.io/library/busybox:latest`.
 * Image ids (`sha256:...`) are returned unchanged.
 */
export function normalizeImageRef(ref: string): string {
  if (/^sha256:[0-9a-f]+$/.test(ref)) return ref;
  let name = ref;
  let suffix = "";
  const at = name.indexOf("@");
  if (at >= 0) {
    suffix = name.slice(at);
    name = name.slice(0, at);
  }
  const lastSlash = name.lastIndexOf("/");
  const colon = name.lastIndexOf(":");
  if (colon > lastSlash) {
    suffix = name.slice(colon) + suffix;
    name = name.slice(0, colon);
  } else if (!suffix) {
    suffix = ":latest";
  }
  const first = name.split("/")[0] ?? "";
  const hasDomain = name.includes("/") && (first.includes(".") || first.includes(":") || first === "localhost");
  if (!hasDomain) name = "docker.io/" + (name.includes("/") ? name : "library/" + name);
  return name + suffix;
}

/** An unbounded async queue; `end()` finishes iteration after what is queued. */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiter: (() => void) | undefined;
  private ended = false;

  push(item: T): void {
    if (this.ended) return;
    this.items.push(item);
    this.wake();
  }

  end(): void {
    this.ended = true;
    this.wake();
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
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }
}
