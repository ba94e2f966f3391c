/**
 * Debugging endpoints on 10250 (bunlet's counterpart of upstream's
 * /debug/pprof, served when enableDebuggingHandlers and
 * enableProfilingHandler are both true, behind the same authentication and
 * `nodes/proxy` authorization):
 * - `GET /debug/heap`: a heap snapshot of the agent in the V8
 *   `.heapsnapshot` format (Chrome DevTools > Memory > Load);
 * - `GET /debug/profile?seconds=N` (default 30, 1 to 60): JavaScriptCore's
 *   sampling profiler over the agent for N seconds, as its text report (top
 *   functions and bytecodes by samples). One profile at a time; a second
 *   request meanwhile is 409.
 * Unlike Go's pprof heap profile, a heap snapshot holds every string the
 * agent holds (secret data, tokens): enableProfilingHandler is false by
 * default here (upstream: true).
 */
import { Hono } from "hono";
import type { KubeletEnv } from "./authn.ts";
import { HttpError } from "./errors.ts";

export interface Profiler {
  /** The heap now, as a V8 .heapsnapshot JSON document. */
  heapSnapshot(): string;
  /** Samples the whole agent (every task on the event loop) for `ms`; the profiler's text report. */
  cpuProfile(ms: number): Promise<string>;
}

/** Bun's own: generateHeapSnapshot("v8") and bun:jsc's profile(), which samples while its callback's promise is pending. */
export const bunProfiler: Profiler = {
  heapSnapshot: () => Bun.generateHeapSnapshot("v8"),
  async cpuProfile(ms) {
    const { profile } = await import("bun:jsc");
    const result = await profile(() => Bun.sleep(ms), 1000);
    return `${result.functions}\n${result.bytecodes}`;
  },
};

export const DEFAULT_PROFILE_SECONDS = 30;
export const MAX_PROFILE_SECONDS = 60;

export function debugApp(profiler: Profiler): Hono<KubeletEnv> {
  const app = new Hono<KubeletEnv>();
  let profiling = false;
  app.get("/debug/heap", (c) =>
    c.body(profiler.heapSnapshot(), 200, { "content-type": "application/json", "content-disposition": 'attachment; filename="kubelet.heapsnapshot"' }),
  );
  app.get("/debug/profile", async (c) => {
    const raw = c.req.query("seconds");
    const seconds = raw === undefined ? DEFAULT_PROFILE_SECONDS : Number(raw);
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_PROFILE_SECONDS) {
      throw new HttpError(400, `invalid value for seconds: ${JSON.stringify(raw)} (an integer from 1 to ${MAX_PROFILE_SECONDS})`);
    }
    if (profiling) return c.text("a CPU profile is already being taken", 409);
    profiling = true;
    try {
      return c.text(await profiler.cpuProfile(seconds * 1000));
    } finally {
      profiling = false;
    }
  });
  return app;
}
