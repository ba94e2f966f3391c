import { describe, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { GcPacer, type Heap } from "./gc-pacer.ts";

const MiB = 1024 * 1024;

/** A heap whose size the test sets; a collection brings it down to `live`. */
function fakeHeap(start: number): Heap & { size: number; live: number; collected: number } {
  const heap = {
    size: start,
    live: start,
    collected: 0,
    sizeBytes: () => heap.size,
    collect: () => {
      heap.collected++;
      heap.size = heap.live;
    },
  };
  return heap;
}

describe("GcPacer", () => {
  test("collects once the heap has grown by a quarter over what the last collection left", () => {
    const heap = fakeHeap(20 * MiB);
    const clock = new FakeClock();
    const { logger, lines } = memoryLogger();
    const pacer = new GcPacer({ heap, clock, logger });
    expect(pacer.targetBytes()).toBe(25 * MiB);
    heap.size = 24.9 * MiB;
    pacer.tick();
    expect(heap.collected).toBe(0);
    heap.size = 31 * MiB;
    heap.live = 24 * MiB;
    pacer.tick();
    expect(heap.collected).toBe(1);
    // The new baseline is what the collection left.
    expect(pacer.targetBytes()).toBe(30 * MiB);
    expect(lines.some((l) => l.includes("full garbage collection") && l.includes("beforeMiB=31 ") && l.includes("afterMiB=24 "))).toBe(true);
  });

  test("a small heap grows by at least minGrowthBytes before a collection", () => {
    const heap = fakeHeap(2 * MiB);
    const pacer = new GcPacer({ heap, clock: new FakeClock(), logger: memoryLogger().logger, minGrowthBytes: 4 * MiB });
    heap.size = 5.9 * MiB;
    pacer.tick();
    expect(heap.collected).toBe(0);
    heap.size = 6.1 * MiB;
    pacer.tick();
    expect(heap.collected).toBe(1);
  });

  test("at most one collection per minIntervalMs, however fast the heap grows", () => {
    const heap = fakeHeap(10 * MiB);
    const clock = new FakeClock();
    const pacer = new GcPacer({ heap, clock, logger: memoryLogger().logger, minIntervalMs: 10_000 });
    heap.size = 100 * MiB;
    pacer.tick();
    expect(heap.collected).toBe(1);
    heap.size = 100 * MiB;
    clock.advance(9_999);
    pacer.tick();
    expect(heap.collected).toBe(1);
    clock.advance(1);
    pacer.tick();
    expect(heap.collected).toBe(2);
    expect(pacer.collectionCount()).toBe(2);
  });
});
