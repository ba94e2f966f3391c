import { describe, expect, test } from "bun:test";
import { ApiError } from "../api/errors.ts";
import { FakeKubeApi } from "../api/fake.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { ApiStatusManager, apiPodStatus, reportedContainer, type ApiPodStatus } from "./api.ts";
import { podStatus, type PodStatusView } from "./phase.ts";

const pod: Pod = {
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: { nodeName: "n1", containers: [{ name: "app", image: "busybox", resources: { limits: { cpu: "1", memory: "64Mi" } } }] },
};
const view = (phase: PodStatusView["phase"], ready: boolean): PodStatusView => ({
  phase,
  sandboxReady: true,
  podIP: "10.1.0.4",
  podIPs: [{ ip: "10.1.0.4" }],
  startTime: "2026-01-01T00:00:00Z",
  containerStatuses: [
    {
      name: "app",
      state: ready ? { running: { startedAt: "2026-01-01T00:00:01Z" } } : { waiting: { reason: "ContainerCreating" } },
      lastState: {},
      ready,
      started: ready,
      restartCount: 0,
      image: "busybox",
      imageID: "sha256:1",
    },
  ],
});
const cond = (s: ApiPodStatus, type: string) => s.conditions.find((c) => c.type === type)!;

describe("apiPodStatus", () => {
  test("conditions, IPs and QoS of a running pod", () => {
    const s = apiPodStatus(pod, view("Running", true), { hostIPs: ["192.0.2.1"], previous: undefined, now: 0 });
    expect(s).toMatchObject({ phase: "Running", podIP: "10.1.0.4", hostIP: "192.0.2.1", qosClass: "Guaranteed" });
    expect(s.conditions.map((c) => [c.type, c.status])).toEqual([
      ["PodReadyToStartContainers", "True"],
      ["Initialized", "True"],
      ["Ready", "True"],
      ["ContainersReady", "True"],
      ["PodScheduled", "True"],
    ]);
  });

  test("a host-network pod's IPs are the node's", () => {
    const hostNet: Pod = { ...pod, spec: { ...pod.spec, hostNetwork: true } };
    const s = apiPodStatus(hostNet, { ...view("Running", true), podIP: undefined, podIPs: [] } as PodStatusView, { hostIPs: ["192.0.2.1"], previous: undefined, now: 0 });
    expect(s).toMatchObject({ podIP: "192.0.2.1", podIPs: [{ ip: "192.0.2.1" }], hostIP: "192.0.2.1" });
  });

  test("unready containers are named; transition times move only on change", () => {
    const first = apiPodStatus(pod, view("Pending", false), { hostIPs: [], previous: undefined, now: 1000 });
    expect(cond(first, "Ready")).toMatchObject({ status: "False", reason: "ContainersNotReady", message: "containers with unready status: [app]" });
    const later = apiPodStatus(pod, view("Pending", false), { hostIPs: [], previous: first, now: 60_000 });
    expect(cond(later, "Ready").lastTransitionTime).toBe(cond(first, "Ready").lastTransitionTime);
    const ready = apiPodStatus(pod, view("Running", true), { hostIPs: [], previous: later, now: 90_000 });
    expect(cond(ready, "Ready").lastTransitionTime).toBe("1970-01-01T00:01:30Z");
  });

  test("never moves back out of a terminal phase", () => {
    const done = apiPodStatus(pod, view("Failed", false), { hostIPs: [], previous: undefined, now: 0 });
    expect(cond(done, "Ready")).toMatchObject({ status: "False", reason: "PodFailed" });
    const succeeded = apiPodStatus(pod, view("Succeeded", false), { hostIPs: [], previous: undefined, now: 0 });
    expect(cond(succeeded, "ContainersReady")).toMatchObject({ status: "False", reason: "PodCompleted" });
    expect(cond(succeeded, "Initialized")).toMatchObject({ status: "True", reason: "PodCompleted" });
    expect(apiPodStatus(pod, view("Running", true), { hostIPs: [], previous: done, now: 1 }).phase).toBe("Failed");
    const rejected = { ...done, reason: "OutOfcpu", message: "Node didn't have enough resource: cpu" };
    expect(apiPodStatus(pod, view("Pending", false), { hostIPs: [], previous: rejected, now: 2 })).toMatchObject({ phase: "Failed", reason: "OutOfcpu" });
  });

  test("keeps a terminal phase another writer set on the API server's copy since the agent last sent", () => {
    const running = apiPodStatus(pod, view("Running", true), { hostIPs: [], previous: undefined, now: 0 });
    expect(apiPodStatus(pod, view("Running", true), { hostIPs: [], previous: running, now: 1, apiPhase: "Failed" }).phase).toBe("Failed");
    // A computed terminal phase is the agent's own, as upstream's only keeps the old one over a non-terminal.
    expect(apiPodStatus(pod, view("Succeeded", false), { hostIPs: [], previous: running, now: 2, apiPhase: "Running" }).phase).toBe("Succeeded");
  });
});

describe("readiness gates and other writers' conditions", () => {
  const gated: Pod = { ...pod, spec: { ...pod.spec, readinessGates: [{ conditionType: "example.com/lb" }, { conditionType: "example.com/dns" }] } };
  const foreign = (type: string, status: "True" | "False") => ({ type, status, lastProbeTime: null, lastTransitionTime: "2026-01-01T00:00:00Z" });
  test("Ready stays False, reason ReadinessGatesNotReady, until every gate's condition is True; ContainersReady does not wait", () => {
    const none = apiPodStatus(gated, view("Running", true), { hostIPs: [], previous: undefined, now: 0 });
    expect(cond(none, "ContainersReady").status).toBe("True");
    expect(cond(none, "Ready")).toMatchObject({
      status: "False",
      reason: "ReadinessGatesNotReady",
      message: 'corresponding condition of pod readiness gate "example.com/lb" does not exist., corresponding condition of pod readiness gate "example.com/dns" does not exist.',
    });
    const half = apiPodStatus(gated, view("Running", true), {
      hostIPs: [],
      previous: none,
      now: 1,
      apiConditions: [foreign("example.com/lb", "True"), foreign("example.com/dns", "False")],
    });
    expect(cond(half, "Ready")).toMatchObject({ status: "False", message: 'the status of pod readiness gate "example.com/dns" is not "True", but False' });
    const all = apiPodStatus(gated, view("Running", true), {
      hostIPs: [],
      previous: half,
      now: 2,
      apiConditions: [foreign("example.com/lb", "True"), foreign("example.com/dns", "True")],
    });
    expect(cond(all, "Ready").status).toBe("True");
    // Kept (first, untouched) in what is sent: the merge patch replaces the whole list.
    expect(all.conditions.slice(0, 2)).toEqual([foreign("example.com/lb", "True"), foreign("example.com/dns", "True")]);
    // Containers not ready: their reason, not the gates'.
    expect(cond(apiPodStatus(gated, view("Running", false), { hostIPs: [], previous: undefined, now: 0 }), "Ready").reason).toBe("ContainersNotReady");
  });

  test("the manager follows a gate condition changed through the API, and keeps it in later patches", async () => {
    const api = new FakeKubeApi();
    const stored = api.putPod(gated as never);
    const manager = new ApiStatusManager({ api, hostIPs: [], clock: new FakeClock(), logger: memoryLogger().logger });
    const settle = async () => {
      for (let i = 0; i < 10; i++) await Bun.sleep(0);
    };
    const p = { ...gated, metadata: { ...gated.metadata, uid: stored.metadata!.uid } } as Pod;
    manager.set(p, view("Running", true));
    await settle();
    const current = () => api.pods.get("default/web")!.status as ApiPodStatus;
    expect(cond(current(), "Ready").status).toBe("False");
    // Another writer sets both gates' conditions (what the watch brings back as a reconcile).
    const withGates = { ...current(), conditions: [...current().conditions, foreign("example.com/lb", "True"), foreign("example.com/dns", "True")] };
    api.pods.get("default/web")!.status = withGates;
    const updated = { ...p, status: withGates } as Pod;
    manager.reconcile(updated);
    await settle();
    expect(cond(current(), "Ready").status).toBe("True");
    expect(cond(current(), "example.com/lb").status).toBe("True");
    // A later status of the agent's own keeps them.
    manager.set(updated, view("Running", false));
    await settle();
    expect(cond(current(), "Ready").status).toBe("False");
    expect(cond(current(), "example.com/dns").status).toBe("True");
    // And one turning False takes Ready back down.
    const dnsDown = { ...current(), conditions: current().conditions.map((c) => (c.type === "example.com/dns" ? { ...c, status: "False" as const } : c)) };
    api.pods.get("default/web")!.status = dnsDown;
    manager.set({ ...updated, status: dnsDown } as Pod, view("Running", true));
    await settle();
    expect(cond(current(), "Ready")).toMatchObject({ status: "False", reason: "ReadinessGatesNotReady" });
  });
});

describe("two writers of the pod's conditions", () => {
  test("a patch of the agent's never carries another writer's condition, so a change the agent has not seen yet survives it", async () => {
    // The suite's readiness-gate test: the test sets a gate condition through the API while the agent,
    // from its older copy of the pod, patches a container's readiness.
    const gated: Pod = { ...pod, spec: { ...pod.spec, readinessGates: [{ conditionType: "example.com/lb" }] } };
    const gate = (status: "True" | "False") => ({ type: "example.com/lb", status, lastProbeTime: null, lastTransitionTime: "2026-01-01T00:00:00Z" });
    const api = new FakeKubeApi();
    const stored = api.putPod({ ...gated, status: { phase: "Pending", conditions: [gate("False")] } } as never);
    const manager = new ApiStatusManager({ api, hostIPs: [], clock: new FakeClock(), logger: memoryLogger().logger });
    const settle = async () => {
      for (let i = 0; i < 10; i++) await Bun.sleep(0);
    };
    const stale = { ...gated, metadata: { ...gated.metadata, uid: stored.metadata!.uid }, status: stored.status } as Pod;
    manager.set(stale, view("Running", false));
    await settle();
    const current = () => api.pods.get("default/web")!.status as ApiPodStatus;
    // The other writer turns the gate True; the agent's watch has not brought it back yet.
    api.pods.get("default/web")!.status = { ...current(), conditions: current().conditions.map((c) => (c.type === "example.com/lb" ? gate("True") : c)) };
    manager.set(stale, view("Running", true));
    await settle();
    expect(cond(current(), "ContainersReady").status).toBe("True");
    expect(cond(current(), "example.com/lb").status).toBe("True");
    for (const call of api.calls.filter((c) => c.method === "patchPodStatus")) {
      const sent = (call.args[2] as { status: ApiPodStatus }).status.conditions.map((c) => c.type);
      expect(sent).not.toContain("example.com/lb");
    }
  });
});

describe("the pod's addresses in a strategic merge patch", () => {
  test("a sandbox back with another IP replaces the API's podIPs and hostIPs instead of merging with them (the API refuses two)", async () => {
    const api = new FakeKubeApi();
    const stored = api.putPod(pod as never);
    const manager = new ApiStatusManager({ api, hostIPs: ["192.0.2.1"], clock: new FakeClock(), logger: memoryLogger().logger });
    const settle = async () => {
      for (let i = 0; i < 10; i++) await Bun.sleep(0);
    };
    const p = { ...pod, metadata: { ...pod.metadata, uid: stored.metadata!.uid } } as Pod;
    manager.set(p, view("Running", true));
    await settle();
    // After a reboot: a new sandbox, a new address; the node's address changed too. The agent starts
    // again and sees the pod with the status the API has.
    const rebooted = new ApiStatusManager({ api, hostIPs: ["192.0.2.9"], clock: new FakeClock(), logger: memoryLogger().logger });
    const seen = { ...p, status: api.pods.get("default/web")!.status } as Pod;
    expect((seen.status as ApiPodStatus).hostIPs).toEqual([{ ip: "192.0.2.1" }]);
    rebooted.set(seen, { ...view("Running", true), podIP: "10.1.0.9", podIPs: [{ ip: "10.1.0.9" }] });
    await settle();
    const status = api.pods.get("default/web")!.status as ApiPodStatus;
    expect(status.podIPs).toEqual([{ ip: "10.1.0.9" }]);
    expect(status.hostIPs).toEqual([{ ip: "192.0.2.9" }]);
  });
});

describe("an own condition that ends", () => {
  test("PodResizePending, gone from the status once the resize is applied, is removed from the API's pod (a merge by type alone keeps it)", async () => {
    const api = new FakeKubeApi();
    const stored = api.putPod(pod as never);
    const manager = new ApiStatusManager({ api, hostIPs: [], clock: new FakeClock(), logger: memoryLogger().logger });
    const settle = async () => {
      for (let i = 0; i < 10; i++) await Bun.sleep(0);
    };
    const p = { ...pod, metadata: { ...pod.metadata, uid: stored.metadata!.uid } } as Pod;
    manager.set(p, { ...view("Running", true), resize: { pending: { reason: "Deferred", message: "Node didn't have enough capacity" } } } as PodStatusView);
    await settle();
    const types = () => (api.pods.get("default/web")!.status as ApiPodStatus).conditions.map((c) => c.type);
    expect(types()).toContain("PodResizePending");
    manager.set(p, view("Running", true));
    await settle();
    expect(types()).not.toContain("PodResizePending");
    expect(types()).toContain("Ready");
  });
});

describe("ApiStatusManager", () => {
  const settle = async () => {
    for (let i = 0; i < 10; i++) await Bun.sleep(0);
  };

  test("patches on change only, and deletes a deleted pod with a UID precondition when its worker finishes", async () => {
    const api = new FakeKubeApi();
    const stored = api.putPod(pod as never);
    const manager = new ApiStatusManager({ api, hostIPs: ["192.0.2.1"], clock: new FakeClock(), logger: memoryLogger().logger });
    const p = { ...pod, metadata: { ...pod.metadata, uid: stored.metadata!.uid } } as Pod;
    manager.set(p, view("Running", true));
    await settle();
    manager.set(p, view("Running", true));
    await settle();
    expect(api.calls.filter((c) => c.method === "patchPodStatus")).toHaveLength(1);
    expect((api.pods.get("default/web")!.status as ApiPodStatus).phase).toBe("Running");
    manager.set({ ...p, metadata: { ...p.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } }, view("Succeeded", false));
    manager.delete(p.metadata.uid!);
    await settle();
    expect(api.pods.has("default/web")).toBe(false);
    expect(api.calls.find((c) => c.method === "deletePod")!.args[2]).toEqual({ uid: p.metadata.uid, gracePeriodSeconds: 0 });
    expect(manager.pendingCount()).toBe(0);
  });

  test("a reconcile: another writer's Ready=False is overwritten with the agent's status; the agent's own status coming back sends nothing", async () => {
    const api = new FakeKubeApi();
    const stored = api.putPod(pod as never);
    const logs = memoryLogger();
    const manager = new ApiStatusManager({ api, hostIPs: ["192.0.2.1"], clock: new FakeClock(), logger: logs.logger });
    const p = { ...pod, metadata: { ...pod.metadata, uid: stored.metadata!.uid } } as Pod;
    manager.set(p, view("Running", true));
    await settle();
    const patches = () => api.calls.filter((c) => c.method === "patchPodStatus").length;
    expect(patches()).toBe(1);
    // Its own status, as the API server sends it back (another key order): nothing to send.
    const echoed = JSON.parse(JSON.stringify(api.pods.get("default/web")!.status)) as ApiPodStatus;
    manager.reconcile({ ...p, status: { ...echoed, conditions: [...echoed.conditions].reverse() } });
    await settle();
    expect(patches()).toBe(1);
    // The node lifecycle controller marks it not Ready (the node was unreachable).
    const markedNotReady = { ...echoed, conditions: echoed.conditions.map((c) => (c.type === "Ready" ? { ...c, status: "False" as const, reason: "NodeNotReady" } : c)) };
    manager.reconcile({ ...p, status: markedNotReady });
    await settle();
    expect(patches()).toBe(2);
    expect(cond(api.pods.get("default/web")!.status as ApiPodStatus, "Ready").status).toBe("True");
    expect(logs.lines.join("\n")).toContain("pod status changed by another writer");
  });

  test("static pods are not patched (they report through mirror pods)", async () => {
    const api = new FakeKubeApi();
    const manager = new ApiStatusManager({ api, hostIPs: [], clock: new FakeClock(), logger: memoryLogger().logger });
    manager.set({ ...pod, metadata: { ...pod.metadata, annotations: { "kubernetes.io/config.source": "file" } } }, view("Running", true));
    await settle();
    expect(api.calls).toEqual([]);
  });

  test("a failed patch is retried with backoff", async () => {
    const api = new FakeKubeApi();
    api.putPod(pod as never);
    const clock = new FakeClock();
    const manager = new ApiStatusManager({ api, hostIPs: [], clock, logger: memoryLogger().logger });
    const { ApiError } = await import("../api/errors.ts");
    api.failNext("patchPodStatus", new ApiError("ServiceUnavailable", 503, "PATCH", "pods/web/status", "apiserver restarting"));
    manager.set(pod, view("Running", true));
    await settle();
    expect(manager.pendingCount()).toBe(1);
    clock.advance(500);
    await settle();
    expect(manager.pendingCount()).toBe(0);
    expect((api.pods.get("default/web")!.status as ApiPodStatus).phase).toBe("Running");
  });

  test("a static pod's status goes to its mirror once the mirror exists", async () => {
    const api = new FakeKubeApi();
    let mirror: Pod | undefined;
    const manager = new ApiStatusManager({ api, hostIPs: [], clock: new FakeClock(), logger: memoryLogger().logger, mirrors: { mirrorOf: () => mirror } });
    const staticPod: Pod = { ...pod, metadata: { ...pod.metadata, uid: "static-uid", annotations: { "kubernetes.io/config.source": "file" } } };
    manager.set(staticPod, view("Running", true));
    await settle();
    expect(api.calls).toEqual([]);
    mirror = api.putPod({ ...pod, metadata: { name: "web", namespace: "default", annotations: { "kubernetes.io/config.mirror": "static-uid" } } } as never) as unknown as Pod;
    manager.mirrorPodsChanged();
    await settle();
    const patch = api.calls.find((c) => c.method === "patchPodStatus")!;
    expect(patch.args[2]).toMatchObject({ metadata: { uid: mirror.metadata.uid }, status: { phase: "Running" } });
  });

  test("while the API server is unreachable only the latest status is kept, and sent once on reconnect", async () => {
    const api = new FakeKubeApi();
    const stored = api.putPod(pod as never);
    const clock = new FakeClock();
    const log = memoryLogger();
    const manager = new ApiStatusManager({ api, hostIPs: [], clock, logger: log.logger });
    const p = { ...pod, metadata: { ...pod.metadata, uid: stored.metadata!.uid } } as Pod;
    api.setReachable(false);
    manager.set(p, view("Pending", false));
    await settle();
    // A long outage: the retries back off (500ms doubling to 10s) while the status changes.
    for (let i = 0; i < 12; i++) {
      if (i === 4) manager.set(p, view("Running", false));
      clock.advance(10_000);
      await settle();
    }
    manager.set(p, view("Running", true));
    await settle();
    expect(manager.pendingCount()).toBe(1);
    const attempts = api.calls.filter((c) => c.method === "patchPodStatus").length;
    expect(attempts).toBeGreaterThan(3);
    expect(attempts).toBeLessThan(30); // backoff, not a hot loop
    api.setReachable(true);
    clock.advance(10_000);
    await settle();
    expect(manager.pendingCount()).toBe(0);
    const sent = api.calls.filter((c) => c.method === "patchPodStatus").slice(attempts);
    expect(sent).toHaveLength(1);
    expect((api.pods.get("default/web")!.status as ApiPodStatus).phase).toBe("Running");
    expect(cond(api.pods.get("default/web")!.status as ApiPodStatus, "Ready").status).toBe("True");
    // One warning for the whole outage; the retries log at -v=4.
    expect(log.lines.filter((l) => l.startsWith("W") && l.includes("pod status update failed; will retry"))).toHaveLength(1);
  });

  test("shutdown retries pending statuses at once and gives up after its deadline", async () => {
    const api = new FakeKubeApi();
    api.putPod(pod as never);
    const clock = new FakeClock();
    const log = memoryLogger();
    const manager = new ApiStatusManager({ api, hostIPs: [], clock, logger: log.logger });
    api.failNext("patchPodStatus", new ApiError("ServiceUnavailable", 503, "PATCH", "pods/web/status", "restarting"));
    api.failNext("patchPodStatus", new ApiError("ServiceUnavailable", 503, "PATCH", "pods/web/status", "restarting"));
    manager.set(pod, view("Running", true));
    await settle();
    clock.advance(500); // second failure: the next retry waits 1s
    await settle();
    expect(manager.pendingCount()).toBe(1);
    // The flush wakes the retry without waiting for the backoff.
    const flushed = manager.flushPending(2000);
    await settle();
    clock.advance(50);
    expect(await flushed).toBe(true);
    expect((api.pods.get("default/web")!.status as ApiPodStatus).phase).toBe("Running");

    // Unreachable: dispose waits its 2s deadline, reports what is left, and stops retrying.
    api.setReachable(false);
    manager.set(pod, view("Failed", false));
    await settle();
    const disposed = manager[Symbol.asyncDispose]();
    for (let i = 0; i < 50; i++) {
      clock.advance(50);
      await settle();
    }
    await disposed;
    expect(log.lines.some((l) => l.includes("stopping with pod statuses the API server has not accepted") && l.includes("pods=1"))).toBe(true);
    const attempts = api.calls.length;
    clock.advance(60_000);
    await settle();
    expect(api.calls.length).toBe(attempts);
  });
});
describe("observedGeneration (PodObservedGenerationTracking)", () => {
  test("the pod's generation is reported on the status and on each condition; none without one", () => {
    const [build, view] = [apiPodStatus, podStatus];
    const p = { metadata: { name: "p", namespace: "default", uid: "u", generation: 3 }, spec: { containers: [{ name: "app", image: "busybox" }] } };
    const observed = { uid: "u", name: "p", namespace: "default", sandboxes: [], containers: [] };
    const status = build(p, view(p, observed, new Map()), { hostIPs: [], previous: undefined, now: 0 });
    expect(status["observedGeneration"]).toBe(3);
    expect(status.conditions.every((c) => c.observedGeneration === 3)).toBe(true);
    const { generation: _g, ...meta } = p.metadata;
    const without = build({ ...p, metadata: meta }, view(p, observed, new Map()), { hostIPs: [], previous: undefined, now: 0 });
    expect("observedGeneration" in without).toBe(false);
  });
});

describe("reportedContainer", () => {
  const status = {
    containerStatuses: [
      { name: "web", containerID: "containerd://abc", ready: true, started: true },
      { name: "side", containerID: "containerd://def", ready: false, started: true },
    ],
    initContainerStatuses: [{ name: "proxy", containerID: "containerd://0a1", ready: true, started: true }],
  };
  test("what the API's status says of that container instance, by container ID", () => {
    expect(reportedContainer(status, "web", "abc")).toEqual({ ready: true, started: true });
    expect(reportedContainer(status, "side", "def")).toEqual({ ready: false, started: true });
    expect(reportedContainer(status, "proxy", "0a1")).toEqual({ ready: true, started: true }); // a sidecar
  });
  test("nothing for another instance of the container, an unknown name or no status", () => {
    expect(reportedContainer(status, "web", "abc2")).toBeUndefined();
    expect(reportedContainer(status, "web", "ab")).toBeUndefined();
    expect(reportedContainer(status, "other", "abc")).toBeUndefined();
    expect(reportedContainer(undefined, "web", "abc")).toBeUndefined();
    expect(reportedContainer({ containerStatuses: "x" }, "web", "abc")).toBeUndefined();
  });
});
