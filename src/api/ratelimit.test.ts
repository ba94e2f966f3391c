import { expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { InFlightLimit, TokenBucket } from "./ratelimit.ts";

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

test("InFlightLimit: at most `limit` at once, the rest in order as slots come back", async () => {
  const limit = new InFlightLimit(2);
  const order: number[] = [];
  const releases: (() => void)[] = [];
  const calls = Array.from({ length: 4 }, (_, i) => limit.acquire().then((release) => (order.push(i), releases.push(release))));
  await Bun.sleep(0);
  expect(order).toEqual([0, 1]);
  expect(limit.inFlight()).toBe(2);
  releases[0]!();
  releases[0]!(); // a second release of the same slot gives nothing back
  await Bun.sleep(0);
  expect(order).toEqual([0, 1, 2]);
  releases[1]!();
  await Bun.sleep(0);
  expect(order).toEqual([0, 1, 2, 3]);
  await Promise.all(calls);
  releases[2]!();
  releases[3]!();
  expect(limit.inFlight()).toBe(0);
});
