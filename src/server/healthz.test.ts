import { describe, expect, test } from "bun:test";
import { healthzApp, syncLoopCheck } from "./healthz.ts";

describe("healthz", () => {
  test("ok while every check passes; 500 naming the failed check otherwise", async () => {
    let now = 1000;
    let last: number | undefined = 1000;
    const app = healthzApp([
      { name: "ping", check: () => ({ ok: true }) },
      syncLoopCheck({
        syncLoop: { lastIteration: () => last },
        pleg: { healthy: () => ({ ok: true, message: "ok" }) },
        clock: { now: () => now },
        thresholdMs: 5000,
      }),
    ]);
    expect(await (await app.request("/healthz")).text()).toBe("ok");
    expect((await app.request("/healthz/syncloop")).status).toBe(200);
    now = 10_000;
    const res = await app.request("/healthz");
    expect(res.status).toBe(500);
    expect(await res.text()).toContain("[-]syncloop failed: syncLoop last ran 9s ago");
    last = undefined;
    expect(await (await app.request("/healthz/syncloop")).text()).toContain("syncLoop has not started");
    const verbose = await healthzApp([{ name: "ping", check: () => ({ ok: true }) }]).request("/healthz?verbose");
    expect(await verbose.text()).toBe("[+]ping ok\nhealthz check passed\n");
  });
});
