import { describe, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { Backoff, crashLoopLimits } from "./backoff.ts";

describe("Backoff", () => {
  test("10s doubling to a 5 minute cap", () => {
    const clock = new FakeClock();
    const b = Backoff.crashLoop(clock);
    const seen: number[] = [];
    for (let i = 0; i < 8; i++) {
      b.next("k", clock.now());
      seen.push(b.current("k")!);
      clock.advance(1000);
    }
    expect(seen).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000]);
  });

  test("remaining wait is measured from the failure time", () => {
    const clock = new FakeClock();
    const b = Backoff.crashLoop(clock);
    expect(b.remainingSince("k", clock.now())).toBe(0);
    const failedAt = clock.now();
    b.next("k", failedAt);
    clock.advance(4000);
    expect(b.remainingSince("k", failedAt)).toBe(6000);
    clock.advance(6000);
    expect(b.remainingSince("k", failedAt)).toBe(0);
  });

  test("remaining since the last failure runs down with the clock (an image pull is retried once it ends)", () => {
    const clock = new FakeClock();
    const b = Backoff.crashLoop(clock);
    expect(b.remaining("k")).toBe(0);
    b.next("k", clock.now());
    expect(b.remaining("k")).toBe(10_000);
    clock.advance(4000);
    expect(b.remaining("k")).toBe(6000);
    clock.advance(6000);
    expect(b.remaining("k")).toBe(0);
    b.next("k", clock.now());
    expect(b.remaining("k")).toBe(20_000);
  });

  test("resets after running more than 10 minutes", () => {
    const clock = new FakeClock();
    const b = Backoff.crashLoop(clock);
    b.next("k", clock.now());
    b.next("k", clock.now());
    expect(b.current("k")).toBe(20_000);
    clock.advance(10 * 60_000 + 1);
    b.next("k", clock.now());
    expect(b.current("k")).toBe(10_000);
  });

  test("at the 5 minute cap, a container that runs 5 s between restarts stays at 5 minutes, housekeeping's gc included (conformance: should cap back-off at MaxContainerBackOff)", () => {
    const clock = new FakeClock();
    const b = Backoff.crashLoop(clock);
    let finishedAt = clock.now();
    const delays: number[] = [];
    for (let i = 0; i < 12; i++) {
      // Waits out the back-off, housekeeping runs, then the restart records the failure.
      clock.advance(b.remainingSince("k", finishedAt));
      b.gc();
      expect(b.remainingSince("k", finishedAt)).toBe(0);
      b.next("k", finishedAt);
      clock.advance(5000);
      finishedAt = clock.now();
      delays.push(b.remainingSince("k", finishedAt));
    }
    expect(delays).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000, 300_000, 300_000, 300_000, 300_000]);
  });

  test("the stable window is counted from the restart: a container that ran 6 minutes at the cap is still at the cap, one that ran 10 is not", () => {
    const clock = new FakeClock();
    const b = Backoff.crashLoop(clock);
    for (let i = 0; i < 6; i++) b.next("k", clock.now());
    expect(b.current("k")).toBe(300_000);
    clock.advance(300_000); // its back-off, then the restart
    b.next("k", clock.now() - 300_000);
    clock.advance(6 * 60_000);
    expect(b.remainingSince("k", clock.now())).toBe(300_000);
    clock.advance(300_000);
    b.next("k", clock.now() - 300_000);
    clock.advance(10 * 60_000 + 1);
    expect(b.remainingSince("k", clock.now())).toBe(0);
    b.next("k", clock.now());
    expect(b.current("k")).toBe(10_000);
  });

  test("the crash loop's stable window is 600 s whatever the maximum (upstream's HasExpiredFunc): a 1 minute cap still doubles after 200 s of running", () => {
    const clock = new FakeClock();
    const b = Backoff.crashLoop(clock, crashLoopLimits({ reducedDecay: true, maxContainerRestartPeriodMs: undefined }));
    b.next("k", clock.now());
    b.next("k", clock.now());
    expect(b.current("k")).toBe(2_000);
    clock.advance(200_000);
    expect(b.remainingSince("k", clock.now())).toBe(2_000);
    b.next("k", clock.now());
    expect(b.current("k")).toBe(4_000);
    b.gc();
    clock.advance(600_001);
    b.gc();
    expect(b.current("k")).toBeUndefined();
  });

  test("gc forgets stale keys", () => {
    const clock = new FakeClock();
    const b = Backoff.crashLoop(clock);
    b.next("k", clock.now());
    clock.advance(11 * 60_000);
    b.gc();
    expect(b.current("k")).toBeUndefined();
  });
});

describe("crashLoopLimits (upstream newCrashLoopBackOff)", () => {
  test("default 10s to 5m; ReduceDefaultCrashLoopBackOffDecay 1s to 1m; maxContainerRestartPeriod sets the cap and lowers the start to it", () => {
    expect(crashLoopLimits({ reducedDecay: false, maxContainerRestartPeriodMs: undefined })).toEqual({ initialMs: 10_000, maxMs: 300_000 });
    expect(crashLoopLimits({ reducedDecay: true, maxContainerRestartPeriodMs: undefined })).toEqual({ initialMs: 1_000, maxMs: 60_000 });
    expect(crashLoopLimits({ reducedDecay: false, maxContainerRestartPeriodMs: 4_000 })).toEqual({ initialMs: 4_000, maxMs: 4_000 });
    expect(crashLoopLimits({ reducedDecay: false, maxContainerRestartPeriodMs: 120_000 })).toEqual({ initialMs: 10_000, maxMs: 120_000 });
    expect(crashLoopLimits({ reducedDecay: true, maxContainerRestartPeriodMs: 120_000 })).toEqual({ initialMs: 1_000, maxMs: 120_000 });
  });

  test("a 2s cap: every restart waits 2s", () => {
    const clock = new FakeClock();
    const b = Backoff.crashLoop(clock, crashLoopLimits({ reducedDecay: false, maxContainerRestartPeriodMs: 2_000 }));
    const seen: number[] = [];
    for (let i = 0; i < 4; i++) {
      b.next("k", clock.now());
      seen.push(b.current("k")!);
      clock.advance(1000);
    }
    expect(seen).toEqual([2_000, 2_000, 2_000, 2_000]);
  });
});
