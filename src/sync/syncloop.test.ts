import { describe, expect, test } from "bun:test";
import type { PlegEvent } from "../pleg/diff.ts";
import { GenericPleg, type Pleg } from "../pleg/generic.ts";
import type { Pod } from "../pods/schema.ts";
import { FakePodRuntime } from "../runtime/fake.ts";
import { PodConfig } from "../sources/podconfig.ts";
import type { PodSource, SourceSnapshot } from "../sources/types.ts";
import { LocalStatusStore } from "../status/index.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { PodWorkers } from "./podworkers.ts";
import { HostPodSyncer } from "./pod-syncer.ts";
import { SyncLoop } from "./syncloop.ts";

const pod = (uid: string): Pod => ({ metadata: { name: `p-${uid}`, namespace: "default", uid }, spec: { containers: [{ name: "c", image: "busybox" }] } });

class ManualSource implements PodSource {
  readonly name = "file" as const;
  emit: (s: SourceSnapshot) => void = () => {};
  start(emit: (s: SourceSnapshot) => void) {
    this.emit = emit;
  }
  async [Symbol.asyncDispose]() {}
}

async function setup(_opts: { emitFirst?: boolean } = {}) {
  const clock = new FakeClock();
  const { logger } = memoryLogger();
  const runtime = new FakePodRuntime(clock);
  const status = new LocalStatusStore();
  const workers = new PodWorkers({ syncer: new HostPodSyncer({ runtime, status, clock, logger }), clock, logger, resyncIntervalMs: 60_000 });
  const pleg = new GenericPleg({ runtime, clock, logger });
  const source = new ManualSource();
  const loop = new SyncLoop({ sources: [source], podConfig: new PodConfig(["file"]), workers, pleg, runtime, backoff: runtime.backoff, clock, logger });
  return { clock, runtime, workers, pleg, source, loop, status };
}

const settle = async (workers: PodWorkers) => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
  await workers.idle();
};

describe("SyncLoop", () => {
  test("its periodic tasks hold one timer each however long it runs (the list of timers grew by one every tick)", async () => {
    const clock = new FakeClock();
    const { logger } = memoryLogger();
    const runtime = new FakePodRuntime(clock);
    const workers = new PodWorkers({ syncer: new HostPodSyncer({ runtime, status: new LocalStatusStore(), clock, logger }), clock, logger, resyncIntervalMs: 60_000 });
    const pleg = new GenericPleg({ runtime, clock, logger });
    let passes = 0;
    const loop = new SyncLoop({
      sources: [new ManualSource()],
      podConfig: new PodConfig(["file"]),
      workers,
      pleg,
      runtime,
      backoff: runtime.backoff,
      clock,
      logger,
      housekeepingTasks: [() => void passes++],
    });
    loop.start();
    for (let i = 0; i < 1800; i++) clock.advance(2000); // one hour
    expect(passes).toBe(1800);
    expect(loop.pendingTimers()).toBe(2); // housekeeping and container garbage collection
    await loop[Symbol.asyncDispose]();
  });

  test("config adds and removes reach the workers", async () => {
    const { runtime, workers, source, loop } = await setup();
    loop.start();
    source.emit({ source: "file", pods: [pod("a"), pod("b")] });
    await settle(workers);
    expect([...runtime.pods.keys()].sort()).toEqual(["a", "b"]);
    source.emit({ source: "file", pods: [pod("b")] });
    await settle(workers);
    expect([...runtime.pods.keys()]).toEqual(["b"]);
    await loop[Symbol.asyncDispose]();
  });

  test("a status-only change (a reconcile) reaches the worker's pod without a sync; a spec change syncs", async () => {
    const { runtime, workers, source, loop } = await setup();
    loop.start();
    source.emit({ source: "file", pods: [pod("a")] });
    await settle(workers);
    const callsAfterAdd = runtime.calls.length;
    const withStatus: Pod = { ...pod("a"), status: { phase: "Running" } };
    source.emit({ source: "file", pods: [withStatus] });
    await settle(workers);
    expect(runtime.calls.length).toBe(callsAfterAdd);
    expect(workers.activePod("a")).toBe(withStatus);
    source.emit({ source: "file", pods: [{ ...withStatus, spec: { containers: [{ name: "c", image: "nginx" }] } }] });
    await settle(workers);
    expect(runtime.calls.length).toBeGreaterThan(callsAfterAdd);
    await loop[Symbol.asyncDispose]();
  });

  test("a PLEG event wakes the pod's worker, which restarts the dead container", async () => {
    const { clock, runtime, workers, source, loop } = await setup();
    loop.start();
    source.emit({ source: "file", pods: [pod("a")] });
    await settle(workers);
    clock.advance(1000); // relist sees the running container
    await settle(workers);
    runtime.exitContainer("a", "c", 2);
    clock.advance(1000);
    await settle(workers);
    expect(runtime.pods.get("a")!.containers[0]).toMatchObject({ state: "running", restartCount: 1 });
    await loop[Symbol.asyncDispose]();
  });

  test("a pod's PLEG events reach its worker with their newest runtime stamp, or none when one came from a relist", async () => {
    const { clock, runtime, workers, source } = await setup();
    let emit: (events: PlegEvent[]) => void = () => {};
    const pleg: Pleg = {
      start: (onEvents) => void (emit = onEvents),
      runtimePods: () => [],
      hasRelisted: () => false,
      healthy: () => ({ ok: true, message: "" }),
      [Symbol.asyncDispose]: async () => {},
    };
    const loop = new SyncLoop({ sources: [source], podConfig: new PodConfig(["file"]), workers, pleg, runtime, backoff: runtime.backoff, clock, logger: memoryLogger().logger });
    const wakes: [string, number | undefined][] = [];
    workers.sync = (uid, at) => void wakes.push([uid, at]);
    loop.start();
    emit([
      { uid: "a", type: "ContainerStarted", id: "s1", at: 5 },
      { uid: "a", type: "ContainerStarted", id: "c1", at: 9 },
      { uid: "b", type: "ContainerDied", id: "c2", at: 4 },
      { uid: "b", type: "ContainerRemoved", id: "c2" },
      { uid: "b", type: "ContainerChanged", id: "c3", at: 8 },
    ]);
    expect(wakes).toEqual([
      ["a", 9],
      ["b", undefined],
    ]);
    await loop[Symbol.asyncDispose]();
  });

  test("housekeeping removes runtime pods no source wants, but only once sources are ready", async () => {
    const { clock, runtime, workers, source, loop } = await setup();
    runtime.pods.set("orphan", { uid: "orphan", name: "x", namespace: "default", sandboxes: [], containers: [] });
    loop.start();
    await settle(workers);
    clock.advance(2000);
    await settle(workers);
    expect(runtime.pods.has("orphan")).toBe(true); // the file source has not reported yet
    source.emit({ source: "file", pods: [] });
    clock.advance(2000);
    await settle(workers);
    expect(runtime.pods.has("orphan")).toBe(false);
    await loop[Symbol.asyncDispose]();
  });

  test("a pod deleted at its source is killed, removed and deleted once, though its source changes it again after (grace 0) and forgets it; housekeeping then forgets the finished UID", async () => {
    const { clock, runtime, workers, source, loop, status } = await setup();
    const deletes: string[] = [];
    const original = status.delete.bind(status);
    status.delete = (uid) => (deletes.push(uid), original(uid));
    const count = (method: string) => runtime.calls.filter((c) => c.method === method && c.uid === "a").length;
    const deleting = (grace: number): Pod => ({ ...pod("a"), metadata: { ...pod("a").metadata, deletionTimestamp: "2026-01-01T00:00:00Z", deletionGracePeriodSeconds: grace } });
    loop.start();
    source.emit({ source: "file", pods: [pod("a")] });
    await settle(workers);
    source.emit({ source: "file", pods: [deleting(30)] });
    await settle(workers);
    expect(workers.stageOf("a")).toBe("finished");
    source.emit({ source: "file", pods: [deleting(0)] });
    await settle(workers);
    source.emit({ source: "file", pods: [] });
    await settle(workers);
    expect({ kills: count("killPod"), removals: count("removePod"), deletes: deletes.length }).toEqual({ kills: 1, removals: 1, deletes: 1 });
    clock.advance(2000);
    await settle(workers);
    expect(workers.stageOf("a")).toBeUndefined();
    await loop[Symbol.asyncDispose]();
  });

  test("a finished pod the runtime still lists is not killed again by the next housekeeping pass (that list can be older than the removal); a pass later it is an orphan", async () => {
    const { clock, runtime, workers, pleg, source, loop } = await setup();
    const kills = () => runtime.calls.filter((c) => c.method === "killPod" && c.uid === "a").length;
    loop.start();
    source.emit({ source: "file", pods: [pod("a")] });
    await settle(workers);
    source.emit({ source: "file", pods: [] });
    await settle(workers);
    expect(workers.stageOf("a")).toBe("finished");
    // The runtime lists it still (a relist that began before the removal, or a leftover).
    runtime.pods.set("a", { uid: "a", name: "p-a", namespace: "default", sandboxes: [], containers: [] });
    pleg.relistNow();
    await settle(workers);
    clock.advance(2000);
    await settle(workers);
    expect(kills()).toBe(1);
    expect(workers.stageOf("a")).toBeUndefined();
    clock.advance(2000);
    await settle(workers);
    expect(kills()).toBe(2);
    expect(runtime.pods.has("a")).toBe(false);
    await loop[Symbol.asyncDispose]();
  });
});
