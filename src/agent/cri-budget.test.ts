/**
 * The CRI calls a pod costs on the real pod path (PodWorkers, HostPodSyncer,
 * CriPodRuntime, GenericPleg over the fake CRI, on a fake clock): how often
 * one pod is read (a filtered ListPodSandbox opens each read) while it
 * starts, at each resync and while it is deleted (issue #24).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeCri } from "../cri/fake.ts";
import { PodStatusCache } from "../pleg/cache.ts";
import { type PlegEvent, podWakes } from "../pleg/diff.ts";
import { EventedPleg } from "../pleg/evented.ts";
import { GenericPleg } from "../pleg/generic.ts";
import type { Pod } from "../pods/schema.ts";
import { CriPodRuntime } from "../runtime/manager.ts";
import { testRuntimeOptions, testNode } from "../runtime/testing.ts";
import { LocalStatusStore } from "../status/index.ts";
import { PodHost } from "../sync/pod-host.ts";
import { HostPodSyncer } from "../sync/pod-syncer.ts";
import { PodWorkers } from "../sync/podworkers.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";

const BUSYBOX = "localhost/bunlet/busybox:1.0";
const RESYNC_MS = 60_000;
const logs = mkdtempSync(join(tmpdir(), "cri-budget-"));
afterEach(() => rmSync(logs, { recursive: true, force: true }));

const podNamed = (i: number, containers = ["app"]): Pod => ({
  metadata: { name: `web-${i}`, namespace: "default", uid: `uid-${i}` },
  spec: { restartPolicy: "Always", terminationGracePeriodSeconds: 1, containers: containers.map((name) => ({ name, image: BUSYBOX })) },
});

/** One relist through the fake clock, and its wakes handled. */
async function relistNow(s: ReturnType<typeof setup>): Promise<void> {
  const relists = s.cri.callsOf("listPodSandbox").length;
  s.clock.advance(1000);
  for (let i = 0; i < 200 && s.cri.callsOf("listPodSandbox").length === relists; i++) await Bun.sleep(0);
  for (let i = 0; i < 50; i++) await Bun.sleep(0);
}

/** Adds a two-container pod whose first container is created and started while the second's create waits for `releaseSecond`. */
async function addWithSecondCreateHeld(s: ReturnType<typeof setup>, p: ReturnType<typeof podNamed>) {
  s.cri.holdNext("createContainer")();
  const releaseSecond = s.cri.holdNext("createContainer");
  s.workers.add(p);
  const first = () => s.cri.callsOf("startContainer")[0]?.[0] as string | undefined;
  for (let i = 0; i < 500 && !first(); i++) await Bun.sleep(0);
  return { first, releaseSecond };
}

/** `evented`: the agent's default PLEG, over a runtime that does not stream events (containerd 1.6) or one that does. */
function setup(evented?: "unsupported" | "streaming") {
  const clock = new FakeClock();
  const cri = new FakeCri({ clock, images: [BUSYBOX] });
  const { logger } = memoryLogger();
  const node = testNode({ podLogsDir: logs, podsCgroupParent: "/test" });
  const runtime = new CriPodRuntime(testRuntimeOptions({ cri, clock, logger, node, host: PodHost.forNode(node) }));
  const status = new LocalStatusStore();
  const cache = new PodStatusCache();
  const syncer = new HostPodSyncer({ runtime, status, clock, logger });
  const workers = new PodWorkers({ syncer, clock, logger, resyncIntervalMs: RESYNC_MS, cache });
  if (evented === "unsupported") cri.failNext("containerEvents", "Unimplemented", "unknown method GetContainerEvents");
  const pleg = evented ? new EventedPleg({ runtime, cri, clock, logger, cache }) : new GenericPleg({ runtime, clock, logger, cache });
  // As the sync loop: one wake per pod and relist.
  pleg.start((events: PlegEvent[]) => {
    for (const [uid, { at, listed }] of podWakes(events)) workers.sync(uid, at, listed);
  });
  /** Reads of one pod: each opens with a ListPodSandbox filtered by its UID (a relist's is unfiltered). */
  const readsOf = (uid: string) =>
    cri.callsOf("listPodSandbox").filter((args) => (args[0] as { labelSelector?: Record<string, string> } | undefined)?.labelSelector?.["io.kubernetes.pod.uid"] === uid).length;
  const settle = async () => {
    for (let i = 0; i < 50; i++) await Bun.sleep(0);
    await workers.idle();
    for (let i = 0; i < 20; i++) await Bun.sleep(0);
  };
  /** Moves the clock on in 100 ms ticks, letting the relists and the steps run. */
  const run = async (ms: number) => {
    for (let t = 0; t < ms; t += 100) {
      clock.advance(100);
      await settle();
    }
  };
  const dispose = async () => {
    await pleg[Symbol.asyncDispose]();
    await workers[Symbol.asyncDispose]();
  };
  return { clock, cri, workers, status, readsOf, settle, run, dispose };
}

describe("CRI calls per pod (issue #24)", () => {
  test("a start reads the pod twice (before and after acting): the relist that sees what the step made wakes nothing", async () => {
    const s = setup();
    await s.run(1000); // the first relist: nothing yet
    const pods = Array.from({ length: 10 }, (_, i) => podNamed(i));
    for (const p of pods) s.workers.add(p);
    await s.settle();
    await s.run(3000); // relists that see the sandboxes and containers
    for (const p of pods) {
      expect(s.status.get(p.metadata.uid!)).toMatchObject({ phase: "Running" });
      expect(s.readsOf(p.metadata.uid!)).toBe(2);
    }
    // Nothing else reads it while it runs (the resyncs plan from the cache).
    await s.run(RESYNC_MS);
    for (const p of pods) expect(s.readsOf(p.metadata.uid!)).toBe(2);
    await s.dispose();
  });

  test("resyncs of a running pod plan from the PLEG's cache, which the relists confirmed: no read", async () => {
    const s = setup();
    await s.run(1000);
    const p = podNamed(1);
    s.workers.add(p);
    await s.run(3000);
    const started = s.readsOf("uid-1");
    const creates = s.cri.callsOf("createContainer").length;
    // Three resyncs (syncFrequency x [1, 1.5) each).
    await s.run(3 * 1.5 * RESYNC_MS);
    expect(s.readsOf("uid-1") - started).toBe(0);
    expect(s.cri.callsOf("createContainer").length).toBe(creates);
    expect(s.status.get("uid-1")).toMatchObject({ phase: "Running" });
    await s.dispose();
  });

  test("resyncs plan from the cache under the default evented PLEG too: its relists confirm the entries, every second without a stream (containerd 1.6), every 300 s with one", async () => {
    for (const mode of ["unsupported", "streaming"] as const) {
      const s = setup(mode);
      await s.run(1000);
      s.workers.add(podNamed(1));
      await s.run(3000);
      if (mode === "streaming") await s.run(300_000); // the first backup relist after the start's reads
      const started = s.readsOf("uid-1");
      await s.run(3 * 1.5 * RESYNC_MS);
      expect({ mode, reads: s.readsOf("uid-1") - started }).toEqual({ mode, reads: 0 });
      expect(s.status.get("uid-1")).toMatchObject({ phase: "Running" });
      await s.dispose();
    }
  });

  test("with the event stream, an exit after the entry was confirmed wakes the pod, which reads and restarts it", async () => {
    const s = setup("streaming");
    await s.run(1000);
    s.workers.add(podNamed(1));
    await s.run(3000);
    await s.run(300_000); // the backup relist confirms the entry
    const first = s.cri.callsOf("startContainer")[0]?.[0] as string;
    s.cri.exitContainer(first, 1);
    await s.run(2000);
    expect(s.cri.callsOf("startContainer").length).toBe(2);
    await s.dispose();
  });

  test("a container that exited between steps (the relist's event, not covered) is read and restarted, not planned from the cache", async () => {
    const s = setup();
    await s.run(1000);
    const p = podNamed(1);
    s.workers.add(p);
    await s.run(3000);
    const first = s.cri.callsOf("startContainer")[0]?.[0] as string;
    const before = s.readsOf("uid-1");
    s.cri.exitContainer(first, 1);
    await s.run(2000);
    expect(s.cri.callsOf("startContainer").length).toBe(2);
    expect(s.readsOf("uid-1") - before).toBeGreaterThanOrEqual(1);
    expect(s.status.get("uid-1")).toMatchObject({ phase: "Running" });
    await s.dispose();
  });

  test("a relist during the start step that sees the sandbox before the container wakes nothing once the step's read shows both: still 2 reads", async () => {
    const s = setup();
    await s.run(1000);
    const p = podNamed(1);
    const release = s.cri.holdNext("createContainer");
    s.workers.add(p);
    for (let i = 0; i < 500 && !s.cri.callsOf("runPodSandbox").length; i++) await Bun.sleep(0);
    // The step waits in CreateContainer; a relist lists its sandbox alone.
    await relistNow(s);
    release();
    await s.settle();
    await s.run(3000);
    expect(s.status.get("uid-1")).toMatchObject({ phase: "Running" });
    expect(s.cri.callsOf("createContainer").length).toBe(1);
    expect(s.readsOf("uid-1")).toBe(2);
    await s.dispose();
  });

  test("a relist during a step that sees a change the step's read does not show runs the pod again", async () => {
    const s = setup();
    await s.run(1000);
    const p = podNamed(1, ["first", "second"]);
    const { first, releaseSecond } = await addWithSecondCreateHeld(s, p);
    // A relist while the step waits lists "first" running; it then exits, before the step's read.
    await relistNow(s);
    s.cri.exitContainer(first()!, 1);
    releaseSecond();
    await s.settle();
    await s.run(2000);
    expect(s.cri.callsOf("startContainer").length).toBe(3);
    await s.dispose();
  });

  test("a delete reads the pod before and after its kill and before its removal", async () => {
    const s = setup();
    const p = podNamed(1);
    s.workers.add(p);
    await s.run(2000);
    const before = s.readsOf("uid-1");
    s.workers.remove("uid-1");
    await s.run(3000);
    expect(s.workers.has("uid-1")).toBe(false);
    expect(s.cri.counts()).toMatchObject({ sandboxes: 0, containers: 0 });
    expect(s.readsOf("uid-1") - before).toBe(3);
    await s.dispose();
  });

  test("a pull that fails after the sandbox was made: ErrImagePull, then ImagePullBackOff within a second, though the relist's event for the sandbox is covered", async () => {
    const s = setup();
    await s.run(1000);
    const p = podNamed(1);
    p.spec.containers[0]!.image = "localhost/bunlet/missing:1.0";
    s.cri.failNext("pullImage", "NotFound", "not found");
    s.workers.add(p);
    await s.settle();
    const waiting = () => (s.status.get("uid-1") as { containerStatuses?: { state?: { waiting?: { reason?: string } } }[] }).containerStatuses?.[0]?.state?.waiting?.reason;
    expect(waiting()).toBe("ErrImagePull");
    await s.run(1000);
    expect(waiting()).toBe("ImagePullBackOff");
    await s.dispose();
  });

  test("a sidecar started by one step: the app starts within a second, though the relist's event for the sidecar is covered", async () => {
    const s = setup();
    await s.run(1000);
    const p = podNamed(1);
    p.spec.initContainers = [{ name: "sidecar", image: BUSYBOX, restartPolicy: "Always" }];
    s.workers.add(p);
    await s.settle();
    const started = () => s.cri.callsOf("createContainer").map((args) => (args[1] as { metadata?: { name?: string } }).metadata?.name);
    expect(started()).toEqual(["sidecar"]);
    await s.run(1000);
    expect(started()).toEqual(["sidecar", "app"]);
    await s.dispose();
  });

  test("a container that exits while a step runs is restarted within a second, though the relist's event for it is covered by the step's read", async () => {
    const s = setup();
    await s.run(1000);
    const p = podNamed(1, ["first", "second"]);
    // The first create goes through; the second waits until the first container has exited.
    const { first, releaseSecond } = await addWithSecondCreateHeld(s, p);
    expect(first()).toBeDefined();
    s.cri.exitContainer(first()!, 1);
    releaseSecond();
    await s.settle();
    await s.run(2000);
    // Restarted: a second start of "first" (restart count 1), long before the resync.
    const starts = s.cri.callsOf("startContainer").length;
    expect(starts).toBe(3);
    expect(s.status.get("uid-1")).toMatchObject({ phase: "Running" });
    await s.dispose();
  });
});
