import { describe, expect, test } from "bun:test";
import { emptyObservedPod, type ObservedPod } from "../runtime/types.ts";
import { FakeClock } from "../util/clock.ts";
import { PodStatusCache } from "./cache.ts";

const ref = { uid: "uid-1", name: "web", namespace: "default" };
const withSandbox = (id: string): ObservedPod => ({
  ...emptyObservedPod(ref.uid, ref.name, ref.namespace),
  sandboxes: [{ id, ready: true, attempt: 0, createdAt: 0, additionalIps: [] }],
});
const settle = async () => {
  for (let i = 0; i < 5; i++) await Bun.sleep(0);
};

describe("PodStatusCache", () => {
  test("a pod with no entry is unknown until the global time is set, then empty", () => {
    const clock = new FakeClock();
    const cache = new PodStatusCache();
    expect(cache.get(ref)).toBeUndefined();
    cache.updateTime(clock.now());
    expect(cache.get(ref)).toEqual({ observed: emptyObservedPod(ref.uid, ref.name, ref.namespace), at: clock.now() });
  });

  test("an entry is confirmed once the global time reaches its read, and only when it holds the read asked for", () => {
    const clock = new FakeClock();
    const cache = new PodStatusCache();
    const t0 = clock.now();
    cache.set(ref.uid, withSandbox("a"), t0 + 100);
    expect(cache.confirmed(ref, undefined)).toBeUndefined();
    cache.updateTime(t0 + 50);
    expect(cache.confirmed(ref, undefined)).toBeUndefined();
    cache.updateTime(t0 + 100);
    expect(cache.confirmed(ref, t0 + 100)?.observed.sandboxes[0]?.id).toBe("a");
    // The worker's last read is newer than the entry: not what it planned from last.
    expect(cache.confirmed(ref, t0 + 101)).toBeUndefined();
    // No entry: nothing to plan from, though the global time would give an empty pod.
    expect(cache.confirmed({ ...ref, uid: "uid-2" }, undefined)).toBeUndefined();
  });

  test("older data is refused and leaves the newer entry", () => {
    const clock = new FakeClock();
    const cache = new PodStatusCache();
    const t0 = clock.now();
    expect(cache.set(ref.uid, withSandbox("new"), t0 + 100)).toBe(true);
    expect(cache.set(ref.uid, withSandbox("old"), t0 + 50)).toBe(false);
    expect(cache.get(ref)?.observed.sandboxes[0]?.id).toBe("new");
    expect(cache.set(ref.uid, withSandbox("newer"), t0 + 100)).toBe(true);
    expect(cache.get(ref)?.observed.sandboxes[0]?.id).toBe("newer");
  });

  test("a waiter resolves on a set newer than its minimum, not on an older one", async () => {
    const clock = new FakeClock();
    const cache = new PodStatusCache();
    const t0 = clock.now();
    cache.set(ref.uid, withSandbox("a"), t0);
    let got: string | undefined;
    void cache.newerThan(ref, t0, new AbortController().signal).then((p) => (got = p.observed.sandboxes[0]?.id));
    await settle();
    expect(got).toBeUndefined(); // the entry is not newer than t0
    cache.set(ref.uid, withSandbox("b"), t0); // as old as the minimum: still not newer
    await settle();
    expect(got).toBeUndefined();
    cache.set(ref.uid, withSandbox("c"), t0 + 1);
    await settle();
    expect(got).toBe("c");
  });

  test("a newer global time resolves the waiters: with the entry, or an empty pod", async () => {
    const clock = new FakeClock();
    const cache = new PodStatusCache();
    const other = { uid: "uid-2", name: "db", namespace: "default" };
    cache.set(ref.uid, withSandbox("a"), clock.now());
    const signal = new AbortController().signal;
    const withEntry = cache.newerThan(ref, clock.now(), signal);
    const withoutEntry = cache.newerThan(other, undefined, signal);
    clock.advance(1000);
    cache.updateTime(clock.now());
    expect((await withEntry).observed.sandboxes[0]?.id).toBe("a");
    expect(await withoutEntry).toEqual({ observed: emptyObservedPod(other.uid, other.name, other.namespace), at: clock.now() });
  });

  test("an aborted wait rejects with the signal's reason and is not resolved later", async () => {
    const cache = new PodStatusCache();
    const abort = new AbortController();
    const waiting = cache.newerThan(ref, undefined, abort.signal);
    abort.abort(new Error("the pod must stop"));
    await expect(waiting).rejects.toThrow("the pod must stop");
    cache.updateTime(1);
    await expect(cache.newerThan(ref, 0, abort.signal)).rejects.toThrow("the pod must stop");
  });

  test("a deleted pod reads as empty again", () => {
    const cache = new PodStatusCache();
    cache.set(ref.uid, withSandbox("a"), 5);
    cache.updateTime(10);
    cache.delete(ref.uid);
    expect(cache.get(ref)?.observed.sandboxes).toEqual([]);
  });
});
