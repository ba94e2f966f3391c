import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { FakeCri } from "../cri/fake.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock, realClock } from "../util/clock.ts";
import { runHook, type HookContext, type LifecycleHandler } from "./hooks.ts";

const pod: Pod = { metadata: { name: "web", namespace: "default", uid: "uid-1" }, spec: { containers: [{ name: "app", image: "busybox" }] } };

// An HTTP handler that answers after 300 ms, and one that never answers.
let server: ReturnType<typeof Bun.serve>;
beforeAll(() => {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      if (new URL(req.url).pathname === "/hang") return new Promise<Response>(() => {});
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
});
