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
 *   request meanwhile is 409;
 * - `GET /debug/memory`: where the process's memory is, as JSON (the
 *   counterpart of Go's runtime.MemStats): the JavaScript heap's live size
 *   and capacity, memory held outside it for its objects, and the native
 *   allocator's (mimalloc's) bytes in use.
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
  /** Where the process's memory is now. */
  memory(): Promise<MemoryFigures>;
}

/** Bytes, except `objects`. */
export interface MemoryFigures {
  rss: number;
  /** JavaScriptCore's heap: live objects after the last collection, and what it has allocated for them. */
  jsHeap: { size: number; capacity: number; objects: number };
  /** Memory outside the JS heap owned by its objects: strings and buffers allocated natively. */
  external: number;
  arrayBuffers: number;
  /**
   * Bun's native allocator (mimalloc): `inUse` is what it handed out and was not freed (buffer and string contents,
   * sockets, TLS, HTTP/2, compilers, and part of the JS heap's own storage: measured, not documented). `committed`
   * is mimalloc's own counter, which in Bun 1.4 grows past the RSS: a trend, not a size. Absent if the runtime does not say.
   */
  nativeAllocator?: { committed: number; peakCommitted: number; inUse: number; peakInUse: number; threads: number };
}

interface MimallocStats {
  committed?: { current: number; peak: number };
  malloc_normal?: { current: number; peak: number };
  malloc_huge?: { current: number; peak: number };
  threads?: { current: number };
}

/** Bun's own: generateHeapSnapshot("v8") and bun:jsc's profile(), which samples while its callback's promise is pending. */
export const bunProfiler: Profiler = {
  heapSnapshot: () => Bun.generateHeapSnapshot("v8"),
  async cpuProfile(ms) {
    const { profile } = await import("bun:jsc");
    const result = await profile(() => Bun.sleep(ms), 1000);
    return `${result.functions}\n${result.bytecodes}`;
  },
  async memory() {
    const { heapStats } = await import("bun:jsc");
    const heap = heapStats() as ReturnType<typeof heapStats> & { mimalloc?: MimallocStats };
    const usage = process.memoryUsage();
    const m = heap.mimalloc;
    return {
      rss: usage.rss,
      jsHeap: { size: heap.heapSize, capacity: heap.heapCapacity, objects: heap.objectCount },
      external: usage.external,
      arrayBuffers: usage.arrayBuffers,
      ...(m?.committed && m.malloc_normal
        ? {
            nativeAllocator: {
              committed: m.committed.current,
              peakCommitted: m.committed.peak,
              inUse: m.malloc_normal.current + (m.malloc_huge?.current ?? 0),
              peakInUse: m.malloc_normal.peak + (m.malloc_huge?.peak ?? 0),
              threads: m.threads?.current ?? 0,
            },
          }
        : {}),
    };
  },
};

/** What PUT /debug/flags/v changes: the agent's log verbosity (util/log.ts Verbosity). */
export interface VerbositySetter {
  set(level: number): void;
}

/**
 * Upstream's /debug/flags/v (enableDebugFlagsHandler, with the debugging
 * handlers): PUT with a verbosity number as the body sets the agent's log
 * verbosity and answers "successfully set klog.logging.verbosity to N"; a
 * body that is not an unsigned 32-bit decimal is 400, another method 406
 * (routes.StringFlagPutHandler with logs.GlogSetter). Off: every request 405
 * "flags endpoint is disabled.", as upstream.
 */
export function debugFlagsApp(verbosity: VerbositySetter | "disabled"): Hono<KubeletEnv> {
  const app = new Hono<KubeletEnv>();
  const plain = { "content-type": "text/plain", "x-content-type-options": "nosniff" };
  app.all("/debug/flags/v", async (c) => {
    if (verbosity === "disabled") return c.body("flags endpoint is disabled.\n", 405, plain);
    if (c.req.method !== "PUT") return c.body("unsupported http method\n", 406, plain);
    const body = await c.req.text();
    // Go's strconv.ParseUint(body, 10, 32): decimal digits only, at most 2^32-1.
    if (!/^[0-9]+$/.test(body)) return c.body(`strconv.ParseUint: parsing ${JSON.stringify(body)}: invalid syntax\n`, 400, plain);
    const level = Number(body);
    if (level > 0xffffffff) return c.body(`strconv.ParseUint: parsing ${JSON.stringify(body)}: value out of range\n`, 400, plain);
    verbosity.set(level);
    return c.body(`successfully set klog.logging.verbosity to ${body}\n`, 200, plain);
  });
  return app;
}

export const DEFAULT_PROFILE_SECONDS = 30;
export const MAX_PROFILE_SECONDS = 60;

export function debugApp(profiler: Profiler): Hono<KubeletEnv> {
  const app = new Hono<KubeletEnv>();
  let profiling = false;
  app.get("/debug/heap", (c) => c.body(profiler.heapSnapshot(), 200, { "content-type": "application/json", "content-disposition": 'attachment; filename="kubelet.heapsnapshot"' }));
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
  app.get("/debug/memory", async (c) => c.json(await profiler.memory()));
  return app;
}
