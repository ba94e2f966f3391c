import { describe, expect, test } from "bun:test";
import { FakePodRuntime } from "../runtime/fake.ts";
import type { ObservedPod } from "../runtime/types.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { PodStatusCache } from "./cache.ts";
import type { PlegEvent } from "./diff.ts";
import { GenericPleg } from "./generic.ts";

const ref = { uid: "uid-1", name: "web", namespace: "default" };

function setup() {
  const clock = new FakeClock();
  const runtime = new FakePodRuntime(clock);
  const cache = new PodStatusCache();
  const { logger } = memoryLogger();
  const pleg = new GenericPleg({ runtime, clock, logger, cache });
  const seen: PlegEvent[] = [];
  pleg.start((events) => seen.push(...events));
  const settle = async () => {
    for (let i = 0; i < 10; i++) await Bun.sleep(0);
  };
  /** The next relist, a second on. */
  const relist = async () => {
    clock.advance(1000);
    await settle();
  };
  const running = (): ObservedPod => ({
    ...ref,
    sandboxes: [{ id: "sb-1", ready: true, attempt: 0, createdAt: 0, additionalIps: [] }],
    containers: [{ id: "c-1", name: "app", sandboxId: "sb-1", state: "running", hash: "", restartCount: 0, image: "i", imageRef: "", createdAt: 0 }],
  });
  return { clock, runtime, cache, pleg, seen, settle, relist, running };
}

describe("GenericPleg with the pods' last reads", () => {
  test("a pod whose last read already shows what the relist found gets no events", async () => {
    const s = setup();
    await s.settle();
    s.runtime.pods.set(ref.uid, s.running());
    s.cache.set(ref.uid, s.running(), s.clock.now());
    await s.relist();
    expect(s.seen).toEqual([]);
  });

  test("a change the last read does not show wakes the pod: an exit after it, or a pod with no read", async () => {
    const s = setup();
    await s.settle();
    s.runtime.pods.set(ref.uid, s.running());
    s.cache.set(ref.uid, s.running(), s.clock.now());
    await s.relist();
    s.runtime.exitContainer(ref.uid, "app", 1);
    await s.relist();
    expect(s.seen).toEqual([{ uid: ref.uid, type: "ContainerDied", id: "c-1", state: "exited" }]);
    s.runtime.pods.set("uid-2", { ...s.running(), uid: "uid-2" });
    await s.relist();
    expect(s.seen.filter((e) => e.uid === "uid-2").map((e) => e.type)).toEqual(["ContainerStarted", "ContainerStarted"]);
  });

  test("each relist confirms the entries read before it began, after its wakes", async () => {
    const s = setup();
    await s.pleg[Symbol.asyncDispose]();
    const confirmedAtWake: (number | undefined)[] = [];
    const pleg = new GenericPleg({ runtime: s.runtime, clock: s.clock, logger: memoryLogger().logger, cache: s.cache });
    pleg.start(() => confirmedAtWake.push(s.cache.confirmed(ref, undefined)?.at));
    await s.settle();
    const readAt = s.clock.now() + 1; // after the first relist began
    s.runtime.pods.set(ref.uid, s.running());
    s.cache.set(ref.uid, s.running(), readAt);
    expect(s.cache.confirmed(ref, readAt)).toBeUndefined();
    await s.relist();
    expect(s.cache.confirmed(ref, readAt)?.at).toBe(readAt);
    // The next relist sees the container gone, which the entry does not show: the pod is woken while the entry is not yet confirmed by it.
    s.runtime.pods.set(ref.uid, { ...s.running(), containers: [] });
    s.cache.set(ref.uid, s.running(), s.clock.now() + 1);
    await s.relist();
    expect(confirmedAtWake).toEqual([undefined]);
    expect(s.cache.confirmed(ref, undefined)).toBeDefined();
    await pleg[Symbol.asyncDispose]();
  });

  test("a pod gone from the runtime loses its cache entry, unless the entry is newer than the relist", async () => {
    const s = setup();
    await s.settle();
    s.runtime.pods.set(ref.uid, s.running());
    await s.relist();
    s.cache.set(ref.uid, s.running(), s.clock.now());
    s.runtime.pods.delete(ref.uid);
    await s.relist();
    // No entry: an empty pod as of the relist's start.
    expect(s.cache.get(ref)?.observed.containers).toEqual([]);
    expect(s.seen.filter((e) => e.type === "ContainerRemoved").length).toBe(2);
    // A step read the pod again (same UID, added again) after the relist began: its read stays.
    s.runtime.pods.set(ref.uid, s.running());
    await s.relist();
    s.runtime.pods.delete(ref.uid);
    s.cache.set(ref.uid, s.running(), s.clock.now() + 1500);
    await s.relist();
    expect(s.cache.get(ref)?.observed.containers.length).toBe(1);
  });
});
