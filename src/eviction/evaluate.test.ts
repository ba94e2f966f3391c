import { expect, test } from "bun:test";
import { evaluate, initialEvictionState, type EvictionState } from "./evaluate.ts";
import { Mi } from "./testing.ts";
import type { Observations, Threshold } from "./types.ts";

const q = (value: number) => ({ kind: "quantity" as const, value, text: String(value) });
const hard: Threshold = { id: "hard/memory.available", signal: "memory.available", value: q(100 * Mi), gracePeriodMs: 0, minReclaim: q(50 * Mi) };
const soft: Threshold = { id: "soft/memory.available", signal: "memory.available", value: q(300 * Mi), gracePeriodMs: 60_000 };
const PERIOD = 300_000;

/** Runs passes in order; each step is [ms since start, MiB available]. */
function run(thresholds: Threshold[], steps: [number, number][]) {
  let state: EvictionState = initialEvictionState();
  return steps.map(([at, availableMi]) => {
    const observations: Observations = { "memory.available": { available: availableMi * Mi, capacity: 1024 * Mi, time: at } };
    const r = evaluate({ thresholds, state, observations, now: at, pressureTransitionPeriodMs: PERIOD });
    state = r.state;
    return { at, actOn: r.actOn.map((t) => t.id), conditions: [...r.state.nodeConditions] };
  });
}

test("a hard threshold acts at once and stays met until available recovers past threshold + minimum reclaim", () => {
  expect(
    run(
      [hard],
      [
        [0, 50],
        [10_000, 120],
        [20_000, 149],
        [30_000, 151],
        [40_000, 120],
      ],
    ),
  ).toEqual([
    { at: 0, actOn: ["hard/memory.available"], conditions: ["MemoryPressure"] },
    // 120Mi is above the 100Mi threshold but below 100 + 50: still reclaiming
    { at: 10_000, actOn: ["hard/memory.available"], conditions: ["MemoryPressure"] },
    { at: 20_000, actOn: ["hard/memory.available"], conditions: ["MemoryPressure"] },
    // recovered past 150Mi: nothing to do, but the condition is held
    { at: 30_000, actOn: [], conditions: ["MemoryPressure"] },
    // once resolved, minimum reclaim no longer applies: 120Mi is fine again
    { at: 40_000, actOn: [], conditions: ["MemoryPressure"] },
  ]);
});

test("a soft threshold sets the condition at once but acts only after its grace period, continuously met", () => {
  expect(
    run(
      [soft],
      [
        [0, 200],
        [30_000, 250],
        [59_999, 250],
        [60_000, 250],
      ],
    ).map((s) => s.actOn),
  ).toEqual([[], [], [], ["soft/memory.available"]]);
  // Recovering in between restarts the grace period.
  const interrupted = run(
    [soft],
    [
      [0, 200],
      [30_000, 400],
      [40_000, 200],
      [90_000, 200],
      [100_000, 200],
    ],
  );
  expect(interrupted.map((s) => s.actOn)).toEqual([[], [], [], [], ["soft/memory.available"]]);
  expect(interrupted.map((s) => s.conditions.length)).toEqual([1, 1, 1, 1, 1]);
});

test("the condition is held for the transition period after pressure was last seen", () => {
  // Last seen at 0: held until just before 0 + PERIOD.
  expect(
    run(
      [hard],
      [
        [0, 50],
        [PERIOD - 1, 500],
        [PERIOD, 500],
      ],
    ).map((s) => s.conditions),
  ).toEqual([["MemoryPressure"], ["MemoryPressure"], []]);
  // Seen again at 10s: the hold restarts from there.
  expect(
    run(
      [hard],
      [
        [0, 50],
        [10_000, 50],
        [PERIOD, 500],
        [10_000 + PERIOD, 500],
      ],
    ).map((s) => s.conditions),
  ).toEqual([["MemoryPressure"], ["MemoryPressure"], ["MemoryPressure"], []]);
});

test("stale stats (same time as last pass) keep conditions but act on nothing", () => {
  let state = initialEvictionState();
  const observations: Observations = { "memory.available": { available: 10 * Mi, capacity: 1024 * Mi, time: 5 } };
  const first = evaluate({ thresholds: [hard], state, observations, now: 0, pressureTransitionPeriodMs: PERIOD });
  state = first.state;
  const again = evaluate({ thresholds: [hard], state, observations, now: 10_000, pressureTransitionPeriodMs: PERIOD });
  expect(first.actOn).toHaveLength(1);
  expect(again.actOn).toHaveLength(0);
  expect(again.state.nodeConditions).toEqual(["MemoryPressure"]);
});

test("signals with a threshold but no observation are reported missing", () => {
  const r = evaluate({ thresholds: [hard], state: initialEvictionState(), observations: {}, now: 0, pressureTransitionPeriodMs: PERIOD });
  expect([...r.missing]).toEqual(["memory.available"]);
  expect(r.state.nodeConditions).toEqual([]);
});
