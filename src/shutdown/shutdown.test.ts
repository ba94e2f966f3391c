import { describe, expect, test } from "bun:test";
import { transition } from "../pods/lifecycle.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { groupPods, NodeShutdownManager, shutdownGroups } from "./index.ts";
import { LogindShutdownTrigger, type LogindInhibitor } from "./logind.ts";
import { SYSTEM_CRITICAL_PRIORITY } from "../pods/source.ts";

const pod = (name: string, priority?: number, terminationGracePeriodSeconds?: number): Pod => ({
  metadata: { name, namespace: "default", uid: name },
  spec: {
    containers: [{ name: "c", image: "i" }],
    ...(priority !== undefined ? { priority } : {}),
    ...(terminationGracePeriodSeconds !== undefined ? { terminationGracePeriodSeconds } : {}),
  },
});
const flush = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe("graceful node shutdown", () => {
  test("groups from shutdownGracePeriod and shutdownGracePeriodCriticalPods (upstream migrateConfig), or by pod priority", () => {
    const base = { shutdownGracePeriodByPodPriority: [] };
    expect(shutdownGroups({ ...base, shutdownGracePeriod: 30_000, shutdownGracePeriodCriticalPods: 10_000 })).toEqual([
      { priority: 0, gracePeriodSeconds: 20 },
      { priority: SYSTEM_CRITICAL_PRIORITY, gracePeriodSeconds: 10 },
    ]);
    expect(shutdownGroups({ ...base, shutdownGracePeriod: 0, shutdownGracePeriodCriticalPods: 0 })).toEqual([]);
    expect(
      shutdownGroups({
        shutdownGracePeriod: 0,
        shutdownGracePeriodCriticalPods: 0,
        shutdownGracePeriodByPodPriority: [
          { priority: 100000, shutdownGracePeriodSeconds: 5 },
          { priority: 0, shutdownGracePeriodSeconds: 10 },
        ],
      }),
    ).toEqual([
      { priority: 0, gracePeriodSeconds: 10 },
      { priority: 100000, gracePeriodSeconds: 5 },
    ]);
    const groups = shutdownGroups({ ...base, shutdownGracePeriod: 30_000, shutdownGracePeriodCriticalPods: 10_000 });
    const grouped = groupPods([pod("web"), pod("low", -5), pod("dns", 2_000_000_000), pod("node", 2_000_001_000), pod("high", 1_000_000_000)], groups);
    expect(grouped.map((g) => g.pods.map((p) => p.metadata.name))).toEqual([
      ["web", "low", "high"],
      ["dns", "node"],
    ]);
  });

  test("regular pods stop first within their budget, then critical ones; a shorter own grace period wins; nothing new is admitted", async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const stops: { uid: string; grace: number; at: number }[] = [];
    const stopped = new Set<string>();
    const events: string[] = [];
    let statusUpdates = 0;
    const pods = [pod("web", 0, 60), pod("quick", 0, 3), pod("dns", 2_000_000_000, 30)];
    const manager = new NodeShutdownManager({
      groups: shutdownGroups({ shutdownGracePeriod: 30_000, shutdownGracePeriodCriticalPods: 10_000, shutdownGracePeriodByPodPriority: [] }),
      pods: {
        activePods: () => pods.filter((p) => !stopped.has(p.metadata.uid!)),
        shutdownPod: (uid, grace) => (stops.push({ uid, grace, at: clock.now() - start }), true),
        stageOf: (uid) => (stopped.has(uid) ? "terminated" : "syncing"),
      },
      clock,
      logger: memoryLogger().logger,
      recorder: { event: (ref, type, reason, message) => void events.push(`${ref.kind}/${ref.name} ${type} ${reason} ${message}`) },
      nodeName: "n1",
      nodeStatus: { request: () => void statusUpdates++ },
    });
    expect(manager.status()).toBeUndefined();
    expect(manager.admit()).toEqual({ admit: true });
    let done = false;
    void manager.shutdown().then(() => (done = true));
    await flush();
    expect(manager.status()).toBe("node is shutting down");
    expect(manager.admit()).toEqual({ admit: false, reason: "NodeShutdown", message: "Pod was rejected as the node is shutting down." });
    expect(events).toEqual(["Node/n1 Normal Shutdown Shutdown manager detected shutdown event"]);
    expect(statusUpdates).toBe(1);
    expect(stops).toEqual([
      { uid: "web", grace: 20, at: 0 },
      { uid: "quick", grace: 3, at: 0 },
    ]);
    // quick stops at 3s; web ignores its SIGTERM and runs until the group's 20 s are over.
    clock.advance(3000);
    stopped.add("quick");
    for (let t = 0; t < 160; t++) {
      clock.advance(100);
      await flush();
    }
    expect(stops.map((s) => s.uid)).toEqual(["web", "quick"]); // still waiting for the regular group
    for (let t = 0; t < 10; t++) {
      clock.advance(100);
      await flush();
    }
    expect(stops.at(-1)).toEqual({ uid: "dns", grace: 10, at: 20_000 });
    clock.advance(1000);
    stopped.add("dns");
    for (let t = 0; t < 3; t++) {
      clock.advance(100);
      await flush();
    }
    expect(done).toBe(true);
    expect(manager.shutdown()).toBe(manager.shutdown()); // idempotent
  });

  test("an empty group is not waited for", async () => {
    const clock = new FakeClock();
    const stops: string[] = [];
    const manager = new NodeShutdownManager({
      groups: shutdownGroups({ shutdownGracePeriod: 30_000, shutdownGracePeriodCriticalPods: 10_000, shutdownGracePeriodByPodPriority: [] }),
      pods: {
        activePods: () => [pod("dns", 2_000_000_000)],
        shutdownPod: (uid) => (stops.push(uid), true),
        stageOf: () => (stops.length > 0 ? "terminated" : "syncing"),
      },
      clock,
      logger: memoryLogger().logger,
      nodeName: "n1",
    });
    await manager.shutdown();
    expect(stops).toEqual(["dns"]);
  });

  test("lifecycle: a node shutdown takes a syncing pod to terminating for good", () => {
    expect(transition({ stage: "syncing" }, { type: "nodeShutdown", gracePeriodSeconds: 4 })).toEqual({
      stage: "terminating",
      gracePeriodSeconds: 4,
      reason: "nodeShutdown",
      deleted: false,
    });
    expect(transition({ stage: "terminated", deleted: false }, { type: "nodeShutdown", gracePeriodSeconds: 4 })).toEqual({ stage: "terminated", deleted: false });
  });
});

describe("logind trigger", () => {
  class FakeInhibitor implements LogindInhibitor {
    calls: string[] = [];
    onPrepare: (active: boolean) => void = () => {};
    constructor(private readonly delayMs: number) {}
    async inhibitDelayMaxMs() {
      return this.delayMs;
    }
    async acquire() {
      this.calls.push("acquire");
    }
    async release() {
      this.calls.push("release");
    }
    watch(onPrepare: (active: boolean) => void) {
      this.calls.push("watch");
      this.onPrepare = onPrepare;
    }
    async close() {
      this.calls.push("close");
    }
  }

  test("takes the delay lock at start; PrepareForShutdown(true) stops the pods, then releases it; (false) takes it again and cancels", async () => {
    const inhibitor = new FakeInhibitor(5_000);
    const { logger, lines } = memoryLogger();
    const trigger = new LogindShutdownTrigger({ inhibitor, gracePeriodMs: 30_000, logger });
    let finish: () => void = () => {};
    const stopped: string[] = [];
    trigger.onShutdown({
      shutdown: () => new Promise<void>((resolve) => (stopped.push("stopping"), (finish = resolve))),
      cancel: () => void stopped.push("cancelled"),
    });
    await flush();
    expect(inhibitor.calls).toEqual(["watch", "acquire"]);
    expect(lines.some((l) => l.includes("InhibitDelayMaxSec is less than the shutdown grace period"))).toBe(true);
    inhibitor.onPrepare(true);
    inhibitor.onPrepare(true); // a repeat while stopping changes nothing
    await flush();
    expect(stopped).toEqual(["stopping"]);
    expect(inhibitor.calls).toEqual(["watch", "acquire"]); // held until the pods are stopped
    finish();
    await flush();
    expect(inhibitor.calls).toEqual(["watch", "acquire", "release"]);
    inhibitor.onPrepare(false);
    await flush();
    expect(stopped).toEqual(["stopping", "cancelled"]);
    expect(inhibitor.calls).toEqual(["watch", "acquire", "release", "acquire"]);
    await trigger.close();
    expect(inhibitor.calls.at(-1)).toBe("close");
  });

  test("cancel admits pods again and lets a later shutdown run anew", async () => {
    const clock = new FakeClock();
    const stops: string[] = [];
    const manager = new NodeShutdownManager({
      groups: [{ priority: 0, gracePeriodSeconds: 1 }],
      pods: { activePods: () => [pod("web")], shutdownPod: (uid) => (stops.push(uid), true), stageOf: () => "terminated" },
      clock,
      logger: memoryLogger().logger,
      nodeName: "n1",
    });
    await manager.shutdown();
    expect(manager.admit().admit).toBe(false);
    manager.cancel();
    expect(manager.admit()).toEqual({ admit: true });
    expect(manager.status()).toBeUndefined();
    await manager.shutdown();
    expect(stops).toEqual(["web", "web"]);
  });
});
