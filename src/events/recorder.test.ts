import { describe, expect, test } from "bun:test";
import { FakeKubeApi } from "../api/fake.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { AGGREGATE_CACHE_SIZE, ApiEventRecorder, MAX_QUEUED_EVENTS, nodeRef, podEventRef } from "./recorder.ts";

const pod = { metadata: { name: "web", namespace: "ns1", uid: "u1" } };

describe("ApiEventRecorder", () => {
  test("creates an event with upstream's shape, then aggregates repeats into a count", async () => {
    const api = new FakeKubeApi();
    const clock = new FakeClock();
    const rec = new ApiEventRecorder({ api, nodeName: "n1", clock, logger: memoryLogger().logger });
    rec.event(podEventRef(pod, "app"), "Warning", "BackOff", "Back-off restarting failed container app in pod web_ns1(u1)");
    clock.advance(10_000);
    rec.event(podEventRef(pod, "app"), "Warning", "BackOff", "Back-off restarting failed container app in pod web_ns1(u1)");
    await Bun.sleep(0);
    expect(api.events).toHaveLength(1);
    expect(api.events[0]).toMatchObject({
      metadata: { namespace: "ns1" },
      involvedObject: { kind: "Pod", name: "web", namespace: "ns1", uid: "u1", fieldPath: "spec.containers{app}" },
      type: "Warning",
      reason: "BackOff",
      count: 1,
      source: { component: "kubelet", host: "n1" },
    });
    const patch = api.calls.find((c) => c.method === "patchEvent")!;
    expect(patch.args[2]).toMatchObject({ count: 2 });
  });

  test("a container's fieldPath names its list, as upstream's GenerateContainerRef", () => {
    const full = {
      ...pod,
      spec: { containers: [{ name: "app" }], initContainers: [{ name: "setup" }, { name: "proxy" }], ephemeralContainers: [{ name: "debugger" }] },
    };
    expect(podEventRef(full, "app").fieldPath).toBe("spec.containers{app}");
    expect(podEventRef(full, "proxy").fieldPath).toBe("spec.initContainers{proxy}");
    expect(podEventRef(full, "debugger").fieldPath).toBe("spec.ephemeralContainers{debugger}");
    expect(podEventRef(full, "gone").fieldPath).toBe("implicitly required container gone");
    expect(podEventRef(full).fieldPath).toBeUndefined();
  });

  test("node events use the node name as UID, in the default namespace", async () => {
    const api = new FakeKubeApi();
    const rec = new ApiEventRecorder({ api, nodeName: "n1", clock: new FakeClock(), logger: memoryLogger().logger });
    rec.event(nodeRef("n1"), "Normal", "Starting", "Starting kubelet.");
    await Bun.sleep(0);
    expect(api.events[0]).toMatchObject({ metadata: { namespace: "default" }, involvedObject: { kind: "Node", name: "n1", uid: "n1" } });
  });

  test("writes wait for the client's rate limit; only beyond 1000 waiting ones are events dropped (client-go's maxQueuedEvents)", async () => {
    const api = new FakeKubeApi();
    const waiting: (() => void)[] = [];
    const created: string[] = [];
    const slow = {
      createEvent: (_ns: string, e: { message?: string }) =>
        new Promise<void>((resolve) =>
          waiting.push(() => {
            created.push(e.message ?? "");
            resolve();
          }),
        ),
      patchEvent: api.patchEvent.bind(api),
    } as unknown as FakeKubeApi;
    const { logger, lines } = memoryLogger();
    const rec = new ApiEventRecorder({ api: slow, nodeName: "n1", clock: new FakeClock(), logger });
    for (let i = 0; i < MAX_QUEUED_EVENTS + 1; i++) rec.event(podEventRef(pod), "Normal", "Pulled", `message ${i}`);
    expect(waiting.length).toBe(MAX_QUEUED_EVENTS);
    expect(lines.filter((l) => l.includes("too many queued events, dropped event"))).toHaveLength(1);
    for (const go of waiting.splice(0)) go();
    await Bun.sleep(0);
    rec.event(podEventRef(pod), "Normal", "Pulled", "after the queue drained");
    expect(waiting.length).toBe(1);
    waiting[0]!();
    expect(created).toHaveLength(MAX_QUEUED_EVENTS + 1);
    expect(created.at(-1)).toBe("after the queue drained");
  });

  test("aggregation remembers the 4096 most recently used events of the last 10 minutes", async () => {
    const api = new FakeKubeApi();
    const clock = new FakeClock();
    const rec = new ApiEventRecorder({ api, nodeName: "n1", clock, logger: memoryLogger().logger });
    const started = (i: number) => rec.event(podEventRef({ metadata: { name: `p${i}`, namespace: "ns1", uid: `u${i}` } }, "app"), "Normal", "Started", "Started container app");
    const patches = () => api.calls.filter((c) => c.method === "patchEvent").length;
    started(0);
    started(1);
    clock.advance(60_000);
    started(0); // used again: now the most recent
    for (let i = 2; i < AGGREGATE_CACHE_SIZE + 1; i++) {
      started(i); // p1, the least recently used, is forgotten
      if (i % 500 === 0) await Bun.sleep(0); // the writes end, so none is dropped for the queue's bound
    }
    await Bun.sleep(0);
    expect(patches()).toBe(1);
    started(0);
    expect(patches()).toBe(2);
    started(1);
    expect(patches()).toBe(2);
    expect(api.events.filter((e: any) => e.involvedObject.name === "p1")).toHaveLength(2);

    // Ten minutes after its last use an event is new again.
    clock.advance(10 * 60_000);
    started(0);
    expect(patches()).toBe(2);
  });
});
