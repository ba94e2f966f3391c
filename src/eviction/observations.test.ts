import { expect, test } from "bun:test";
import { makeSignalObservations, podStatsLookup } from "./observations.ts";
import { Gi, Mi, pod, podStats, summary } from "./testing.ts";

const at = Date.parse("2026-01-01T00:00:00Z");

test("every signal from a full summary (upstream makeSignalObservations)", () => {
  const s = summary({
    memory: { available: 500 * Mi, workingSet: 1500 * Mi },
    podsMemory: { available: 200 * Mi, workingSet: 800 * Mi },
    nodefs: { available: 2 * Gi, capacity: 10 * Gi, inodesFree: 900, inodes: 1000 },
    imagefs: { available: 3 * Gi, capacity: 20 * Gi, inodesFree: 50, inodes: 100 },
    pids: { max: 4096, running: 96 },
  });
  expect(makeSignalObservations(s)).toEqual({
    // capacity = available + working set
    "memory.available": { available: 500 * Mi, capacity: 2000 * Mi, time: at },
    "allocatableMemory.available": { available: 200 * Mi, capacity: 1000 * Mi, time: at },
    "nodefs.available": { available: 2 * Gi, capacity: 10 * Gi, time: at },
    "nodefs.inodesFree": { available: 900, capacity: 1000, time: at },
    "imagefs.available": { available: 3 * Gi, capacity: 20 * Gi, time: at },
    "imagefs.inodesFree": { available: 50, capacity: 100, time: at },
    "pid.available": { available: 4000, capacity: 4096, time: at },
  });
});

test("a signal is observed only with both its available amount and its capacity", () => {
  const s = summary({ nodefs: { available: Gi, capacity: 2 * Gi } });
  s.node.memory = { time: "2026-01-01T00:00:00Z", availableBytes: Mi }; // no working set
  s.node.rlimit = { time: "2026-01-01T00:00:00Z", maxpid: 100 }; // no curproc
  expect(Object.keys(makeSignalObservations(s))).toEqual(["nodefs.available"]);
});

test("Go's zero time and a missing time count as no time", () => {
  const s = summary({ memory: { available: Mi, workingSet: Mi } });
  s.node.memory!.time = "0001-01-01T00:00:00Z";
  expect(makeSignalObservations(s)["memory.available"]).toEqual({ available: Mi, capacity: 2 * Mi });
});

test("pod stats are found by pod UID", () => {
  const a = pod({ name: "a" });
  const lookup = podStatsLookup(summary({ pods: [podStats(a, { memory: Mi })] }));
  expect(lookup("a")?.memory?.workingSetBytes).toBe(Mi);
  expect(lookup("b")).toBeUndefined();
  expect(lookup(undefined)).toBeUndefined();
});
