import { describe, expect, test } from "bun:test";
import { Hono } from "hono";
import { authentication } from "./authn.ts";
import { authorization, requestAttributes, type AuthzAttributes } from "./authz.ts";
import { bunProfiler, debugApp, type MemoryFigures, type Profiler } from "./debug.ts";
import { kubeletApi } from "./kubelet-api.ts";
import { createLogger, Verbosity } from "../util/log.ts";

class FakeProfiler implements Profiler {
  profiles: number[] = [];
  release: () => void = () => {};
  heapSnapshot() {
    return JSON.stringify({ snapshot: { meta: {} }, nodes: [] });
  }
  async cpuProfile(ms: number) {
    this.profiles.push(ms);
    await new Promise<void>((resolve) => (this.release = resolve));
    return "Top functions as <numSamples 'functionName#hash:sourceID'>";
  }
  async memory(): Promise<MemoryFigures> {
    return { rss: 100, jsHeap: { size: 10, capacity: 20, objects: 3 }, external: 4, arrayBuffers: 5 };
  }
}

describe("/debug handlers", () => {
  test("heap snapshot; profile for the seconds asked (default 30), one at a time; bad seconds name the parameter", async () => {
    const profiler = new FakeProfiler();
    const app = debugApp(profiler);
    const heap = await app.request("/debug/heap");
    expect(heap.status).toBe(200);
    expect(heap.headers.get("content-disposition")).toBe('attachment; filename="kubelet.heapsnapshot"');
    expect(await heap.json()).toEqual({ snapshot: { meta: {} }, nodes: [] });

    const first = app.request("/debug/profile?seconds=2");
    await Bun.sleep(1);
    expect((await app.request("/debug/profile")).status).toBe(409);
    profiler.release();
    const done = await first;
    expect(done.status).toBe(200);
    expect(await done.text()).toContain("Top functions");
    const def = app.request("/debug/profile");
    await Bun.sleep(1);
    profiler.release();
    await def;
    expect(profiler.profiles).toEqual([2000, 30_000]);

    const memory = await app.request("/debug/memory");
    expect(memory.headers.get("content-type")).toContain("application/json");
    expect(await memory.json()).toEqual({ rss: 100, jsHeap: { size: 10, capacity: 20, objects: 3 }, external: 4, arrayBuffers: 5 });

    const withErrors = new Hono();
    withErrors.onError((err, c) => c.text(err.message, (err as { status?: 400 }).status ?? 500));
    withErrors.route("/", app);
    for (const bad of ["0", "61", "1.5", "x"]) {
      const res = await withErrors.request(`/debug/profile?seconds=${bad}`);
      expect(res.status).toBe(400);
      expect(await res.text()).toBe(`invalid value for seconds: "${bad}" (an integer from 1 to 60)`);
    }
  });

  test("served on the kubelet API only with a profiler, behind authentication and nodes/proxy authorization", async () => {
    const decisions: AuthzAttributes[] = [];
    const make = (profiler?: Profiler) =>
      kubeletApi({
        nodeName: "n1",
        pods: { list: () => [] },
        logs: async () => undefined,
        health: new Hono(),
        authn: authentication({
          x509: false,
          anonymous: false,
          tokenReview: async (t) => (t === "good" ? { authenticated: true, user: { username: "alice", groups: [] } } : { authenticated: false }),
        }),
        authz: authorization({
          nodeName: "n1",
          authorizer: { authorize: async (a) => (decisions.push(a), { allowed: a.user.username === "alice" && a.subresource === "proxy" }) },
        }),
        ...(profiler ? { profiler } : {}),
      });
    const app = make(new FakeProfiler());
    expect((await app.request("/debug/heap")).status).toBe(401);
    expect((await app.request("/debug/heap", { headers: { authorization: "Bearer good" } })).status).toBe(200);
    expect(decisions.at(-1)).toMatchObject({ verb: "get", resource: "nodes", subresource: "proxy", name: "n1" });
    expect(requestAttributes("n1", { username: "u", groups: [] }, "GET", "/debug/profile").map((a) => a.subresource)).toEqual(["proxy"]);
    expect((await make().request("/debug/heap", { headers: { authorization: "Bearer good" } })).status).toBe(404);
  });

  test("Bun's profiler: a V8 heap snapshot and a sampling report that names a busy function", async () => {
    const snapshot = JSON.parse(bunProfiler.heapSnapshot()) as { snapshot: { meta: { node_fields: string[] } } };
    expect(snapshot.snapshot.meta.node_fields).toContain("self_size");
    function busyForTheProfiler() {
      let x = 0;
      for (let i = 0; i < 1e6; i++) x += Math.sqrt(i);
      return x;
    }
    const timer = setInterval(busyForTheProfiler, 5);
    try {
      const report = await bunProfiler.cpuProfile(300);
      expect(report).toContain("busyForTheProfiler");
    } finally {
      clearInterval(timer);
    }
  });

  test("Bun's memory figures: objects show in the JS heap, a buffer's bytes in the native allocator", async () => {
    const before = await bunProfiler.memory();
    expect(before.rss).toBeGreaterThan(before.jsHeap.size);
    expect(before.jsHeap.capacity).toBeGreaterThanOrEqual(before.jsHeap.size);
    expect(before.nativeAllocator!.committed).toBeGreaterThanOrEqual(before.nativeAllocator!.inUse);
    const objects = Array.from({ length: 1 << 20 }, (_, i) => ({ i }));
    const buffer = Buffer.alloc(64 << 20, 1);
    Bun.gc(true);
    const after = await bunProfiler.memory();
    expect(after.jsHeap.size - before.jsHeap.size).toBeGreaterThan(16 << 20);
    expect(after.jsHeap.objects - before.jsHeap.objects).toBeGreaterThan(1_000_000);
    // Less than the whole buffer: the collection in between may free other native memory (a few MiB in the full suite).
    expect(after.nativeAllocator!.inUse - before.nativeAllocator!.inUse).toBeGreaterThan(48 << 20);
    expect(objects.length + buffer.length).toBe((1 << 20) + (64 << 20));
  });
});

describe("/debug/flags/v", () => {
  const api = (debugFlags?: { set(level: number): void } | "disabled") =>
    kubeletApi({
      nodeName: "n1",
      pods: { list: () => [] },
      logs: async () => undefined,
      health: new Hono(),
      authn: authentication({
        x509: false,
        anonymous: false,
        tokenReview: async (t) => (t === "good" ? { authenticated: true, user: { username: "alice", groups: [] } } : { authenticated: false }),
      }),
      authz: authorization({ nodeName: "n1", authorizer: { authorize: async (a) => ({ allowed: a.user.username === "alice" && a.subresource === "proxy" }) } }),
      ...(debugFlags ? { debugFlags } : {}),
    });
  const put = (body: string, method = "PUT") => ({ method, body: method === "GET" ? null : body, headers: { authorization: "Bearer good" } });

  test("PUT with a number sets the logger's verbosity, as upstream GlogSetter answers; bad bodies are 400, other methods 406; authenticated", async () => {
    const verbosity = new Verbosity(2);
    const lines: string[] = [];
    const logger = createLogger({ verbosity, sink: { write: (l) => lines.push(l) } }).with({ component: "x" });
    const app = api(verbosity);
    logger.v(4).info("hidden");
    expect((await app.request("/debug/flags/v", { method: "PUT", body: "4" })).status).toBe(401);
    const ok = await app.request("/debug/flags/v", put("4"));
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("successfully set klog.logging.verbosity to 4\n");
    expect(verbosity.get()).toBe(4);
    // A logger derived before the change follows it.
    logger.v(4).info("shown");
    expect(lines.map((l) => JSON.parse(l.split(" ")[1]!))).toEqual(["shown"]);
    const bad = await app.request("/debug/flags/v", put("four"));
    expect([bad.status, await bad.text()]).toEqual([400, 'strconv.ParseUint: parsing "four": invalid syntax\n']);
    expect((await app.request("/debug/flags/v", put("-1"))).status).toBe(400);
    expect((await app.request("/debug/flags/v", put("4294967296"))).status).toBe(400);
    expect((await app.request("/debug/flags/v", put("", "GET"))).status).toBe(406);
    expect(verbosity.get()).toBe(4);
    expect(requestAttributes("n1", { username: "u", groups: [] }, "PUT", "/debug/flags/v")).toEqual([expect.objectContaining({ verb: "update", subresource: "proxy" })]);
  });

  test("enableDebugFlagsHandler false: 405 flags endpoint is disabled; no debugging handlers: not served", async () => {
    const off = await api("disabled").request("/debug/flags/v", put("4"));
    expect([off.status, await off.text()]).toEqual([405, "flags endpoint is disabled.\n"]);
    expect((await api().request("/debug/flags/v", put("4"))).status).toBe(404);
  });
});
