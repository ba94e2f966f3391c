import { expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { TokenBucket } from "./ratelimit.ts";

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
