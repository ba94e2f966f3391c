import { expect, test } from "bun:test";
import { CpuRates } from "./rate.ts";

test("usageNanoCores from two samples: Δusage ns per second", () => {
  const r = new CpuRates();
  expect(r.observe("a", 1_000_000_000, 10_000)).toBeUndefined();
  // 5 s of CPU in 10 s: half a core.
  expect(r.observe("a", 6_000_000_000, 20_000)).toBe(500_000_000);
  expect(r.observe("a", 6_000_000_000, 30_000)).toBe(0);
});

test("a second sample at the same instant repeats the last rate instead of dividing by zero", () => {
  const r = new CpuRates();
  r.observe("a", 0, 0);
  expect(r.observe("a", 2e9, 1000)).toBe(2e9);
  expect(r.observe("a", 3e9, 1000)).toBe(2e9);
});

test("a counter that went backwards (a recreated cgroup) starts over", () => {
  const r = new CpuRates();
  r.observe("a", 9e9, 0);
  expect(r.observe("a", 1e9, 1000)).toBeUndefined();
  expect(r.observe("a", 2e9, 2000)).toBe(1e9);
});

test("keys not seen in a round are forgotten", () => {
  const r = new CpuRates();
  r.beginRound();
  r.observe("a", 0, 0);
  r.observe("b", 0, 0);
  r.endRound();
  r.beginRound();
  r.observe("a", 1e9, 1000);
  r.endRound();
  expect(r.size).toBe(1);
  r.beginRound();
  expect(r.observe("b", 1e9, 2000)).toBeUndefined();
});
