import { describe, expect, test } from "bun:test";
import type { EventRecorder } from "../events/recorder.ts";
import { podRef } from "../pods/identity.ts";
import type { Pod } from "../pods/schema.ts";
import { FakePodRuntime } from "../runtime/fake.ts";
import type { PodRuntime, PodStepOutcome } from "../runtime/index.ts";
import { LocalStatusStore } from "../status/index.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import type { RuntimePodPresence } from "../pleg/view.ts";
import { DEADLINE_MESSAGE, HostPodSyncer, NODE_SHUTDOWN_MESSAGE, type SyncPodRequest } from "./pod-syncer.ts";

const pod = (uid: string, restartPolicy: "Always" | "Never" = "Always"): Pod => ({
  metadata: { name: "web", namespace: "default", uid },
  spec: { restartPolicy, terminationGracePeriodSeconds: 5, containers: [{ name: "app", image: "busybox" }] },
});

function setup(runtimePods?: RuntimePodPresence, hostIP?: string, killGate?: Promise<void>) {
  const clock = new FakeClock();
  const runtime = new FakePodRuntime(clock);
  // Which PodRuntime methods the syncer itself calls (the fake's own reads are not counted).
  const called: string[] = [];
  const counted = new Proxy(runtime, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        called.push(String(name));
        if (name === "killPod") await killGate;
        return value.apply(target, args);
      };
    },
  }) as PodRuntime;
  const status = new LocalStatusStore();
  const events: { reason: string; message: string }[] = [];
  const recorder: EventRecorder = { event: (_ref, _type, reason, message) => events.push({ reason, message }) };
  const started: number[] = [];
  const probed: string[] = [];
  const readiness: { ready: boolean; changed?: (() => void) | undefined; reports?: () => Promise<void> } = { ready: true };
  const probes = {
    awaitReports: async () => readiness.reports?.(),
    addPod: (p: Pod, running: { containerName: string }[], podIP: string) =>
      probed.push(`add ${p.metadata.uid} ${running.map((r) => r.containerName).join(",")}${podIP === "10.88.0.2" ? "" : ` at ${podIP}`}`),
    removePod: (uid: string) => probed.push(`remove ${uid}`),
    stopLivenessAndStartup: (uid: string) => probed.push(`stop liveness and startup ${uid}`),
    watchReadiness: (_uid: string, fn: () => void) => ((readiness.changed = fn), () => (readiness.changed = undefined)),
    isReady: () => readiness.ready,
    isStarted: () => true,
  };
  const syncer = new HostPodSyncer({
    runtime: counted,
    status,
    ...(runtimePods ? { runtimePods } : {}),
    ...(hostIP ? { hostIP } : {}),
    clock,
    logger: memoryLogger().logger,
    recorder,
    probes,
    metrics: { podStarted: (firstSeen, running) => started.push(running - firstSeen) },
  });
  const request = (p: Pod): SyncPodRequest => ({ ref: podRef(p), pod: p, seenAt: 0, others: () => [], signal: new AbortController().signal });
  return { clock, runtime, called, status, events, started, probed, readiness, syncer, request };
}

describe("HostPodSyncer.syncPod", () => {
  test("starts the pod with one runtime call, records its status, tells the prober and measures its start once", async () => {
    const { clock, runtime, called, status, started, probed, syncer, request } = setup();
    const seenAt = clock.now();
    clock.advance(1500);
    const p = pod("u1");
    // The runtime's read after the start is the step's last: events older than it are in this status, and the pod workers cache it.
    expect(await syncer.syncPod({ ...request(p), seenAt })).toEqual({ kind: "running", failed: false, readAt: clock.now(), observed: runtime.pods.get("u1")! });
    expect(called).toEqual(["syncPod"]);
    expect(runtime.pods.get("u1")!.containers[0]!.state).toBe("running");
    expect(status.get("u1")).toMatchObject({ phase: "Running", podIP: "10.88.0.2" });
    expect(probed).toEqual(["add u1 app"]);
    expect(started).toEqual([1500]);
    await syncer.syncPod(request(p));
    expect(started).toEqual([1500]);
  });

  test("the step's status waits for the prober's reports: a container its mirror shows ready is ready in it, not dropped first", async () => {
    const { status, readiness, syncer, request } = setup();
    readiness.ready = false;
    readiness.reports = async () => {
      await Bun.sleep(1);
      readiness.ready = true; // the mirror pods were listed: readiness carried over
    };
    const p = pod("u1");
    await syncer.syncPod(request(p));
    expect(status.get("u1")!.containerStatuses[0]).toMatchObject({ name: "app", ready: true });
  });

  test("a host-network pod is probed at the node's IP, its status.podIP, not its sandbox's (none)", async () => {
    const { probed, syncer, request } = setup(undefined, "192.168.1.7");
    const p: Pod = { ...pod("u1"), spec: { ...pod("u1").spec, hostNetwork: true } };
    await syncer.syncPod(request(p));
    expect(probed).toEqual(["add u1 app at 192.168.1.7"]);
  });

  test("a pod the runtime did not hold at the last relist has its status (Pending, ContainerCreating) before its first step runs, as upstream's SyncPod", async () => {
    const held = new Set(["adopted"]);
    const { runtime, status, syncer, request } = setup({ heldAtLastRelist: (uid) => held.has(uid) });
    // What the status store held when the runtime's step began.
    const atStep: (string | undefined)[] = [];
    const step = runtime.syncPod.bind(runtime);
    runtime.syncPod = (p) => {
      const view = status.get(p.metadata.uid!);
      atStep.push(view && `${view.phase} ${JSON.stringify(view.containerStatuses.map((c) => c.state))}`);
      return step(p);
    };
    await syncer.syncPod(request(pod("new")));
    expect(atStep).toEqual([`Pending ${JSON.stringify([{ waiting: { reason: "ContainerCreating" } }])}`]);
    expect(status.get("new")).toMatchObject({ phase: "Running" });
    // Its next step, and a pod the runtime held (adopted after a restart), get only the status read after the step.
    await syncer.syncPod(request(pod("new")));
    await syncer.syncPod(request(pod("adopted")));
    expect(atStep.slice(1)).toEqual([`Running ${JSON.stringify([status.get("new")!.containerStatuses[0]!.state])}`, undefined]);
  });

  test("the status before the first step starts from the API server's copy: a container it showed running, which the runtime lost, keeps its restarts", async () => {
    const { runtime, status, syncer, request } = setup({ heldAtLastRelist: () => false });
    const atStep: unknown[] = [];
    const step = runtime.syncPod.bind(runtime);
    runtime.syncPod = (p) => {
      atStep.push(status.get(p.metadata.uid!)?.containerStatuses[0]);
      return step(p);
    };
    const before = {
      phase: "Running",
      containerStatuses: [
        { name: "app", ready: true, restartCount: 3, image: "busybox", imageID: "", containerID: "containerd://gone", state: { running: { startedAt: "2026-01-01T00:00:00Z" } } },
      ],
    };
    await syncer.syncPod(request({ ...pod("rebooted"), status: before } as Pod));
    expect(atStep[0]).toMatchObject({ restartCount: 4, lastState: { terminated: { reason: "ContainerStatusUnknown", exitCode: 137 } } });
  });

  test("before the PLEG's first relist nothing is known of the runtime: no status goes before the step", async () => {
    const { runtime, status, syncer, request } = setup({ heldAtLastRelist: () => undefined });
    const atStep: unknown[] = [];
    const step = runtime.syncPod.bind(runtime);
    runtime.syncPod = (p) => {
      atStep.push(status.get(p.metadata.uid!));
      return step(p);
    };
    await syncer.syncPod(request(pod("u1")));
    expect(atStep).toEqual([undefined]);
  });

  test("a pod past its activeDeadlineSeconds is to stop, with an event, and nothing runs", async () => {
    const { clock, called, events, syncer, request } = setup();
    const p = { ...pod("u1"), spec: { ...pod("u1").spec, activeDeadlineSeconds: 10 } };
    const first = await syncer.syncPod(request(p));
    expect(first).toMatchObject({ kind: "running", failed: false, deadlineMs: 10_000 });
    clock.advance(10_000);
    // Nothing was read: no readAt.
    expect(await syncer.syncPod(request(p))).toEqual({ kind: "terminate", event: { type: "deadlineExceeded", gracePeriodSeconds: 5 } });
    expect(called).toEqual(["syncPod"]);
    expect(events).toContainEqual({ reason: "DeadlineExceeded", message: DEADLINE_MESSAGE });
  });

  test("a pod whose containers completed is to stop", async () => {
    const { runtime, syncer, request } = setup();
    const p = pod("u1", "Never");
    await syncer.syncPod(request(p));
    runtime.exitContainer("u1", "app", 0);
    expect(await syncer.syncPod(request(p))).toMatchObject({ kind: "terminate", event: { type: "completed", gracePeriodSeconds: 5 } });
  });

  test("a container in backoff asks to be synced again when it ends", async () => {
    const { runtime, syncer, request, status } = setup();
    const p = pod("u1");
    await syncer.syncPod(request(p));
    runtime.exitContainer("u1", "app", 1);
    await syncer.syncPod(request(p)); // the first restart is immediate
    runtime.exitContainer("u1", "app", 1);
    expect(await syncer.syncPod(request(p))).toMatchObject({ kind: "running", failed: false, retryAfterMs: 10_000 });
    expect(status.get("u1")!.containerStatuses[0]!.state).toMatchObject({ waiting: { reason: "CrashLoopBackOff" } });
  });
});

describe("HostPodSyncer.syncTerminatingPod", () => {
  test("an evicted pod is killed, Failed with reason Evicted, and its containers go at once", async () => {
    const { runtime, called, status, probed, syncer, request } = setup();
    const p = pod("u1");
    await syncer.syncPod(request(p));
    called.length = 0;
    await syncer.syncTerminatingPod({
      ref: podRef(p),
      pod: p,
      state: { stage: "terminating", gracePeriodSeconds: 3, reason: "evicted", deleted: false, message: "low on memory" },
    });
    expect(called).toEqual(["killPod", "removePod"]);
    expect(probed).toContain("remove u1");
    expect(status.get("u1")).toMatchObject({ phase: "Failed", reason: "Evicted", message: "low on memory" });
    expect(runtime.pods.has("u1")).toBe(false);
  });

  test("a pod stopped for the node's shutdown is Failed with upstream's reason; a deleted one keeps what its containers say", async () => {
    const { status, syncer, request } = setup();
    const a = pod("a");
    const b = pod("b");
    await syncer.syncPod(request(a));
    await syncer.syncPod(request(b));
    await syncer.syncTerminatingPod({ ref: podRef(a), pod: a, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "nodeShutdown", deleted: false } });
    await syncer.syncTerminatingPod({ ref: podRef(b), pod: b, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "deleted", deleted: true } });
    expect(status.get("a")).toMatchObject({ phase: "Failed", reason: "Terminated", message: NODE_SHUTDOWN_MESSAGE });
    expect(status.get("b")!.reason).toBeUndefined();
    expect(status.get("b")!.containerStatuses[0]!.state).toMatchObject({ terminated: { exitCode: 137 } });
  });

  test("while its containers stop, a terminating pod's readiness is still probed and shows in its status; liveness and startup stop first (upstream SyncTerminatingPod)", async () => {
    let release = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const { status, probed, readiness, syncer, request } = setup(undefined, undefined, gate);
    const p = pod("u1");
    await syncer.syncPod(request(p));
    expect(status.get("u1")!.containerStatuses[0]!.ready).toBe(true);
    const killing = syncer.syncTerminatingPod({ ref: podRef(p), pod: p, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "deleted", deleted: true } });
    await Bun.sleep(0);
    expect(probed).toEqual(["add u1 app", "stop liveness and startup u1"]);
    // The readiness probe fails during the grace period: the pod's status says so before the kill ends.
    readiness.ready = false;
    readiness.changed?.();
    await Bun.sleep(0);
    expect(status.get("u1")!.containerStatuses[0]).toMatchObject({ ready: false, state: { running: {} } });
    release();
    await killing;
    expect(probed.at(-1)).toBe("remove u1");
    expect(readiness.changed).toBeUndefined();
    expect(status.get("u1")!.containerStatuses[0]!.state).toMatchObject({ terminated: {} });
  });

  test("a pod first seen terminating (reported Running, after a restart) gets its final status, as upstream's SyncTerminatingPod", async () => {
    const { runtime, status, syncer } = setup();
    const p: Pod = { ...pod("u2"), status: { phase: "Running" } };
    runtime.pods.set("u2", { uid: "u2", name: "web", namespace: "default", sandboxes: [], containers: [] });
    await syncer.syncTerminatingPod({ ref: podRef(p), pod: p, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "deleted", deleted: true } });
    expect(status.get("u2")?.phase).toBe("Failed");
  });

  test("a pod never synced here (first seen terminal, or an orphan) gets no status; a failed kill throws", async () => {
    const { runtime, status, syncer } = setup();
    const p: Pod = { ...pod("u1"), status: { phase: "Succeeded" } };
    runtime.pods.set("u1", { uid: "u1", name: "web", namespace: "default", sandboxes: [], containers: [] });
    await syncer.syncTerminatingPod({ ref: podRef(p), pod: p, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "completed", deleted: false } });
    expect(status.get("u1")).toBeUndefined();
    runtime.failNext("killPod", new Error("runtime is down"));
    expect(syncer.syncTerminatingPod({ ref: podRef(p), pod: undefined, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "deleted", deleted: true } })).rejects.toThrow(
      "runtime is down",
    );
  });
});

describe("HostPodSyncer.syncTerminatedPod", () => {
  test("removes the pod from the runtime and forgets its status and its deadline; a failed removal throws and keeps them", async () => {
    const { clock, runtime, called, status, syncer, request } = setup();
    const p = { ...pod("u1"), spec: { ...pod("u1").spec, activeDeadlineSeconds: 10 } };
    await syncer.syncPod(request(p));
    await syncer.syncTerminatingPod({ ref: podRef(p), pod: p, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "deleted", deleted: true } });
    runtime.failNext("removePod", new Error("busy"));
    expect(syncer.syncTerminatedPod(podRef(p), p)).rejects.toThrow("busy");
    expect(status.get("u1")).toBeDefined();
    called.length = 0;
    await syncer.syncTerminatedPod(podRef(p), p);
    expect(called).toEqual(["removePod"]);
    expect(runtime.pods.has("u1")).toBe(false);
    expect(status.get("u1")).toBeUndefined();
    // The same UID added again starts afresh: its deadline counts from now.
    clock.advance(60_000);
    expect(await syncer.syncPod(request(p))).toMatchObject({ kind: "running", deadlineMs: 10_000 });
  });
});

describe("HostPodSyncer's reason cache (upstream reason_cache.go)", () => {
  test("a container's last start failure stays in its status across syncs that start nothing, until it starts", async () => {
    const { status, request } = setup();
    const p = pod("u1");
    const observed = { uid: "u1", name: "web", namespace: "default", sandboxes: [], containers: [] };
    const outcomes: PodStepOutcome[] = [
      // The image cannot be pulled.
      {
        results: [{ action: "PullImage", target: "busybox", error: { reason: "ErrImagePull", message: "not found" } }],
        waiting: new Map([["app", { reason: "ErrImagePull", message: "not found" }]]),
        changed: true,
        observed,
        readAt: 0,
      },
      // Then the sandbox cannot be created: nothing is started, nothing said of the container.
      {
        results: [{ action: "CreatePodSandbox", target: "u1", error: { reason: "CreatePodSandboxError", message: "boom" } }],
        waiting: new Map(),
        changed: true,
        observed,
        readAt: 0,
      },
      // Then the container starts.
      {
        results: [{ action: "StartContainer", target: "app" }],
        waiting: new Map(),
        changed: true,
        observed: {
          ...observed,
          containers: [{ id: "c1", name: "app", sandboxId: "s", state: "running", hash: "h", restartCount: 0, image: "busybox", imageRef: "r", createdAt: 0, startedAt: 0 }],
        },
        readAt: 0,
      },
      // A later sync that starts nothing while the container is in a created state: no stale reason.
      {
        results: [],
        waiting: new Map(),
        changed: false,
        observed: {
          ...observed,
          containers: [{ id: "c1", name: "app", sandboxId: "s", state: "created", hash: "h", restartCount: 0, image: "busybox", imageRef: "r", createdAt: 0 }],
        },
        readAt: 0,
      },
    ];
    const scripted = new HostPodSyncer({
      runtime: { ...({} as PodRuntime), syncPod: async () => outcomes.shift()!, observe: async () => observed },
      status,
      clock: new FakeClock(),
      logger: memoryLogger().logger,
    });
    const state = () => status.get("u1")!.containerStatuses[0]!.state;
    await scripted.syncPod(request(p));
    expect(state()).toEqual({ waiting: { reason: "ErrImagePull", message: "not found" } });
    await scripted.syncPod(request(p));
    expect(state()).toEqual({ waiting: { reason: "ErrImagePull", message: "not found" } });
    await scripted.syncPod(request(p));
    expect(state()).toMatchObject({ running: {} });
    await scripted.syncPod(request(p));
    expect(state()).toEqual({ waiting: {} });
  });
});

describe("a stopped pod's final status (upstream SyncTerminatingPod's generateAPIPodStatus, then TerminatePod)", () => {
  const observed = { uid: "u1", name: "web", namespace: "default", sandboxes: [], containers: [] as PodStepOutcome["observed"]["containers"] };
  /** A runtime whose every sync fails to pull `failing` and leaves the containers `held`; its kill stops nothing more. */
  const scripted = (held: PodStepOutcome["observed"]["containers"], failing: string) => {
    const status = new LocalStatusStore();
    const now = { ...observed, containers: held };
    const syncer = new HostPodSyncer({
      runtime: {
        ...({} as PodRuntime),
        syncPod: async () => ({
          results: [{ action: "PullImage", target: "busybox", error: { reason: "ErrImagePull", message: "not found" } }],
          waiting: new Map([[failing, { reason: "ErrImagePull", message: "not found" }]]),
          changed: true,
          observed: now,
          readAt: 0,
        }),
        killPod: async () => ({ results: [], waiting: new Map(), changed: false, observed: now, readAt: 0 }),
        removePod: async () => ({ results: [], waiting: new Map(), changed: false, readAt: 0 }),
        observe: async () => now,
      },
      status,
      clock: new FakeClock(),
      logger: memoryLogger().logger,
    });
    return { status, syncer };
  };
  const request = (p: Pod): SyncPodRequest => ({ ref: podRef(p), pod: p, seenAt: 0, others: () => [], signal: new AbortController().signal });

  test("a deleted pod's container that never started ends ContainerStatusUnknown, not waiting (status_manager.go:569-583)", async () => {
    const { status, syncer } = scripted([], "app");
    const p: Pod = { ...pod("u1"), metadata: { ...pod("u1").metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } };
    await syncer.syncPod(request(pod("u1")));
    expect(status.get("u1")!.containerStatuses[0]!.state).toEqual({ waiting: { reason: "ErrImagePull", message: "not found" } });
    await syncer.syncTerminatingPod({ ref: podRef(p), pod: p, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "deleted", deleted: true } });
    expect(status.get("u1")).toMatchObject({ phase: "Failed" });
    expect(status.get("u1")!.containerStatuses[0]!.state).toEqual({
      terminated: { exitCode: 137, reason: "ContainerStatusUnknown", message: "The container could not be located when the pod was terminated" },
    });
  });

  const withInit = (deleted: boolean): Pod => ({
    metadata: { name: "web", namespace: "default", uid: "u1", ...(deleted ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}) },
    spec: {
      restartPolicy: "Always",
      initContainers: [
        { name: "first", image: "busybox" },
        { name: "second", image: "busybox" },
      ],
      containers: [{ name: "app", image: "busybox" }],
    },
  });
  const firstDone = [
    { id: "c1", name: "first", sandboxId: "s", state: "exited" as const, exitCode: 0, hash: "h", restartCount: 0, image: "busybox", imageRef: "r", createdAt: 0, finishedAt: 1 },
  ];
  const inits = (s: ReturnType<typeof scripted>["status"]) => s.get("u1")!.initContainerStatuses!.map((c) => c.state);

  test("an evicted pod's init container that never started keeps its last start failure (the reason cache, kubelet_pods.go:2439-2470)", async () => {
    const { status, syncer } = scripted(firstDone, "second");
    await syncer.syncPod(request(withInit(false)));
    const p = withInit(false);
    await syncer.syncTerminatingPod({ ref: podRef(p), pod: p, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "evicted", deleted: false, message: "low" } });
    expect(inits(status)).toEqual([{ terminated: expect.objectContaining({ exitCode: 0 }) }, { waiting: { reason: "ErrImagePull", message: "not found" } }]);
    // Not initialized (by the pod's own status, which it has none of): the app container keeps waiting.
    expect(status.get("u1")!.containerStatuses[0]!.state).toEqual({ waiting: { reason: "PodInitializing" } });
  });

  test("a deleted pod's shows none (ShouldContainerBeRestarted is false once deleted)", async () => {
    const { status, syncer } = scripted(firstDone, "second");
    await syncer.syncPod(request(withInit(false)));
    const p = withInit(true);
    await syncer.syncTerminatingPod({ ref: podRef(p), pod: p, state: { stage: "terminating", gracePeriodSeconds: 3, reason: "deleted", deleted: true } });
    expect(inits(status)).toEqual([{ terminated: expect.objectContaining({ exitCode: 0 }) }, { waiting: { reason: "PodInitializing" } }]);
  });
});
