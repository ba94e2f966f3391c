import { describe, expect, test } from "bun:test";
import { FakeKubeApi } from "../api/fake.ts";
import { ApiError } from "../api/index.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { CORRELATOR_CACHE_SIZE } from "./correlator.ts";
import { ApiEventRecorder, LogEventRecorder, MAX_QUEUED_EVENTS, nodeRef, podEventRef } from "./recorder.ts";

const pod = { metadata: { name: "web", namespace: "ns1", uid: "u1" } };

describe("ApiEventRecorder", () => {
  test("creates an event with upstream's shape, then aggregates repeats into a count", async () => {
    const api = new FakeKubeApi();
    const clock = new FakeClock();
    const rec = new ApiEventRecorder({ api, nodeName: "n1", clock, logger: memoryLogger().logger, random: () => 0 });
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

  test("event names are the object's name and the time in nanoseconds in hex, as upstream's; never the same twice in a millisecond", async () => {
    const api = new FakeKubeApi();
    const clock = new FakeClock(1_795_000_000_000);
    const rec = new ApiEventRecorder({ api, nodeName: "n1", clock, logger: memoryLogger().logger, random: () => 0 });
    rec.event(podEventRef(pod, "app"), "Normal", "Pulled", "pulled");
    rec.event(podEventRef(pod, "app"), "Normal", "Created", "created");
    rec.event(podEventRef(pod, "app"), "Normal", "Started", "started");
    await Bun.sleep(0);
    const nanos = 1_795_000_000_000n * 1_000_000n;
    expect(api.events.map((e) => (e as { metadata: { name: string } }).metadata.name)).toEqual([0n, 1n, 2n].map((n) => `web.${(nanos + n).toString(16)}`));
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
    const rec = new ApiEventRecorder({ api, nodeName: "n1", clock: new FakeClock(), logger: memoryLogger().logger, random: () => 0 });
    rec.event(nodeRef("n1"), "Normal", "Starting", "Starting kubelet.");
    await Bun.sleep(0);
    expect(api.events[0]).toMatchObject({ metadata: { namespace: "default" }, involvedObject: { kind: "Node", name: "n1", uid: "n1" } });
  });

  test("events are written one at a time; beyond 1000 waiting or being written they are dropped (client-go's maxQueuedEvents)", async () => {
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
    const rec = new ApiEventRecorder({ api: slow, nodeName: "n1", clock: new FakeClock(), logger, random: () => 0 });
    // One pod each: the correlator's limits are per object.
    const pulled = (i: number, message = `message ${i}`) => rec.event(podEventRef({ metadata: { name: `p${i}`, namespace: "ns1", uid: `u${i}` } }), "Normal", "Pulled", message);
    for (let i = 0; i < MAX_QUEUED_EVENTS + 1; i++) pulled(i);
    expect(waiting.length).toBe(1);
    expect(lines.filter((l) => l.includes("too many queued events, dropped event"))).toHaveLength(1);
    while (waiting.length) {
      waiting.shift()!();
      await Bun.sleep(0);
    }
    expect(created).toHaveLength(MAX_QUEUED_EVENTS);
    pulled(MAX_QUEUED_EVENTS + 1, "after the queue drained");
    waiting.shift()!();
    expect(created.at(-1)).toBe("after the queue drained");
  });

  test("a repeat patches the event's count, message and lastTimestamp for as long as it is among the 4096 last used, without a time window (upstream's eventLogger)", async () => {
    const api = new FakeKubeApi();
    const clock = new FakeClock();
    const rec = new ApiEventRecorder({ api, nodeName: "n1", clock, logger: memoryLogger().logger, random: () => 0 });
    const started = (i: number) => rec.event(podEventRef({ metadata: { name: `p${i}`, namespace: "ns1", uid: `u${i}` } }, "app"), "Normal", "Started", "Started container app");
    const patches = () => api.calls.filter((c) => c.method === "patchEvent");
    started(0);
    started(1);
    clock.advance(60_000);
    started(0); // used again: now the most recent
    for (let i = 2; i < CORRELATOR_CACHE_SIZE + 1; i++) {
      started(i); // p1, the least recently used, is forgotten
      if (i % 500 === 0) await Bun.sleep(0); // the writes end, so none is dropped for the queue's bound
    }
    await Bun.sleep(0);
    expect(patches()).toHaveLength(1);
    started(0);
    await Bun.sleep(0);
    expect(patches()).toHaveLength(2);
    started(1);
    await Bun.sleep(0);
    expect(patches()).toHaveLength(2);
    expect(api.events.filter((e: any) => e.involvedObject.name === "p1")).toHaveLength(2);

    // An hour later the repeat still patches the same event (the API server may have deleted it: see the 404 test).
    clock.advance(60 * 60_000);
    started(0);
    await Bun.sleep(0);
    expect(patches()).toHaveLength(3);
    const first = api.events.find((e: any) => e.involvedObject.name === "p0") as any;
    expect(patches()[2]!.args).toEqual([
      "ns1",
      first.metadata.name,
      { count: 4, lastTimestamp: new Date(clock.now()).toISOString().replace(".000", ""), message: "Started container app" },
    ]);
  });
});

describe("EventCorrelator in the recorder", () => {
  const setup = (random = () => 0.5) => {
    const api = new FakeKubeApi();
    const clock = new FakeClock();
    const { logger, lines } = memoryLogger();
    const rec = new ApiEventRecorder({ api, nodeName: "n1", clock, logger, random });
    const calls = (method: string) => api.calls.filter((c) => c.method === method);
    return { api, clock, rec, lines, calls };
  };

  test("each object may send 25 events, then one every 5 minutes; the dropped ones still count (upstream's spam filter)", async () => {
    const { clock, rec, lines, calls, api } = setup();
    for (let i = 0; i < 30; i++) rec.event(podEventRef(pod, "app"), "Warning", "BackOff", "Back-off restarting failed container app");
    await Bun.sleep(0);
    expect(calls("createEvent")).toHaveLength(1);
    expect(calls("patchEvent")).toHaveLength(24);
    expect(lines.filter((l) => l.includes("over the event rate limit"))).toHaveLength(5);
    // Another object, and another type of the same object, have their own budget.
    rec.event(podEventRef({ metadata: { name: "db", namespace: "ns1", uid: "u2" } }), "Warning", "BackOff", "x");
    rec.event(podEventRef(pod), "Normal", "Pulled", "Successfully pulled image");
    await Bun.sleep(0);
    expect(calls("createEvent")).toHaveLength(3);

    clock.advance(299_000);
    rec.event(podEventRef(pod, "app"), "Warning", "BackOff", "Back-off restarting failed container app");
    await Bun.sleep(0);
    expect(calls("patchEvent")).toHaveLength(24);
    clock.advance(1_000);
    rec.event(podEventRef(pod, "app"), "Warning", "BackOff", "Back-off restarting failed container app");
    await Bun.sleep(0);
    expect(calls("patchEvent")).toHaveLength(25);
    // The count is every occurrence, the dropped ones too.
    expect(calls("patchEvent").at(-1)!.args[2]).toMatchObject({ count: 32 });
    expect(api.events.filter((e: any) => e.reason === "BackOff")).toHaveLength(2);
  });

  test("from the 10th distinct message of an object's reason within 10 minutes, one combined event is written and patched (upstream's aggregator)", async () => {
    const { api, clock, rec, calls } = setup();
    const failed = (i: number) => rec.event(podEventRef(pod, `c${i}`), "Warning", "Failed", `Error: image ${i} not found`);
    for (let i = 1; i <= 9; i++) failed(i);
    await Bun.sleep(0);
    expect(api.events).toHaveLength(9);
    failed(10);
    failed(11);
    await Bun.sleep(0);
    expect(api.events).toHaveLength(10);
    const combined = api.events[9] as any;
    expect(combined).toMatchObject({ reason: "Failed", type: "Warning", count: 1, message: "(combined from similar events): Error: image 10 not found" });
    expect(combined.metadata.name).toStartWith("web.");
    expect(calls("patchEvent").map((c) => c.args)).toEqual([
      ["ns1", combined.metadata.name, { count: 2, lastTimestamp: combined.lastTimestamp, message: "(combined from similar events): Error: image 11 not found" }],
    ]);
    // Another reason is its own group.
    rec.event(podEventRef(pod), "Warning", "FailedMount", "one");
    await Bun.sleep(0);
    expect((api.events.at(-1) as any).message).toBe("one");

    // More than 10 minutes without one: the next is written as it is.
    clock.advance(600_001);
    failed(12);
    await Bun.sleep(0);
    expect((api.events.at(-1) as any).message).toBe("Error: image 12 not found");
  });

  test("a write without an answer is tried 12 times, 10 s apart (the first sleep jittered); the other events wait", async () => {
    const { api, clock, rec, lines, calls } = setup(() => 0.25);
    api.setReachable(false);
    rec.event(podEventRef(pod), "Normal", "Pulling", "Pulling image");
    rec.event(podEventRef(pod), "Normal", "Pulled", "Pulled image");
    await Bun.sleep(0);
    expect(calls("createEvent")).toHaveLength(1);
    clock.advance(2_499);
    await Bun.sleep(0);
    expect(calls("createEvent")).toHaveLength(1);
    clock.advance(1); // 10 s × 0.25
    await Bun.sleep(0);
    expect(calls("createEvent")).toHaveLength(2);
    for (let i = 0; i < 9; i++) {
      clock.advance(10_000);
      await Bun.sleep(0);
    }
    expect(calls("createEvent")).toHaveLength(11);
    expect(lines.filter((l) => l.includes("may retry after sleeping"))).toHaveLength(11);
    api.setReachable(true);
    clock.advance(10_000);
    await Bun.sleep(0);
    expect(calls("createEvent")).toHaveLength(13); // the 12th try of the first, then the second
    expect(api.events.map((e: any) => e.reason)).toEqual(["Pulling", "Pulled"]);

    // The 12th failure is the last.
    api.setReachable(false);
    rec.event(podEventRef(pod), "Normal", "Created", "Created container");
    await Bun.sleep(0);
    clock.advance(2_500);
    for (let i = 0; i < 12; i++) {
      await Bun.sleep(0);
      clock.advance(10_000);
    }
    await Bun.sleep(0);
    expect(calls("createEvent")).toHaveLength(13 + 12);
    expect(lines.filter((l) => l.includes("retry limit exceeded"))).toHaveLength(1);
    expect(clock.pendingTimers()).toBe(0);
  });

  test("an event the server answered with an error is not written again", async () => {
    const { api, rec, lines, calls } = setup();
    api.failNext(
      "createEvent",
      new ApiError("Forbidden", 403, "POST", "/api/v1/namespaces/ns1/events", "unable to create new content in namespace ns1 because it is being terminated"),
    );
    api.failNext("createEvent", new ApiError("InternalError", 500, "POST", "/api/v1/namespaces/ns1/events", "etcd"));
    rec.event(podEventRef(pod), "Normal", "Killing", "Stopping container app");
    rec.event(podEventRef(pod), "Normal", "Pulled", "Pulled image");
    rec.event(podEventRef(pod), "Normal", "Created", "Created container");
    await Bun.sleep(0);
    expect(calls("createEvent")).toHaveLength(3);
    expect(api.events.map((e: any) => e.reason)).toEqual(["Created"]);
    expect(lines.filter((l) => l.includes("Server rejected event (will not retry!)"))).toHaveLength(2);
  });

  test("a rejection because the event's namespace is being deleted is logged only at --v=5, as upstream's; others are errors", async () => {
    const api = new FakeKubeApi();
    const { logger, lines } = memoryLogger(4);
    const rec = new ApiEventRecorder({ api, nodeName: "n1", clock: new FakeClock(), logger, random: () => 0 });
    const forbidden = (causes: string[]) => new ApiError("Forbidden", 403, "POST", "/api/v1/namespaces/ns1/events", "unable to create new content in namespace ns1", causes);
    api.failNext("createEvent", forbidden(["NamespaceTerminating"]));
    api.failNext("createEvent", forbidden([]));
    rec.event(podEventRef(pod), "Normal", "Killing", "Stopping container app");
    rec.event(podEventRef(pod), "Normal", "Pulled", "Pulled image");
    await Bun.sleep(0);
    const rejected = lines.filter((l) => l.includes("Server rejected event (will not retry!)"));
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toContain("reason=Pulled");
  });

  test("a patch of an event the server no longer has creates it again, with its name and count", async () => {
    const { api, rec, calls } = setup();
    rec.event(podEventRef(pod, "app"), "Warning", "BackOff", "Back-off");
    await Bun.sleep(0);
    api.failNext("patchEvent", new ApiError("NotFound", 404, "PATCH", "/api/v1/namespaces/ns1/events/x", "not found"));
    rec.event(podEventRef(pod, "app"), "Warning", "BackOff", "Back-off");
    await Bun.sleep(0);
    expect(calls("patchEvent")).toHaveLength(1);
    expect(api.events).toHaveLength(2);
    expect(api.events[1]).toMatchObject({ metadata: { name: (api.events[0] as any).metadata.name }, count: 2, message: "Back-off" });
  });

  test("stopping ends a waiting retry and drops what is queued; later events are not written", async () => {
    const { api, clock, rec, lines, calls } = setup();
    api.setReachable(false);
    rec.event(podEventRef(pod), "Normal", "Pulling", "Pulling image");
    rec.event(podEventRef(pod), "Normal", "Pulled", "Pulled image");
    await Bun.sleep(0);
    expect(clock.pendingTimers()).toBe(1);
    rec[Symbol.dispose]();
    await Bun.sleep(0);
    expect(clock.pendingTimers()).toBe(0);
    expect(lines.filter((l) => l.includes("Unable to write event (the event recorder is stopped)"))).toHaveLength(1);
    api.setReachable(true);
    rec.event(podEventRef(pod), "Normal", "Created", "Created container");
    clock.advance(60_000);
    await Bun.sleep(0);
    expect(calls("createEvent")).toHaveLength(1);
    expect(api.events).toHaveLength(0);
  });
});

test("every event is logged at --v=3 as upstream's broadcaster logs it, API or not", () => {
  const { logger, lines } = memoryLogger(3);
  new LogEventRecorder(logger).event(
    podEventRef({ metadata: { name: "p", namespace: "ns", uid: "u" }, spec: { containers: [{ name: "c" }] } }, "c"),
    "Warning",
    "BackOff",
    "Back-off restarting failed container c",
  );
  expect(lines).toEqual([
    expect.stringContaining(
      '"Event occurred" object=ns/p fieldPath="spec.containers{c}" kind=Pod apiVersion=v1 type=Warning reason=BackOff message="Back-off restarting failed container c"',
    ),
  ]);
  const quiet = memoryLogger(2);
  new LogEventRecorder(quiet.logger).event(nodeRef("n1"), "Normal", "NodeReady", "Node n1 status is now: NodeReady");
  expect(quiet.lines).toEqual([]);
});
