import { describe, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { StartGate } from "./start-gate.ts";

const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("StartGate", () => {
  test("slots are taken in arrival order; leaving hands the slot to the next; leaving twice frees one slot", async () => {
    const gate = new StartGate(2, 2000, new FakeClock());
    const order: string[] = [];
    const a = await gate.enter();
    const b = await gate.enter();
    const c = gate.enter().then((leave) => (order.push("c"), leave));
    const d = gate.enter().then((leave) => (order.push("d"), leave));
    await flush();
    expect(order).toEqual([]);
    expect(gate.load()).toEqual({ active: 2, waiting: 2 });
    a();
    a();
    await flush();
    expect(order).toEqual(["c"]);
    expect(gate.load()).toEqual({ active: 2, waiting: 1 });
    b();
    (await c)();
    (await d)();
    expect(gate.load()).toEqual({ active: 0, waiting: 0 });
  });

  test("a pod that waited maxWaitMs goes through without a slot: a stuck one holds the others back that long at most", async () => {
    const clock = new FakeClock();
    const gate = new StartGate(1, 2000, clock);
    const stuck = await gate.enter();
    let through = false;
    const waiting = gate.enter().then((leave) => ((through = true), leave));
    clock.advance(1999);
    await flush();
    expect(through).toBe(false);
    clock.advance(1);
    await flush();
    expect(through).toBe(true);
    (await waiting)(); // leaving without a slot frees nothing
    expect(gate.load()).toEqual({ active: 1, waiting: 0 });
    stuck();
    expect(gate.load()).toEqual({ active: 0, waiting: 0 });
  });
});
