import { expect, test } from "bun:test";
import { realClock } from "./clock.ts";
import { DisposalStack, StopFailed, StopTimeout } from "./disposal.ts";
import { memoryLogger } from "./log.ts";

const never = () => new Promise<void>(() => {});

test("parts stop in reverse order, each logged at v2 with its duration", async () => {
  const { logger, lines } = memoryLogger(2);
  const stack = new DisposalStack({ clock: realClock, logger, limits: { partTimeoutMs: 1000, totalTimeoutMs: 2000 } });
  const order: string[] = [];
  stack.defer("first", () => void order.push("first"));
  stack.use("second", { [Symbol.dispose]: () => void order.push("second") });
  stack.use("third", { [Symbol.asyncDispose]: async () => void order.push("third") });
  await stack.dispose();
  expect(order).toEqual(["third", "second", "first"]);
  for (const part of ["first", "second", "third"]) expect(lines.some((l) => l.includes('"stopped"') && l.includes(`part=${part}`) && l.includes("ms="))).toBe(true);
  await stack.dispose(); // idempotent
  expect(order).toHaveLength(3);
});

test("a part that hangs is named and left behind; the parts before it still stop", async () => {
  const { logger, lines } = memoryLogger(2);
  const stack = new DisposalStack({ clock: realClock, logger, limits: { partTimeoutMs: 50, totalTimeoutMs: 2000 } });
  let earlier = false;
  stack.defer("earlier", () => void (earlier = true));
  stack.defer("hanging", never);
  const started = Date.now();
  await stack.dispose();
  expect(Date.now() - started).toBeLessThan(1000);
  expect(earlier).toBe(true);
  expect(stack.pending()).toEqual(["hanging"]);
  expect(lines.some((l) => l.includes("did not stop in time") && l.includes("part=hanging"))).toBe(true);
});

test("past the total deadline: the rest are told to stop at once and the stuck parts are named", async () => {
  const { logger } = memoryLogger(2);
  const stack = new DisposalStack({ clock: realClock, logger, limits: { partTimeoutMs: 60, totalTimeoutMs: 100 } });
  let unreached = false;
  stack.defer("unreached", () => void (unreached = true));
  stack.defer("slow b", never);
  stack.defer("slow a", never);
  const started = Date.now();
  const err = await stack.dispose().catch((e: unknown) => e);
  expect(Date.now() - started).toBeLessThan(1000);
  expect(err).toBeInstanceOf(StopTimeout);
  expect((err as StopTimeout).stuck).toEqual(["slow a", "slow b"]);
  expect((err as StopTimeout).unreached).toEqual(["unreached"]);
  expect((err as Error).message).toContain("still stopping: slow a, slow b");
  expect(unreached).toBe(true);
});

test("a part that fails is logged and named; the others still stop", async () => {
  const { logger, lines } = memoryLogger(0);
  const stack = new DisposalStack({ clock: realClock, logger });
  let other = false;
  stack.defer("other", () => void (other = true));
  stack.defer("broken", () => {
    throw new Error("boom");
  });
  const err = await stack.dispose().catch((e: unknown) => e);
  expect(err).toBeInstanceOf(StopFailed);
  expect((err as Error).message).toBe("stopping failed: broken: boom");
  expect(other).toBe(true);
  expect(lines.some((l) => l.includes("failed to stop") && l.includes("part=broken"))).toBe(true);
});

test("no timer is left behind", async () => {
  const cancelled: number[] = [];
  let pending = 0;
  const clock = {
    ...realClock,
    setTimer: (ms: number, fn: () => void) => {
      pending++;
      const cancel = realClock.setTimer(ms, () => (pending--, fn()));
      return () => (cancelled.push(ms), pending--, cancel());
    },
  };
  const stack = new DisposalStack({ clock, logger: memoryLogger(0).logger });
  stack.defer("a", () => {});
  stack.defer("b", async () => {});
  await stack.dispose();
  expect(pending).toBe(0);
});
