import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { FakePodRuntime } from "../runtime/fake.ts";
import { LocalStatusStore } from "../status/index.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { HostPodSyncer } from "./pod-syncer.ts";
import { PodWorkers, STALE_WAKE_DELAY_MS } from "./podworkers.ts";
import { PodSyncCancelledError } from "./pod-worker.ts";
import type { PodStepOutcome } from "../runtime/index.ts";
import { AllocationManager } from "../allocation/index.ts";
import { NodePredicates, type PodAdmitter } from "../node/admission.ts";
import { podRef } from "../pods/identity.ts";

const pod = (uid: string, restartPolicy: "Always" | "Never" = "Always", name = "web"): Pod => ({
  metadata: { name, namespace: "default", uid },
  spec: { restartPolicy, terminationGracePeriodSeconds: 5, containers: [{ name: "app", image: "busybox" }] },
});

function setup() {
  const clock = new FakeClock();
  const runtime = new FakePodRuntime(clock);
  const status = new LocalStatusStore();
  const workers = new PodWorkers({
    syncer: new HostPodSyncer({ runtime, status, clock, logger: memoryLogger().logger }),
    clock,
    logger: memoryLogger().logger,
    resyncIntervalMs: 60_000,
  });
  return { clock, runtime, status, workers };
}

/** Workers whose jitter (resync, error retry) draws from `random`; none without it. */
function withRandom(random: (() => number) | undefined) {
  const clock = new FakeClock();
  const runtime = new FakePodRuntime(clock);
  const workers = new PodWorkers({
    syncer: new HostPodSyncer({ runtime, status: new LocalStatusStore(), clock, logger: memoryLogger().logger }),
    clock,
    logger: memoryLogger().logger,
    resyncIntervalMs: 60_000,
    ...(random ? { random } : {}),
  });
  return { clock, runtime, workers };
}

describe("PodWorkers", () => {
  test("a new pod is started and its status recorded", async () => {
    const { runtime, status, workers } = setup();
    workers.add(pod("u1"));
    await workers.idle();
    expect(runtime.pods.get("u1")!.containers[0]!.state).toBe("running");
    expect(status.get("u1")).toMatchObject({ phase: "Running", podIP: "10.88.0.2" });
  });

  test("a converged pod is synced again after syncFrequency plus up to half of it at random (upstream's jitter)", async () => {
    const syncsAfter = async (random: (() => number) | undefined, ms: number) => {
      const { clock, runtime, workers } = withRandom(random);
      workers.add(pod("u1"));
      await workers.idle();
      clock.advance(ms);
      await workers.idle();
      return runtime.calls.filter((c) => c.method === "syncPod").length;
    };
    expect(await syncsAfter(undefined, 60_000)).toBe(2);
    expect(await syncsAfter(() => 0.5, 74_999)).toBe(1);
    expect(await syncsAfter(() => 0.5, 75_000)).toBe(2);
    expect(await syncsAfter(() => 0.999, 89_000)).toBe(1);
  });

  test("stopping waits for a step in flight only stopWaitMs, then names its pod; no retry is scheduled after", async () => {
    const clock = new FakeClock();
    const runtime = new FakePodRuntime(clock);
    // A runtime call that never answers (a container stop within a long grace period, an image pull).
    let fail = (_err: Error) => {};
    runtime.syncPod = () => new Promise((_resolve, reject) => (fail = reject));
    const { logger, lines } = memoryLogger(2);
    const workers = new PodWorkers({
      syncer: new HostPodSyncer({ runtime, status: new LocalStatusStore(), clock, logger }),
      clock,
      logger,
      resyncIntervalMs: 60_000,
      stopWaitMs: 2_000,
    });
    workers.add(pod("u1"));
    await Bun.sleep(0);
    let stopped = false;
    const stopping = workers[Symbol.asyncDispose]().then(() => (stopped = true));
    await Bun.sleep(0);
    expect(stopped).toBe(false);
    clock.advance(1_999);
    await Bun.sleep(0);
    expect(stopped).toBe(false);
    clock.advance(1);
    await stopping;
    expect(lines.some((l) => l.includes("stopping with pod steps in flight") && l.includes("default/web (syncing)"))).toBe(true);
    // The runtime connection closes after the workers: the step fails then, and is left to the next start.
    fail(new Error("connection closed"));
    await Bun.sleep(0);
    expect(lines.some((l) => l.includes("pod sync failed"))).toBe(false);
    expect(clock.pendingTimers()).toBe(0);
  });

  test("a sync step in flight is cancelled when the pod must stop (upstream cancels the sync's context): its signal aborts, and the kill follows", async () => {
    const { runtime, workers } = setup();
    // A sync that waits on something endless (a postStart hook that hangs) until it is cancelled.
    const syncPod = runtime.syncPod.bind(runtime);
    let reason: unknown;
    runtime.syncPod = (p: Pod, signal?: AbortSignal) =>
      new Promise<PodStepOutcome>((resolve) =>
        signal!.addEventListener("abort", () => {
          reason = signal!.reason;
          resolve(syncPod(p, signal));
        }),
      );
    workers.add(pod("u1"));
    await Bun.sleep(0);
    workers.remove("u1");
    await workers.idle();
    expect(reason).toBeInstanceOf(PodSyncCancelledError);
    expect(String(reason)).toContain("the pod must stop (deleted)");
    expect(reason).toMatchObject({ agentStopping: false });
    expect(runtime.calls.map((c) => c.method)).toContain("killPod");
    expect(workers.has("u1")).toBe(false);
  });

  test("stopping the workers cancels a sync step in flight, saying the agent stops (the step then leaves no trace); a pod that must stop does not say so", async () => {
    const { runtime, workers } = setup();
    let aborted: AbortSignal | undefined;
    runtime.syncPod = (_p: Pod, signal?: AbortSignal) =>
      new Promise<PodStepOutcome>((_resolve, reject) => signal!.addEventListener("abort", () => ((aborted = signal), reject(signal!.reason))));
    workers.add(pod("u1"));
    await Bun.sleep(0);
    await workers[Symbol.asyncDispose]();
    expect(String(aborted?.reason)).toContain("the pod workers stop");
    expect(aborted?.reason).toMatchObject({ agentStopping: true });
  });

  test("requests during a step collapse into one more step", async () => {
    const { runtime, workers } = setup();
    workers.add(pod("u1"));
    workers.sync("u1");
    workers.sync("u1");
    workers.sync("u1");
    await workers.idle();
    expect(runtime.calls.filter((c) => c.method === "syncPod")).toHaveLength(2);
  });

  test("a runtime event older than the worker's last read of the pod runs it a second later, not at once (upstream's pod cache: a status newer than the last sync)", async () => {
    const { clock, runtime, workers } = setup();
    // As the evented PLEG: the sandbox and container starts a step causes are
    // stamped by the runtime while the step runs, before its final read
    // (the runtime reads the pod again after a change and says when).
    const syncPod = runtime.syncPod.bind(runtime);
    runtime.syncPod = async (...args) => {
      const outcome = await syncPod(...args);
      if (outcome.changed) workers.sync("u1", clock.now());
      clock.advance(2);
      return { ...outcome, readAt: clock.now() };
    };
    const syncs = () => runtime.calls.filter((c) => c.method === "syncPod").length;
    const advance = async (ms: number) => {
      clock.advance(ms);
      await workers.idle();
    };
    workers.add(pod("u1"));
    await workers.idle();
    expect(syncs()).toBe(1); // its own start events did not run it again at once ...
    await advance(STALE_WAKE_DELAY_MS - 1);
    expect(syncs()).toBe(1);
    await advance(1);
    expect(syncs()).toBe(2); // ... but a second later
    // A change after the last read runs it at once.
    runtime.exitContainer("u1", "app", 1);
    workers.sync("u1", clock.now());
    await workers.idle();
    expect(syncs()).toBe(3);
    expect(runtime.pods.get("u1")!.containers[0]).toMatchObject({ state: "running", restartCount: 1 });
    await advance(STALE_WAKE_DELAY_MS);
    expect(syncs()).toBe(4);
    // Stale wakes one after the other do not put the step off.
    const beforeLastRead = clock.now() - 5;
    workers.sync("u1", beforeLastRead);
    await advance(600);
    workers.sync("u1", beforeLastRead);
    await advance(399);
    expect(syncs()).toBe(4);
    await advance(1);
    expect(syncs()).toBe(5);
    // A relist's events carry no stamp: they run the pod at once.
    workers.sync("u1");
    await workers.idle();
    expect(syncs()).toBe(6);
  });

  test("a runtime event during a step that is not older than the step's read runs the pod once more", async () => {
    const { clock, runtime, workers } = setup();
    const syncPod = runtime.syncPod.bind(runtime);
    let steps = 0;
    runtime.syncPod = async (...args) => {
      const outcome = await syncPod(...args);
      // The container changes just as the step's last read (after starting it) began.
      if (++steps === 1) workers.sync("u1", outcome.readAt);
      clock.advance(1);
      return outcome;
    };
    workers.add(pod("u1"));
    await workers.idle();
    expect(runtime.calls.filter((c) => c.method === "syncPod")).toHaveLength(2);
  });

  test("a crashed container waits out its backoff, then restarts", async () => {
    const { clock, runtime, status, workers } = setup();
    workers.add(pod("u1"));
    await workers.idle();
    runtime.exitContainer("u1", "app", 1);
    workers.sync("u1");
    await workers.idle();
    // First restart is immediate (upstream), then 10s backoff starts.
    expect(runtime.pods.get("u1")!.containers[0]).toMatchObject({ state: "running", restartCount: 1 });
    runtime.exitContainer("u1", "app", 1);
    workers.sync("u1");
    await workers.idle();
    expect(status.get("u1")!.containerStatuses[0]!.state).toMatchObject({ waiting: { reason: "CrashLoopBackOff" } });
    clock.advance(9_999);
    await workers.idle();
    expect(runtime.pods.get("u1")!.containers[0]!.state).toBe("exited");
    clock.advance(1);
    await workers.idle();
    expect(runtime.pods.get("u1")!.containers[0]).toMatchObject({ state: "running", restartCount: 2 });
  });

  test("removal kills then removes, and the worker goes away", async () => {
    const { runtime, status, workers } = setup();
    workers.add(pod("u1"));
    await workers.idle();
    workers.remove("u1");
    await workers.idle();
    expect(runtime.pods.has("u1")).toBe(false);
    expect(workers.has("u1")).toBe(false);
    expect(status.get("u1")).toBeUndefined();
    expect(runtime.calls.map((c) => c.method)).toContain("killPod");
  });

  test("restartPolicy Never: completed pod is stopped but kept until deleted", async () => {
    const { runtime, status, workers } = setup();
    workers.add(pod("u1", "Never"));
    await workers.idle();
    runtime.exitContainer("u1", "app", 0);
    workers.sync("u1");
    await workers.idle();
    expect(status.get("u1")!.phase).toBe("Succeeded");
    expect(workers.stageOf("u1")).toBe("terminated");
    expect(runtime.pods.get("u1")!.sandboxes[0]!.ready).toBe(false);
    expect(runtime.pods.get("u1")!.containers).toHaveLength(1);
    workers.remove("u1");
    await workers.idle();
    expect(workers.has("u1")).toBe(false);
  });

  test("a failed step is retried after the error delay, 10 s plus up to half of it at random (upstream's jitter)", async () => {
    const runningAfter = async (random: (() => number) | undefined, ms: number) => {
      const { clock, runtime, workers } = withRandom(random);
      runtime.failNext("observe", new Error("runtime is down"));
      workers.add(pod("u1"));
      await workers.idle();
      expect(runtime.pods.has("u1")).toBe(false);
      clock.advance(ms);
      await workers.idle();
      return runtime.pods.get("u1")?.containers[0]?.state === "running";
    };
    expect(await runningAfter(undefined, 10_000)).toBe(true);
    expect(await runningAfter(() => 0.5, 12_499)).toBe(false);
    expect(await runningAfter(() => 0.5, 12_500)).toBe(true);
  });

  test("a replacement static pod starts only after its predecessor is gone", async () => {
    const { runtime, workers } = setup();
    workers.add(pod("old"));
    await workers.idle();
    runtime.failNext("removePod", new Error("busy"));
    workers.remove("old");
    workers.add(pod("new"));
    await workers.idle();
    expect(runtime.pods.has("new")).toBe(false);
    expect(workers.stageOf("old")).toBe("terminated");
  });

  test("orphans are killed and removed", async () => {
    const { runtime, workers } = setup();
    runtime.pods.set("orphan", { uid: "orphan", name: "x", namespace: "default", sandboxes: [], containers: [] });
    workers.terminateOrphan({ uid: "orphan", name: "x", namespace: "default" });
    await workers.idle();
    expect(runtime.pods.has("orphan")).toBe(false);
  });

  test("a pod deleted through the API is killed with its deletion grace period, then removed", async () => {
    const { runtime, workers } = setup();
    const p = pod("u1");
    workers.add(p);
    await workers.idle();
    workers.update({ ...p, metadata: { ...p.metadata, deletionTimestamp: "2026-01-01T00:00:00Z", deletionGracePeriodSeconds: 3 } });
    await workers.idle();
    expect(runtime.pods.has("u1")).toBe(false);
    expect(workers.has("u1")).toBe(false);
  });

  test("a pod whose worker finished gets no further updates: the API server's writes during its DELETE kill, remove and delete nothing again", async () => {
    const { runtime, status, workers } = setup();
    const deletes: string[] = [];
    const original = status.delete.bind(status);
    status.delete = (uid) => (deletes.push(uid), original(uid));
    const count = (method: string) => runtime.calls.filter((c) => c.method === method && c.uid === "u1").length;
    const p = pod("u1");
    const deleting = (grace: number): Pod => ({ ...p, metadata: { ...p.metadata, deletionTimestamp: "2026-01-01T00:00:00Z", deletionGracePeriodSeconds: grace } });
    workers.add(p);
    await workers.idle();
    workers.update(deleting(30));
    await workers.idle();
    expect(workers.stageOf("u1")).toBe("finished");
    // The agent's DELETE (grace 0) comes back as a MODIFIED event, then the DELETED one; a resync of the source may repeat it.
    workers.update(deleting(0));
    await workers.idle();
    workers.add(deleting(0));
    workers.remove("u1");
    workers.terminateOrphan(podRef(p));
    await workers.idle();
    expect({ kills: count("killPod"), removals: count("removePod"), deletes: deletes.length }).toEqual({ kills: 1, removals: 1, deletes: 1 });
    expect(workers.has("u1")).toBe(false);
    // Housekeeping forgets it once no source wants it; only then is the UID a new pod.
    workers.forgetFinished(new Set(["u1"]));
    expect(workers.stageOf("u1")).toBe("finished");
    workers.forgetFinished(new Set());
    expect(workers.stageOf("u1")).toBeUndefined();
  });

  test("a static pod restored with the same UID runs again, whether it was added back while terminating or after it finished; a mere update does not restart it", async () => {
    const { runtime, workers } = setup();
    const running = () => runtime.pods.get("s1")?.containers.some((c) => c.state === "running") ?? false;
    workers.add(pod("s1"));
    await workers.idle();
    // Added again while it terminates: it starts once it finished.
    workers.remove("s1");
    workers.add(pod("s1"));
    await workers.idle();
    expect(workers.stageOf("s1")).toBe("syncing");
    expect(running()).toBe(true);
    // Added again after it finished: it starts at once.
    workers.remove("s1");
    await workers.idle();
    expect(workers.stageOf("s1")).toBe("finished");
    workers.update(pod("s1"));
    await workers.idle();
    expect(workers.stageOf("s1")).toBe("finished");
    workers.add(pod("s1"));
    await workers.idle();
    expect(workers.stageOf("s1")).toBe("syncing");
    expect(running()).toBe(true);
    expect(runtime.calls.filter((c) => c.method === "killPod").length).toBe(2);
  });

  test("a pod first seen already terminating or terminal is never started", async () => {
    const { runtime, workers, status } = setup();
    const p = pod("u1");
    workers.add({ ...p, metadata: { ...p.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } });
    workers.add({ ...pod("u2"), status: { phase: "Succeeded" } });
    await workers.idle();
    expect(runtime.calls.filter((c) => c.method === "syncPod")).toEqual([]);
    expect(workers.stageOf("u2")).toBe("terminated");
    expect(status.get("u2")).toBeUndefined(); // its status is left as the API has it
  });

  test("admission rejects a pod once: Failed with the reason, never started", async () => {
    const clock = new FakeClock();
    const runtime = new FakePodRuntime(clock);
    const status = new LocalStatusStore();
    const admission: PodAdmitter = {
      admit: (_pod, active) => (active.length >= 1 ? { admit: false, reason: "OutOfpods", message: "Node didn't have enough resource: pods" } : { admit: true }),
    };
    const workers = new PodWorkers({
      syncer: new HostPodSyncer({ runtime, status, clock, logger: memoryLogger().logger, admission }),
      clock,
      logger: memoryLogger().logger,
      resyncIntervalMs: 60_000,
    });
    workers.add(pod("u1"));
    workers.add(pod("u2", "Always", "other"));
    workers.add(pod("u2", "Always", "other"));
    await workers.idle();
    expect(runtime.pods.has("u2")).toBe(false);
    expect(status.get("u2")).toMatchObject({ phase: "Failed", reason: "OutOfpods" });
    expect(runtime.pods.has("u1")).toBe(true);
    // Deleted through the API, the rejected pod still goes through termination to its final delete.
    const deleted: string[] = [];
    const sink = status as unknown as { delete(uid: string): void };
    const original = sink.delete.bind(status);
    sink.delete = (uid) => (deleted.push(uid), original(uid));
    workers.update({ ...pod("u2", "Always", "other"), metadata: { ...pod("u2", "Always", "other").metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } });
    await workers.idle();
    expect(deleted).toEqual(["u2"]);
  });

  test("an evicted pod is stopped and reported Failed with reason Evicted", async () => {
    const { runtime, status, workers } = setup();
    workers.add(pod("u1"));
    await workers.idle();
    expect(workers.evict("u1", "The node was low on resource: memory.", 0)).toBe(true);
    await workers.idle();
    expect(runtime.pods.has("u1")).toBe(false); // its containers and logs are gone at once
    expect(status.get("u1")).toMatchObject({ phase: "Failed", reason: "Evicted", message: "The node was low on resource: memory." });
    expect(workers.evict("u1", "again", 0)).toBe(false);
    expect(workers.activePods()).toEqual([]);
  });

  test("activeDeadlineSeconds: the pod is stopped when it passes, Failed with reason DeadlineExceeded", async () => {
    const { clock, runtime, status, workers } = setup();
    const p = { ...pod("u1"), spec: { ...pod("u1").spec, activeDeadlineSeconds: 30 } };
    workers.add(p);
    await workers.idle();
    expect(runtime.pods.get("u1")!.containers[0]!.state).toBe("running");
    clock.advance(29_999);
    await workers.idle();
    expect(workers.stageOf("u1")).toBe("syncing");
    clock.advance(1);
    await workers.idle();
    expect(workers.stageOf("u1")).toBe("terminated");
    expect(status.get("u1")).toMatchObject({ phase: "Failed", reason: "DeadlineExceeded", message: "Pod was active on the node longer than the specified deadline" });
  });

  test("activePod finds a running pod by UID, and not one that is terminating", async () => {
    const { workers } = setup();
    workers.add(pod("u1"));
    await workers.idle();
    expect(workers.activePod("u1")?.metadata.uid).toBe("u1");
    workers.remove("u1");
    expect(workers.activePod("u1")).toBeUndefined();
    expect(workers.activePod("absent")).toBeUndefined();
  });
});

describe("PodWorkers with in-place resize", () => {
  const sized = (uid: string, cpu: string): Pod => ({
    metadata: { name: `p-${uid}`, namespace: "default", uid },
    spec: { terminationGracePeriodSeconds: 0, containers: [{ name: "app", image: "busybox", resources: { requests: { cpu }, limits: { cpu } } }] },
  });

  test("a Deferred resize waits with the allocated resources, and is accepted once another pod is gone", async () => {
    const clock = new FakeClock();
    const runtime = new FakePodRuntime(clock);
    const status = new LocalStatusStore();
    const allocation = new AllocationManager({
      logger: memoryLogger().logger,
      allocatable: { cpu: 2000, memory: 2 ** 30 },
      admission: new NodePredicates({ name: "n", labels: {}, taints: [], allocatable: { cpu: 2000, memory: 2 ** 30, "ephemeral-storage": 2 ** 30, pods: 10 } }),
    });
    const workers = new PodWorkers({
      syncer: new HostPodSyncer({ runtime, status, clock, logger: memoryLogger().logger, allocation }),
      clock,
      logger: memoryLogger().logger,
      resyncIntervalMs: 600_000,
    });
    workers.add(sized("a", "500m"));
    workers.add(sized("b", "1000m"));
    await workers.idle();
    workers.add(sized("a", "1500m"));
    await workers.idle();
    expect(status.get("a")!.resize).toEqual({ pending: { reason: "Deferred", message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000" } });
    expect(status.get("a")!.containerStatuses[0]!.allocatedResources).toEqual({ cpu: "500m" });
    expect(workers.activePods().find((p) => p.metadata.uid === "a")!.spec.containers[0]!.resources?.limits?.cpu).toBe("500m");
    workers.remove("b");
    await workers.idle();
    await workers.idle();
    // Accepted: no longer pending; in progress, since this fake runtime never applies resources (the CRI runtime's tests do).
    expect(status.get("a")!.resize).toEqual({ inProgress: {} });
    expect(status.get("a")!.containerStatuses[0]!.allocatedResources).toEqual({ cpu: "1500m" });
  });
});
