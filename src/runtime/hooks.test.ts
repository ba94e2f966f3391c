import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { FakeCri } from "../cri/fake.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock, realClock } from "../util/clock.ts";
import { runHook, type HookContext, type LifecycleHandler } from "./hooks.ts";

const pod: Pod = { metadata: { name: "web", namespace: "default", uid: "uid-1" }, spec: { containers: [{ name: "app", image: "busybox" }] } };

// An HTTP handler that answers after 300 ms, one that never answers, one that answers 500; what each request carried.
let server: ReturnType<typeof Bun.serve>;
const seen: { path: string; userAgent: string | null; authorization: string | null }[] = [];
beforeAll(() => {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      const path = new URL(req.url).pathname;
      seen.push({ path, userAgent: req.headers.get("user-agent"), authorization: req.headers.get("authorization") });
      if (path === "/hang") return new Promise<Response>(() => {});
      if (path === "/broken") return new Response("oops", { status: 500 });
      await Bun.sleep(300);
      return new Response("ok");
    },
  });
});
afterAll(() => void server.stop(true));

const context = (over: Partial<HookContext> = {}): HookContext => ({
  cri: new FakeCri({ clock: new FakeClock() }),
  clock: realClock,
  pod,
  container: pod.spec.containers[0]!,
  containerId: "c1",
  podIP: "127.0.0.1",
  timeoutSeconds: undefined,
  ...over,
});

const httpGet = (path: string): LifecycleHandler => ({ httpGet: { port: server.port!, path } });

describe("runHook", () => {
  test("httpGet without a time limit (postStart, as upstream's http.Client without a timeout) waits for the answer", async () => {
    expect(await runHook(httpGet("/slow"), context())).toBeUndefined();
  });

  test("a handler whose signal aborts fails at once with the abort's reason: httpGet, sleep", async () => {
    const abandoned = async (handler: LifecycleHandler, over: Partial<HookContext> = {}) => {
      const podMustStop = new AbortController();
      const running = runHook(handler, context({ ...over, signal: podMustStop.signal }));
      await Bun.sleep(20);
      podMustStop.abort(new Error("pod sync cancelled: the pod must stop (deleted)"));
      return running;
    };
    expect(await abandoned(httpGet("/hang"))).toEndWith('/hang": pod sync cancelled: the pod must stop (deleted)');
    // An injected clock that never moves: only the abort can end the sleep.
    expect(await abandoned({ sleep: { seconds: 3600 } }, { clock: new FakeClock() })).toEndWith("failed - error: pod sync cancelled: the pod must stop (deleted)");
  });

  test("httpGet without a host when the runtime reports no pod IP (host network) fails with upstream's words, and calls nobody", async () => {
    const before = seen.length;
    expect(await runHook(httpGet("/slow"), context({ podIP: "" }))).toBe(
      'HTTP lifecycle hook (/slow) for Container "app" in Pod "web_default(uid-1)" failed - error: failed to find networking container: &{uid-1 web default []}',
    );
    expect(seen.length).toBe(before);
  });

  test("httpGet: any answer is success, a 500 too, as upstream's runHTTPHandler (only the exchange fails); the User-Agent is kube-lifecycle/<version>", async () => {
    expect(await runHook(httpGet("/broken"), context())).toBeUndefined();
    expect(seen.findLast((r) => r.path === "/broken")?.userAgent).toMatch(/^kube-lifecycle\/\d+\.\d+$/);
    const refused = await runHook({ httpGet: { port: 1, path: "/x" } }, context());
    expect(refused).toBe(
      'HTTP lifecycle hook (/x) for Container "app" in Pod "web_default(uid-1)" failed - error: Get "http://127.0.0.1:1/x": dial tcp 127.0.0.1:1: connect: connection refused',
    );
  });

  test("httpGet HTTPS answered in HTTP is retried in HTTP without Authorization, with a LifecycleHTTPFallback warning, as upstream", async () => {
    const warnings: string[] = [];
    const handler: LifecycleHandler = {
      httpGet: { scheme: "HTTPS", port: server.port!, path: "/fallback", httpHeaders: [{ name: "Authorization", value: "Bearer s3cret" }] },
    };
    expect(await runHook(handler, context({ warn: (reason, message) => warnings.push(`${reason}: ${message}`) }))).toBeUndefined();
    expect(warnings).toEqual([`LifecycleHTTPFallback: request to HTTPS lifecycle hook 127.0.0.1:${server.port} got HTTP response, retry with HTTP succeeded`]);
    expect(seen.filter((r) => r.path === "/fallback").map((r) => r.authorization)).toEqual([null]);
  });
});
