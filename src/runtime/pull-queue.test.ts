import { expect, test } from "bun:test";
import { PullQueue } from "./pull-queue.ts";

/** Starts `n` pulls that each wait for their own release; returns the start order log and the releases. */
function pulls(queue: PullQueue, n: number) {
  const log: string[] = [];
  const releases: (() => void)[] = [];
  const done = Array.from({ length: n }, (_, i) =>
    queue.run(async () => {
      log.push(`start ${i}`);
      await new Promise<void>((resolve) => (releases[i] = resolve));
      log.push(`end ${i}`);
      return i;
    }),
  );
  return { log, releases, done };
}
const tick = () => new Promise((r) => setTimeout(r, 0));

test("serialized: one pull at a time, in arrival order", async () => {
  const q = PullQueue.fromConfig(true, undefined);
  const { log, releases, done } = pulls(q, 3);
  await tick();
  expect(log).toEqual(["start 0"]);
  expect(q.size).toEqual({ active: 1, waiting: 2 });
  releases[0]!();
  await tick();
  expect(log).toEqual(["start 0", "end 0", "start 1"]);
  releases[1]!();
  await tick();
  releases[2]!();
  expect(await Promise.all(done)).toEqual([0, 1, 2]);
  expect(q.size).toEqual({ active: 0, waiting: 0 });
});

test("parallel: at most maxParallelImagePulls at once; unbounded without it; a failed pull frees its slot", async () => {
  const q = PullQueue.fromConfig(false, 2);
  const { log, releases, done } = pulls(q, 3);
  await tick();
  expect(log).toEqual(["start 0", "start 1"]);
  releases[1]!();
  await tick();
  expect(log).toContain("start 2");
  releases[0]!();
  releases[2]!();
  await Promise.all(done);
  const unbounded = PullQueue.fromConfig(false, undefined);
  const all = pulls(unbounded, 5);
  await tick();
  expect(all.log).toHaveLength(5);
  all.releases.forEach((r) => r());
  await Promise.all(all.done);
  const one = new PullQueue(1);
  const failed = one.run(async () => Promise.reject(new Error("registry down")));
  let caught = "";
  try {
    await failed;
  } catch (err) {
    caught = (err as Error).message;
  }
  expect(caught).toBe("registry down");
  expect(await one.run(async () => "next")).toBe("next");
});

test('registryPullQPS/registryBurst: a full bucket of burst pulls, then "pull QPS exceeded" until a token is refilled at qps', () => {
  let now = 1_000_000;
  const q = PullQueue.fromConfig(true, undefined, { qps: 2, burst: 3, clock: { now: () => now } });
  for (let i = 0; i < 3; i++) q.throttle();
  expect(() => q.throttle()).toThrow("pull QPS exceeded");
  now += 400; // 0.8 of a token at 2 per second
  expect(() => q.throttle()).toThrow("pull QPS exceeded");
  now += 100; // one token
  q.throttle();
  expect(() => q.throttle()).toThrow("pull QPS exceeded");
  now += 60_000; // refills up to burst, not beyond
  for (let i = 0; i < 3; i++) q.throttle();
  expect(() => q.throttle()).toThrow("pull QPS exceeded");
});

test("registryPullQPS 0: no limit", () => {
  const q = PullQueue.fromConfig(true, undefined, { qps: 0, burst: 10, clock: { now: () => 0 } });
  for (let i = 0; i < 1000; i++) q.throttle();
});

test("a queued pull whose signal aborts (its pod must stop) leaves the queue at once and holds up no pull behind it", async () => {
  const q = PullQueue.fromConfig(true, undefined);
  const running = pulls(q, 1);
  const podMustStop = new AbortController();
  let ran = false;
  const abandoned = q.run(async () => void (ran = true), podMustStop.signal);
  const behind = pulls(q, 1);
  await tick();
  expect(q.size).toEqual({ active: 1, waiting: 2 });
  podMustStop.abort(new Error("the pod must stop"));
  await expect(abandoned).rejects.toThrow("the pod must stop");
  expect(q.size).toEqual({ active: 1, waiting: 1 });
  // The pull under way goes on; the one behind gets the slot after it.
  running.releases[0]!();
  await tick();
  expect(behind.log).toEqual(["start 0"]);
  behind.releases[0]!();
  expect(await Promise.all([...running.done, ...behind.done])).toEqual([0, 0]);
  expect(ran).toBe(false);
  expect(q.size).toEqual({ active: 0, waiting: 0 });
});
