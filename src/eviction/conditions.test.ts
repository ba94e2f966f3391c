import { expect, test } from "bun:test";
import { nodeConditions, nodeConditionsLastObservedAt, nodeConditionsObservedSince, taintsFor } from "./conditions.ts";
import type { NodeConditionType, Signal, Threshold } from "./types.ts";

const t = (signal: Signal): Threshold => ({ id: `hard/${signal}`, signal, value: { kind: "quantity", value: 1, text: "1" }, gracePeriodMs: 0 });

test.each([
  [[], []],
  [["memory.available"], ["MemoryPressure"]],
  [["allocatableMemory.available"], ["MemoryPressure"]],
  [["nodefs.available", "imagefs.inodesFree"], ["DiskPressure"]],
  [
    ["pid.available", "nodefs.inodesFree", "memory.available"],
    ["MemoryPressure", "DiskPressure", "PIDPressure"],
  ],
] as [Signal[], NodeConditionType[]][])("thresholds on %p put the node in %p", (signals, want) => {
  expect(nodeConditions(signals.map(t))).toEqual(want);
});

test("conditions seen now are stamped now; others keep their time (upstream nodeConditionsLastObservedAt)", () => {
  const last = new Map<NodeConditionType, number>([
    ["DiskPressure", 100],
    ["MemoryPressure", 100],
  ]);
  expect(nodeConditionsLastObservedAt(["MemoryPressure"], last, 500)).toEqual(
    new Map<NodeConditionType, number>([
      ["DiskPressure", 100],
      ["MemoryPressure", 500],
    ]),
  );
});

test.each([
  ["seen now", 1000, true],
  ["seen just inside the period", 1000 + 299_999, true],
  ["the period has passed", 1000 + 300_000, false],
] as const)("a condition last %s is reported: %p", (_name, now, want) => {
  const last = new Map<NodeConditionType, number>([["MemoryPressure", 1000]]);
  expect(nodeConditionsObservedSince(last, 300_000, now)).toEqual(want ? ["MemoryPressure"] : []);
});

test("each condition suggests its NoSchedule taint", () => {
  expect(taintsFor(["PIDPressure", "MemoryPressure"])).toEqual([
    { key: "node.kubernetes.io/memory-pressure", effect: "NoSchedule" },
    { key: "node.kubernetes.io/pid-pressure", effect: "NoSchedule" },
  ]);
  expect(taintsFor(["DiskPressure"])).toEqual([{ key: "node.kubernetes.io/disk-pressure", effect: "NoSchedule" }]);
});
