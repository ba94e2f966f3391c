import { describe, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { StartGate } from "./start-gate.ts";

const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("StartGate", () => {
  test("slots are taken in arrival order; leaving hands the slot to the next; leaving twice frees one slot", async () => {
    const gate = new StartGate(2, 3000, new FakeClock());
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

  test("a waiter waits as long as the slots are held, with no time limit of its own", async () => {
    const clock = new FakeClock();
    const gate = new StartGate(1, 3000, clock);
    const first = await gate.enter();
    let through = false;
    const next = gate.enter().then((leave) => ((through = true), leave));
    clock.advance(2999);
    await flush();
    expect(through).toBe(false);
    first();
    await flush();
    expect(through).toBe(true);
    (await next)();
    expect(gate.load()).toEqual({ active: 0, waiting: 0 });
  });

  test("a pod that holds its slot maxHoldMs loses it to the next; leaving later frees nothing", async () => {
    const clock = new FakeClock();
    const gate = new StartGate(1, 3000, clock);
    const slow = await gate.enter();
    let through = false;
    const next = gate.enter().then((leave) => ((through = true), leave));
    clock.advance(3000);
    await flush();
    expect(through).toBe(true);
    expect(gate.load()).toEqual({ active: 1, waiting: 0 });
    slow(); // the slow pod finishes: its slot went to `next` already
    expect(gate.load()).toEqual({ active: 1, waiting: 0 });
    const nextLeave = await next;
    // The slot the next pod got is held for maxHoldMs from when it got it.
    const third = gate.enter();
    clock.advance(2999);
    await flush();
    expect(gate.load()).toEqual({ active: 1, waiting: 1 });
    nextLeave();
    (await third)();
    expect(gate.load()).toEqual({ active: 0, waiting: 0 });
  });
});

describe("StartGate: a pod that must stop while it waits", () => {
  test("leaves the queue at once with its signal's reason, and the pods behind it keep their order", async () => {
    const gate = new StartGate(1, 3000, new FakeClock());
    const first = await gate.enter();
    const podMustStop = new AbortController();
    const order: string[] = [];
    const stopping = gate.enter(podMustStop.signal).then(
      () => order.push("stopping entered"),
      (reason: unknown) => order.push(`stopping left: ${String(reason)}`),
    );
    const next = gate.enter().then((leave) => (order.push("next"), leave));
    await flush();
    expect(gate.load()).toEqual({ active: 1, waiting: 2 });
    podMustStop.abort(new Error("the pod must stop"));
    await stopping;
    expect(order).toEqual(["stopping left: Error: the pod must stop"]);
    expect(gate.load()).toEqual({ active: 1, waiting: 1 });
    first();
    (await next)();
    expect(order).toEqual(["stopping left: Error: the pod must stop", "next"]);
    expect(gate.load()).toEqual({ active: 0, waiting: 0 });
    // Already aborted: it does not take a free slot.
    await expect(gate.enter(podMustStop.signal)).rejects.toThrow("the pod must stop");
    expect(gate.load()).toEqual({ active: 0, waiting: 0 });
  });
});
