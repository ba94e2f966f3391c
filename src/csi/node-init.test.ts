import { describe, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { CsiNodeInitializer } from "./node-init.ts";

const settle = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("CsiNodeInitializer (upstream initializeCSINode as a readiness gate)", () => {
  test("not yet initialized until the CSINode is made; then no error and a status update asked for", async () => {
    const clock = new FakeClock();
    let asked = 0;
    const init = new CsiNodeInitializer({ drivers: { initializeCsiNode: async () => {} }, nodeStatus: { request: () => void asked++ }, clock, logger: memoryLogger().logger });
    expect(init.storageError()).toBe("CSINode is not yet initialized");
    await init.run();
    expect(init.storageError()).toBeUndefined();
    expect(asked).toBe(1);
  });

  test("a failure is the error until the next try, tried again with upstream's back-off (15 ms sixfold), then every 117 s", async () => {
    const clock = new FakeClock();
    const tries: number[] = [];
    let failures = 7;
    const init = new CsiNodeInitializer({
      drivers: {
        initializeCsiNode: async () => {
          tries.push(clock.now());
          if (failures-- > 0) throw new Error("csinodes is forbidden");
        },
      },
      nodeStatus: { request: () => {} },
      clock,
      logger: memoryLogger().logger,
    });
    const done = init.run();
    await settle();
    expect(init.storageError()).toBe("failed to initialize CSINode: csinodes is forbidden");
    for (const step of [15, 90, 540, 3_240, 19_440, 116_640, 116_640]) {
      clock.advance(step);
      await settle();
    }
    await done;
    expect(tries.map((t, i) => (i === 0 ? 0 : t - tries[i - 1]!))).toEqual([0, 15, 90, 540, 3_240, 19_440, 116_640, 116_640]);
    expect(init.storageError()).toBeUndefined();
  });

  test("disposed while waiting: the tries stop and the error stays", async () => {
    const clock = new FakeClock();
    let tries = 0;
    const init = new CsiNodeInitializer({
      drivers: {
        initializeCsiNode: async () => {
          tries++;
          throw new Error("no API server");
        },
      },
      nodeStatus: { request: () => {} },
      clock,
      logger: memoryLogger().logger,
    });
    const done = init.run();
    await settle();
    await init[Symbol.asyncDispose]();
    await done;
    clock.advance(1_000_000);
    await settle();
    expect(tries).toBe(1);
    expect(init.storageError()).toContain("failed to initialize CSINode");
  });
});
