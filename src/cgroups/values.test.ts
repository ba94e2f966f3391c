import { expect, test } from "bun:test";
import { milliCpuToQuota, milliCpuToShares, milliValue, intValue, sharesToCpuWeight } from "./values.ts";

// Upstream TestMilliCPUToShares / helpers_linux_test.go, plus the clamps.
test.each([
  [0, 2],
  [1, 2],
  [1, 2],
  [2, 2],
  [10, 10],
  [100, 102],
  [250, 256],
  [1000, 1024],
  [1500, 1536],
  [256000, 262144],
  [262144000, 262144], // above MaxShares
])("MilliCPUToShares(%d) = %d", (milli, shares) => {
  expect(milliCpuToShares(milli)).toBe(shares);
});

// Upstream TestMilliCPUToQuota (100 ms period) and the 50 ms period cases.
test.each([
  [0, 100_000, 0],
  [5, 100_000, 1000],
  [9, 100_000, 1000],
  [10, 100_000, 1000],
  [200, 100_000, 20_000],
  [500, 100_000, 50_000],
  [1000, 100_000, 100_000],
  [1500, 100_000, 150_000],
  [0, 50_000, 0],
  [5, 50_000, 1000],
  [20, 50_000, 1000],
  [21, 50_000, 1050],
  [200, 50_000, 10_000],
  [1500, 50_000, 75_000],
  [333, 100_000, 33_300],
])("MilliCPUToQuota(%d, period %d) = %d", (milli, period, quota) => {
  expect(milliCpuToQuota(milli, period)).toBe(quota);
});

test.each([
  // linear (KEP-2254; runc < 1.3.2)
  [0, "linear", 0],
  [2, "linear", 1],
  [3, "linear", 1],
  [102, "linear", 4],
  [1024, "linear", 39],
  [2048, "linear", 79],
  [262144, "linear", 10000],
  [1, "linear", 1], // below range: clamped, never an invalid weight
  [300000, "linear", 10000],
  // quadratic (opencontainers/cgroups v0.0.5 test table)
  [0, "quadratic", 0],
  [1, "quadratic", 1],
  [2, "quadratic", 1],
  [3, "quadratic", 2],
  [1024, "quadratic", 100],
  [262143, "quadratic", 10000],
  [262144, "quadratic", 10000],
  [262145, "quadratic", 10000],
] as const)("sharesToCpuWeight(%d, %s) = %d", (shares, formula, weight) => {
  expect(sharesToCpuWeight(shares, formula)).toBe(weight);
});

test.each([
  ["100m", 100],
  ["1", 1000],
  ["1.1", 1100], // 1.1 * 1000 is 1100.0000000000002 in float64
  ["0.3", 300],
  ["2.5", 2500],
  ["1500m", 1500],
  ["0.0001", 1], // Quantity.MilliValue rounds up
  [2, 2000],
] as const)("milliValue(%p) = %d", (q, m) => {
  expect(milliValue(q)).toBe(m);
});

test.each([
  ["100Mi", 104857600],
  ["1Gi", 1073741824],
  ["0.1Gi", 107374183], // rounds up like Quantity.Value
  ["1e3", 1000],
  ["128M", 128000000],
] as const)("intValue(%p) = %d", (q, v) => {
  expect(intValue(q)).toBe(v);
});
