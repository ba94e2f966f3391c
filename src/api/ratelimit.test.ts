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
