import { describe, expect, test } from "bun:test";
import { testConfig, Gi, Mi } from "./testing.ts";
import {
  EvictionConfigError,
  formatThresholdQuantity,
  mergeThresholds,
  parseThresholdConfig,
  sortBySignal,
  thresholdQuantity,
  thresholdsFirstObservedAt,
  thresholdsMet,
  thresholdsMetGracePeriod,
  thresholdsUpdatedStats,
} from "./thresholds.ts";
import type { Observations, Threshold } from "./types.ts";

const parse = (doc: Record<string, unknown>) => parseThresholdConfig(testConfig(doc));
const q = (value: number, text = String(value)) => ({ kind: "quantity" as const, value, text });
const hard = (signal: Threshold["signal"], value: number, minReclaim?: number): Threshold => ({
  id: `hard/${signal}`,
  signal,
  value: q(value),
  gracePeriodMs: 0,
  ...(minReclaim !== undefined ? { minReclaim: q(minReclaim) } : {}),
});

describe("parseThresholdConfig", () => {
  test("the Linux defaults, with memory.available copied to allocatableMemory.available (enforceNodeAllocatable: pods)", () => {
    const { thresholds } = parse({});
    expect(thresholds.map((t) => [t.id, t.value.kind === "quantity" ? t.value.text : t.value.fraction])).toEqual([
      ["hard/memory.available", "100Mi"],
      ["allocatable/allocatableMemory.available", "100Mi"],
      ["hard/nodefs.available", Math.fround(0.1)],
      ["hard/nodefs.inodesFree", Math.fround(0.05)],
      ["hard/imagefs.available", Math.fround(0.15)],
      ["hard/imagefs.inodesFree", Math.fround(0.05)],
    ]);
  });

  test("no allocatable copy without enforceNodeAllocatable pods", () => {
    const { thresholds } = parse({ evictionHard: { "memory.available": "1Gi" }, enforceNodeAllocatable: [] });
    expect(thresholds.map((t) => t.id)).toEqual(["hard/memory.available"]);
  });

  test("soft thresholds take their grace period; minimum reclaims attach to hard and soft alike", () => {
    const { thresholds } = parse({
      evictionHard: { "memory.available": "100Mi" },
      evictionSoft: { "memory.available": "300Mi" },
      evictionSoftGracePeriod: { "memory.available": "1m30s" },
      evictionMinimumReclaim: { "memory.available": "50Mi" },
      enforceNodeAllocatable: [],
    });
    expect(thresholds).toEqual([
      { id: "hard/memory.available", signal: "memory.available", value: q(100 * Mi, "100Mi"), gracePeriodMs: 0, minReclaim: q(50 * Mi, "50Mi") },
      { id: "soft/memory.available", signal: "memory.available", value: q(300 * Mi, "300Mi"), gracePeriodMs: 90_000, minReclaim: q(50 * Mi, "50Mi") },
    ]);
  });

  test("0% and 100% disable a threshold, as upstream", () => {
    const { thresholds } = parse({ evictionHard: { "nodefs.available": "0%", "imagefs.available": "100%", "pid.available": "10%" } });
    expect(thresholds.map((t) => t.id)).toEqual(["hard/pid.available"]);
  });

  test("containerfs signals are reported as ignored, not acted on", () => {
    const { thresholds, ignored } = parse({ evictionHard: { "containerfs.available": "10%", "memory.available": "1Gi" }, enforceNodeAllocatable: [] });
    expect(thresholds.map((t) => t.id)).toEqual(["hard/memory.available"]);
    expect(ignored).toEqual(["evictionHard[containerfs.available]"]);
  });

  test.each([
    [{ evictionSoft: { "memory.available": "1Gi" } }, "evictionSoft: grace period must be specified for the soft eviction threshold memory.available"],
    [{ evictionHard: { "memory.available": "0" } }, "evictionHard: eviction threshold memory.available must be positive: 0"],
    [{ evictionMinimumReclaim: { "memory.available": "0%" } }, "evictionMinimumReclaim: eviction percentage minimum reclaim memory.available must be positive: 0%"],
    [{ evictionMinimumReclaim: { "memory.available": "-1Mi" } }, "evictionMinimumReclaim: negative eviction minimum reclaim specified for memory.available"],
    [
      { evictionSoft: { "memory.available": "1Gi" }, evictionSoftGracePeriod: { "memory.available": -1 } },
      "evictionSoftGracePeriod: invalid eviction grace period specified: -1ms, must be a positive value",
    ],
    [{ evictionHard: { "disk.available": "1Gi" } }, "evictionHard: unsupported eviction signal disk.available"],
  ])("%p is refused: %s", (doc, message) => {
    // Raw settings, past the config schema (which already refuses some of these).
    const raw = { evictionHard: {}, evictionSoft: {}, evictionSoftGracePeriod: {}, evictionMinimumReclaim: {}, enforceNodeAllocatable: [], ...doc };
    expect(() => parseThresholdConfig(raw as never)).toThrow(new EvictionConfigError(message));
  });
});

describe("threshold quantities", () => {
  test("a percentage is int64(capacity × float32 fraction), as upstream GetThresholdQuantity", () => {
    const tenPercent = { kind: "percentage" as const, fraction: Math.fround(0.1) };
    expect(thresholdQuantity(tenPercent, 1000)).toBe(100);
    // float32(0.1) is a little above 0.1: 10 GiB × 0.1000000015 truncates to 1073741840 bytes.
    expect(thresholdQuantity(tenPercent, 10 * Gi)).toBe(1073741840);
    expect(formatThresholdQuantity(tenPercent, 10 * Gi)).toBe("1073741840");
  });
  test("a quantity prints as it was written, canonicalised", () => {
    expect(formatThresholdQuantity(q(Gi, "1024Mi"), 0)).toBe("1Gi");
  });
});

describe("thresholdsMet (upstream TestThresholdsMet)", () => {
  const mem = (available: number): Observations => ({ "memory.available": { available, capacity: 3 * Gi } });
  test.each([
    ["no thresholds", [], mem(500 * Mi), false, []],
    ["met", [hard("memory.available", Gi)], mem(500 * Mi), false, ["hard/memory.available"]],
    ["not met", [hard("memory.available", Gi)], mem(2 * Gi), false, []],
    ["available equal to the threshold is not met", [hard("memory.available", Gi)], mem(Gi), false, []],
    ["met with min reclaim: below threshold + reclaim", [hard("memory.available", Gi, 500 * Mi)], mem(Gi), true, ["hard/memory.available"]],
    ["not met with min reclaim: above threshold + reclaim", [hard("memory.available", Gi, 500 * Mi)], mem(2 * Gi), true, []],
    ["min reclaim is ignored unless enforced", [hard("memory.available", Gi, 500 * Mi)], mem(Gi), false, []],
    ["no observation", [hard("nodefs.available", Gi)], mem(0), false, []],
  ] as [string, Threshold[], Observations, boolean, string[]][])("%s", (_name, thresholds, observations, enforce, want) => {
    expect(thresholdsMet(thresholds, observations, enforce).map((t) => t.id)).toEqual(want);
  });

  test("reports signals that have a threshold but no observation", () => {
    const missing = new Set<string>();
    thresholdsMet([hard("pid.available", 100)], {}, false, missing as never);
    expect([...missing]).toEqual(["pid.available"]);
  });
});

describe("grace periods and first observation", () => {
  const soft: Threshold = { id: "soft/memory.available", signal: "memory.available", value: q(Gi), gracePeriodMs: 60_000 };
  const h = hard("memory.available", Gi);

  test("the first time a threshold was met is kept while it stays met, and dropped when it is not", () => {
    const first = thresholdsFirstObservedAt([soft], new Map(), 1000);
    expect(first.get(soft.id)).toBe(1000);
    expect(thresholdsFirstObservedAt([soft], first, 5000).get(soft.id)).toBe(1000);
    expect(thresholdsFirstObservedAt([], first, 5000).size).toBe(0);
  });

  test.each([
    ["hard: at once", h, 0, true],
    ["soft: not before its grace period", soft, 59_999, false],
    ["soft: once its grace period has passed", soft, 60_000, true],
  ] as const)("%s", (_name, t, elapsed, want) => {
    const first = new Map([[t.id, 1000]]);
    expect(thresholdsMetGracePeriod([t], first, 1000 + elapsed).length).toBe(want ? 1 : 0);
  });

  test("only thresholds whose stats are newer than last pass are acted on (upstream thresholdsUpdatedStats)", () => {
    const at = (time?: number): Observations => ({ "memory.available": { available: 0, capacity: Gi, ...(time !== undefined ? { time } : {}) } });
    expect(thresholdsUpdatedStats([h], at(2), at(1))).toHaveLength(1);
    expect(thresholdsUpdatedStats([h], at(1), at(1))).toHaveLength(0);
    expect(thresholdsUpdatedStats([h], at(1), {})).toHaveLength(1);
    expect(thresholdsUpdatedStats([h], at(), at())).toHaveLength(1);
    expect(thresholdsUpdatedStats([h], {}, at(1))).toHaveLength(0);
  });

  test("merge keeps one of each, and memory sorts first with hard before soft", () => {
    const disk = hard("nodefs.available", Gi);
    expect(mergeThresholds([disk], [disk, soft]).map((t) => t.id)).toEqual(["hard/nodefs.available", "soft/memory.available"]);
    expect(sortBySignal([disk, soft, h]).map((t) => t.id)).toEqual(["hard/memory.available", "soft/memory.available", "hard/nodefs.available"]);
  });
});
