import { expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { clientGoRateLimit, TokenBucket } from "./ratelimit.ts";

test("burst passes at once, then calls are spaced at qps", async () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket({ qps: 2, burst: 3, clock });
  const done: number[] = [];
  const start = clock.now();
  const calls = Array.from({ length: 5 }, () => bucket.take().then(() => done.push(clock.now() - start)));
  for (let i = 0; i < 20; i++) {
    await Promise.resolve();
    await Bun.sleep(0);
    clock.advance(100);
  }
  await Promise.all(calls);
  expect(done.slice(0, 3)).toEqual([0, 0, 0]);
  expect(done[3]).toBe(500);
  expect(done[4]).toBe(1000);
});

test("a waiter woken late costs the ones behind it nothing: the rate holds on a busy event loop", async () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket({ qps: 10, burst: 1, clock });
  const done: number[] = [];
  const start = clock.now();
  const calls = Array.from({ length: 11 }, () => bucket.take().then(() => done.push(clock.now() - start)));
  // Time moves in 150 ms steps, so each 100 ms wait ends up to 50 ms late, as on a loaded event loop.
  for (let i = 0; i < 20 && done.length < 11; i++) {
    await Promise.resolve();
    await Bun.sleep(0);
    clock.advance(150);
  }
  await Promise.all(calls);
  // The 11th call's token is due at 1000 ms: it passes at the first step after that, not after 10 late wakes (1500 ms).
  expect(done.at(-1)).toBeLessThanOrEqual(1050);
  expect(done).toEqual([...done].sort((a, b) => a - b));
});

test("a client's limit reads as client-go's: QPS 0 is 5, burst 0 is 10, a negative QPS none", () => {
  expect(clientGoRateLimit(50, 100)).toEqual({ qps: 50, burst: 100 });
  expect(clientGoRateLimit(0, 0)).toEqual({ qps: 5, burst: 10 });
  expect(clientGoRateLimit(-1, 3)).toEqual({ qps: 0, burst: 3 });
});

/** A take's outcome once settled: "passed", or the abort's message. */
function settled(take: Promise<void>): { outcome?: string } {
  const state: { outcome?: string } = {};
  take.then(
    () => {
      state.outcome = "passed";
    },
    (err: Error) => {
      state.outcome = err.message;
    },
  );
  return state;
}

/** Lets the bucket's waiters run, then moves the clock 100 ms, until `until` holds. */
async function stepUntil(clock: FakeClock, until: () => boolean): Promise<void> {
  for (let i = 0; i < 50 && !until(); i++) {
    await Promise.resolve();
    await Bun.sleep(0);
    clock.advance(100);
  }
}

test("a waiter that gives up returns its token: the next caller goes in its place, not a turn later", async () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket({ qps: 2, burst: 1, clock });
  const start = clock.now();
  await bucket.take(); // the burst
  const abort = new AbortController();
  const cancelled = settled(bucket.take(abort.signal)); // due at 500 ms
  abort.abort(new Error("pod deleted"));
  await stepUntil(clock, () => cancelled.outcome !== undefined);
  expect(cancelled.outcome).toBe("pod deleted");
  let passedAt: number | undefined;
  const next = bucket.take().then(() => {
    passedAt = clock.now() - start;
  });
  await stepUntil(clock, () => passedAt !== undefined);
  await next;
  // Without the token back it would wait for 1000 ms (behind the cancelled caller's turn).
  expect(passedAt).toBe(500);
});

test("an earlier waiter that gives up leaves the turns reserved after it as they were", async () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket({ qps: 10, burst: 1, clock });
  const start = clock.now();
  await bucket.take();
  const abort = new AbortController();
  const first = settled(bucket.take(abort.signal)); // due at 100 ms
  const done: number[] = [];
  const second = bucket.take().then(() => done.push(clock.now() - start)); // due at 200 ms
  abort.abort(new Error("gone"));
  await Bun.sleep(0);
  expect(first.outcome).toBe("gone");
  const third = bucket.take().then(() => done.push(clock.now() - start)); // due at 300 ms: the second counted on the first's token
  await stepUntil(clock, () => done.length === 2);
  await Promise.all([second, third]);
  expect(done).toEqual([200, 300]);
});

test("a caller already aborted takes no token", async () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
  const aborted = settled(bucket.take(AbortSignal.abort(new Error("before"))));
  await Bun.sleep(0);
  expect(aborted.outcome).toBe("before");
  let passed = false;
  await bucket.take().then(() => {
    passed = true;
  });
  expect(passed).toBe(true);
});
