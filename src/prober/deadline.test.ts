import { describe, expect, test } from "bun:test";
import { awakeDeadline } from "./deadline.ts";

const expiry = (timeoutMs: number, stallMs: number) =>
  new Promise<number>((resolve) => {
    const start = performance.now();
    awakeDeadline(timeoutMs, () => resolve(performance.now() - start));
    const until = start + stallMs;
    while (performance.now() < until) {}
  });

describe("awakeDeadline", () => {
  test("expires after the timeout when the loop is awake", async () => {
    const ms = await expiry(100, 0);
    expect(ms).toBeGreaterThanOrEqual(95);
    expect(ms).toBeLessThan(1000);
  });

  test("a stall past the deadline is granted again: it expires only after a timer fired on time", async () => {
    // Stalled 300 ms of a 100 ms deadline: the first firing is ~200 ms late, so ~200 ms more are granted.
    const ms = await expiry(100, 300);
    expect(ms).toBeGreaterThanOrEqual(450);
    expect(ms).toBeLessThan(1500);
  });

  test("cancel stops it", async () => {
    let fired = false;
    const cancel = awakeDeadline(20, () => {
      fired = true;
    });
    cancel();
    await Bun.sleep(60);
    expect(fired).toBe(false);
  });
});
