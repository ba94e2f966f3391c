/**
 * Health checks as upstream's /healthz on 127.0.0.1:10248: `ping`, `log`
 * and `syncloop`; the last fails when the syncLoop or the PLEG stalls, so a
 * supervisor restarts a wedged agent. `/healthz?verbose` lists each check.
 */
import { Hono } from "hono";
import type { Clock } from "../util/clock.ts";

export interface HealthCheck {
  name: string;
  check(): { ok: boolean; message?: string };
}

/** upstream healthz.PingHealthz: the server answers. */
export const pingCheck: HealthCheck = {
  name: "ping",
  check: () => ({ ok: true }),
};

/** upstream healthz.LogHealthz, which fails when flushing klog's buffer blocks: the agent's logger hands each line to stderr at once and keeps no buffer of its own to flush. */
export const logCheck: HealthCheck = {
  name: "log",
  check: () => ({ ok: true }),
};

export function healthzApp(checks: HealthCheck[]): Hono {
  const app = new Hono();
  const run = () => checks.map((c) => ({ name: c.name, ...c.check() }));
  app.get("/healthz", (c) => {
    const results = run();
    const failed = results.filter((r) => !r.ok);
    if ("verbose" in c.req.queries() || failed.length) {
      const lines = results.map((r) => (r.ok ? `[+]${r.name} ok` : `[-]${r.name} failed: ${r.message ?? "reason withheld"}`));
      lines.push(failed.length ? "healthz check failed" : "healthz check passed");
      return c.text(lines.join("\n") + "\n", failed.length ? 500 : 200);
    }
    return c.text("ok");
  });
  for (const check of checks) {
    app.get(`/healthz/${check.name}`, (c) => {
      const r = check.check();
      return r.ok ? c.text("ok") : c.text(`internal server error: ${r.message ?? check.name} failed\n`, 500);
    });
  }
  return app;
}

/** syncloop: the loop handled something within `thresholdMs`, and the PLEG is relisting. */
export function syncLoopCheck(opts: {
  /** When the syncLoop last ran an iteration (clock ms); undefined before it started. */
  syncLoop: { lastIteration(): number | undefined };
  pleg: { healthy(): { ok: boolean; message: string } };
  clock: Pick<Clock, "now">;
  thresholdMs: number;
}): HealthCheck {
  return {
    name: "syncloop",
    check: () => {
      const last = opts.syncLoop.lastIteration();
      if (last === undefined) return { ok: false, message: "syncLoop has not started" };
      const since = opts.clock.now() - last;
      if (since > opts.thresholdMs) return { ok: false, message: `syncLoop last ran ${Math.round(since / 1000)}s ago` };
      return opts.pleg.healthy();
    },
  };
}
