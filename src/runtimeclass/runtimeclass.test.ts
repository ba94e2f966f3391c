import { describe, expect, test } from "bun:test";
import { PodHost } from "../sync/pod-host.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiError } from "../api/errors.ts";
import { FakeKubeApi } from "../api/fake.ts";
import { FakeCri } from "../cri/fake.ts";
import { admitPod, type NodeFacts } from "../node/admission.ts";
import type { Pod } from "../pods/schema.ts";
import { CriPodRuntime } from "../runtime/manager.ts";
import { testRuntimeOptions, testNode } from "../runtime/testing.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { ApiRuntimeClasses, RuntimeClassError } from "./index.ts";

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  return undefined;
}

describe("ApiRuntimeClasses", () => {
  test("no class is the default handler without asking; a class gives its handler, cached; unknown is upstream's NotFound", async () => {
    const api = new FakeKubeApi();
    const clock = new FakeClock();
    api.runtimeClasses.set("fast", { metadata: { name: "fast" }, handler: "runc" });
    const classes = new ApiRuntimeClasses({ api, clock, ttlMs: 60_000 });
    expect(await classes.handlerFor(undefined)).toBe("");
    expect(await classes.handlerFor("")).toBe("");
    expect(api.calls).toEqual([]);
    expect(await classes.handlerFor("fast")).toBe("runc");
    expect(await classes.handlerFor("fast")).toBe("runc");
    expect(api.calls.filter((c) => c.method === "getRuntimeClass")).toHaveLength(1);
    clock.advance(60_000);
    expect(await classes.handlerFor("fast")).toBe("runc");
    expect(api.calls.filter((c) => c.method === "getRuntimeClass")).toHaveLength(2);

    const missing = await rejection(classes.handlerFor("gvisor"));
    expect(missing).toBeInstanceOf(RuntimeClassError);
    expect((missing as RuntimeClassError).notFound).toBe(true);
    expect((missing as Error).message).toBe('runtimeclass.node.k8s.io "gvisor" not found');
    api.failNext("getRuntimeClass", new ApiError("Unreachable", 0, "GET", "/apis/node.k8s.io/v1/runtimeclasses/other", "connect ECONNREFUSED"));
    const unreachable = await rejection(classes.handlerFor("other"));
    expect((unreachable as RuntimeClassError).notFound).toBe(false);
    expect((unreachable as Error).message).toStartWith("failed to lookup RuntimeClass other: ");
    api.runtimeClasses.set("bad", { metadata: { name: "bad" } });
    expect(((await rejection(classes.handlerFor("bad"))) as Error).message).toBe('failed to lookup RuntimeClass bad: field "handler": is required');
  });

  test("the runtime creates the sandbox with the class's handler; an unknown class creates none and says why", async () => {
    const logs = mkdtempSync(join(tmpdir(), "podlogs-"));
    try {
      const clock = new FakeClock();
      const api = new FakeKubeApi();
      api.runtimeClasses.set("runc-class", { metadata: { name: "runc-class" }, handler: "runc" });
      const cri = new FakeCri({ clock, images: ["busybox:1.0"] });
      const events: string[] = [];
      const node = testNode({ podLogsDir: logs });
      const runtime = new CriPodRuntime(
        testRuntimeOptions({
          cri,
          clock,
          logger: memoryLogger().logger,
          node,
          host: PodHost.forNode(node),
          config: { runtimeClasses: new ApiRuntimeClasses({ api, clock }) },
          recorder: { event: (_ref, type, reason, message) => void events.push(`${type} ${reason} ${message}`) },
        }),
      );
      const pod = (uid: string, runtimeClassName: string): Pod => ({
        metadata: { name: uid, namespace: "default", uid },
        spec: { runtimeClassName, containers: [{ name: "app", image: "busybox:1.0" }] },
      });
      const good = pod("good", "runc-class");
      expect((await runtime.syncPod(good)).results.filter((r) => r.error)).toEqual([]);
      expect(cri.callsOf("runPodSandbox")[0]![1]).toBe("runc");

      const bad = pod("bad", "missing");
      const outcome = await runtime.syncPod(bad);
      expect(outcome.results).toEqual([
        { action: "CreatePodSandbox", target: "bad", error: { reason: "CreatePodSandboxError", message: 'runtimeclass.node.k8s.io "missing" not found' } },
      ]);
      expect(cri.callsOf("runPodSandbox")).toHaveLength(1);
      expect(events).toContain('Warning FailedCreatePodSandBox Failed to create pod sandbox: runtimeclass.node.k8s.io "missing" not found');
    } finally {
      rmSync(logs, { recursive: true, force: true });
    }
  });

  test("admission counts spec.overhead (set from the RuntimeClass by the API server) with the requests", () => {
    const node: NodeFacts = { name: "n", labels: {}, taints: [], allocatable: { cpu: 1000, memory: 1024 ** 3, "ephemeral-storage": 0, pods: 10 } };
    const pod = (overhead?: Record<string, string>): Pod => ({
      metadata: { name: "p", uid: "u" },
      spec: { containers: [{ name: "c", image: "i", resources: { requests: { cpu: "800m" } } }], ...(overhead ? { overhead } : {}) } as Pod["spec"],
    });
    expect(admitPod(pod(), [], node)).toEqual({ admit: true });
    expect(admitPod(pod({ cpu: "250m" }), [], node)).toEqual({
      admit: false,
      reason: "OutOfcpu",
      message: "Node didn't have enough resource: cpu, requested: 1050, used: 0, capacity: 1000",
    });
  });
});
