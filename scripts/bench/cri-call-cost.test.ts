import { expect, test } from "bun:test";
import { allocationsByBlock } from "./cri-call-cost.ts";

test("allocations per block: each collection's heap at its start less the heap after the previous one, within the block's marks", () => {
  const log = [
    "[GC<0x1>: START M 9000kb => FullCollection, a=0kb]",
    "[GC<0x1>: epilogue Full sweep: 9000kb => 1000kb, 0.3ms]",
    "CRI-BENCH-MARK start 0",
    "Requesting GC because bytes allocated this cycle: 8403685 exceed bytes allowed: 8388608",
    "[GC<0x1>: START E 9200kb => EdenCollection, a=0kb]",
    "[GC<0x1>: epilogue Eden sweep: 9200kb => 1500kb, 0.1ms]",
    "[GC<0x1>: START M 1800kb => FullCollection, a=0kb]",
    "[GC<0x1>: epilogue Full sweep: 1800kb => 1100kb, 0.2ms]",
    "CRI-BENCH-MARK end 0",
    "CRI-BENCH-MARK start 1",
    "[GC<0x1>: START M 1600kb => FullCollection, a=0kb]",
    "[GC<0x1>: epilogue Full sweep: 1600kb => 1100kb, 0.2ms]",
    "CRI-BENCH-MARK end 1",
  ].join("\n");
  expect(Object.fromEntries(allocationsByBlock(log))).toEqual({
    0: { collections: 2, allocatedKiB: 8200 + 300 },
    1: { collections: 1, allocatedKiB: 500 },
  });
});
