import { describe, expect, test } from "bun:test";
import type { EventType, ObjectRef } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { createEvictionManager, type EvictionManagerOptions, type EvictionPods } from "./manager.ts";
import { podUid } from "../pods/identity.ts";
import { EvictionConfigError } from "./thresholds.ts";
import { FakeStatsProvider, Gi, Mi, pod, podStats, summary, testConfig, type SummaryInput } from "./testing.ts";

const START = Date.parse("2026-01-01T00:00:00Z");
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * A node agent's view: active pods, evictions, GC, events; all recorded.
 * An evicted pod leaves the active pods; its stage stays `syncing` until
 * `cleanedUp` lists its name (its worker took the eviction).
 */
function harness(doc: Record<string, unknown>, pods: Pod[], first: SummaryInput, over: Partial<EvictionManagerOptions> = {}, podsOver: Partial<EvictionPods> = {}) {
  const clock = new FakeClock(START);
  const stats = new FakeStatsProvider(summary({ ...first, time: iso(clock.now()) }));
  const active = [...pods];
  const evictions: { pod: string; message: string; grace: number }[] = [];
  const cleanedUp = new Set<string>();
  const byUid = (uid: string) => pods.find((p) => podUid(p) === uid);
  const events: { object: string; type: EventType; reason: string; message: string }[] = [];
  const calls: string[] = [];
  const { logger, lines } = memoryLogger();
  const manager = createEvictionManager({
    config: testConfig({ enforceNodeAllocatable: [], ...doc }),
    stats,
    pods: {
      activePods: () => [...active],
      evict: (uid, message, grace) => {
        const p = byUid(uid)!;
        evictions.push({ pod: p.metadata.name ?? "", message, grace });
        active.splice(active.indexOf(p), 1);
        return true;
      },
      stageOf: (uid) => {
        const p = byUid(uid);
        if (!p) return undefined;
        return cleanedUp.has(p.metadata.name ?? "") ? "terminating" : "syncing";
      },
      ...podsOver,
    },
    reclaim: {
      containers: { garbageCollect: async () => void calls.push("containerGC") },
      images: {
        freeSpace: async () => {
          calls.push("imageGC");
          return 0;
        },
      },
    },
    clock,
    logger,
    recorder: { event: (o: ObjectRef, type: EventType, reason: string, message: string) => void events.push({ object: `${o.kind}/${o.name}`, type, reason, message }) },
    nodeName: "node-a",
    ...over,
  });
  /** Moves the clock and serves this summary (stamped now) from then on. */
  const at = (ms: number, s: SummaryInput) => {
    clock.advance(START + ms - clock.now());
    stats.set(summary({ ...s, time: iso(clock.now()) }));
  };
  return { manager, clock, stats, active, evictions, cleanedUp, events, calls, lines, at };
}

describe("memory pressure, step by step", () => {
  const guaranteed = pod({ name: "guaranteed", limits: { memory: "200Mi", cpu: "1" } });
  const hog = pod({ name: "hog", requests: { memory: "50Mi" } });
  const bestEffort = pod({ name: "best-effort" });
  const critical = pod({ name: "static", annotations: { "kubernetes.io/config.source": "file" } });
  const pods = [guaranteed, hog, bestEffort, critical];
  const usage = [podStats(guaranteed, { memory: 150 * Mi }), podStats(hog, { memory: 300 * Mi }), podStats(bestEffort, { memory: 90 * Mi }), podStats(critical, { memory: Gi })];
  const mem = (availableMi: number): SummaryInput => ({ memory: { available: availableMi * Mi, workingSet: 2 * Gi }, pods: usage });

  test("pressure appears → condition → one pod evicted, the right one → condition held for the transition period", async () => {
    const h = harness({ evictionHard: { "memory.available": "100Mi" }, evictionPressureTransitionPeriod: "5m" }, pods, mem(500));
    const { manager } = h;

    expect(await manager.synchronize()).toEqual([]);
    expect(manager.conditions()).toEqual({ memoryPressure: false, diskPressure: false, pidPressure: false });
    expect(manager.admitPod(bestEffort)).toEqual({ admit: true });

    h.at(10_000, mem(50));
    const evicted = await manager.synchronize();
    // All exceed their requests and share a priority; the static pod uses most but is critical, so the hog goes.
    expect(evicted.map((p) => p.metadata.name)).toEqual(["hog"]);
    expect(h.evictions).toEqual([
      {
        pod: "hog",
        grace: 1,
        message:
          "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. " +
          "Container app was using 300Mi, request is 50Mi, has larger consumption of memory. ",
      },
    ]);
    // Upstream's Evicted event annotations, logged with the eviction.
    expect(h.lines.some((l) => l.includes("evicting pod") && l.includes("offending_containers=app") && l.includes("starved_resource=memory"))).toBe(true);
    expect(h.events).toEqual([
      { object: "Node/node-a", type: "Warning", reason: "EvictionThresholdMet", message: "Attempting to reclaim memory" },
      { object: "Pod/hog", type: "Warning", reason: "Evicted", message: h.evictions[0]!.message },
    ]);
    expect(h.lines.some((l) => l.includes("cannot evict a critical pod") && l.includes("default/static"))).toBe(true);
    expect(manager.conditions().memoryPressure).toBe(true);
    expect(manager.taints()).toEqual([{ key: "node.kubernetes.io/memory-pressure", effect: "NoSchedule" }]);
    expect(manager.admitPod(bestEffort)).toEqual({ admit: false, reason: "Evicted", message: "The node had condition: [MemoryPressure]. " });
    expect(manager.admitPod(guaranteed)).toEqual({ admit: true });

    // Still short of memory on the next reading: one more pod, the next in the ranking.
    h.at(20_000, mem(80));
    expect((await manager.synchronize()).map((p) => p.metadata.name)).toEqual(["best-effort"]);

    // Recovered: nothing evicted, but the condition holds for 5m after pressure was last seen (at 20s).
    h.at(30_000, mem(800));
    expect(await manager.synchronize()).toEqual([]);
    expect(manager.conditions().memoryPressure).toBe(true);
    h.at(20_000 + 300_000 - 1, mem(800));
    await manager.synchronize();
    expect(manager.conditions().memoryPressure).toBe(true);
    h.at(20_000 + 300_000, mem(800));
    await manager.synchronize();
    expect(manager.conditions()).toEqual({ memoryPressure: false, diskPressure: false, pidPressure: false });
    expect(manager.taints()).toEqual([]);
    expect(manager.admitPod(bestEffort)).toEqual({ admit: true });
    expect(h.evictions.map((e) => e.pod)).toEqual(["hog", "best-effort"]);
  });

  test("the same stale reading does not evict twice", async () => {
    const h = harness({ evictionHard: { "memory.available": "100Mi" } }, pods, mem(50));
    expect(await h.manager.synchronize()).toHaveLength(1);
    h.clock.advance(10_000); // summary not refreshed: same timestamp
    expect(await h.manager.synchronize()).toHaveLength(0);
    expect(h.manager.conditions().memoryPressure).toBe(true);
  });
});

describe("disk pressure", () => {
  const big = pod({ name: "big" });
  const small = pod({ name: "small" });
  const usage = [podStats(big, { rootfs: 8 * Gi, logs: Gi }), podStats(small, { rootfs: Gi, logs: 0 })];
  const disk = (availableGi: number): SummaryInput => ({ nodefs: { available: availableGi * Gi, capacity: 100 * Gi }, pods: usage });
  const config = { evictionHard: { "nodefs.available": "10Gi" }, evictionMinimumReclaim: { "nodefs.available": "2Gi" } };

  test("node-level reclaim first (container GC, then image GC); nothing evicted when that was enough", async () => {
    const reclaimed: string[] = [];
    const h2 = harness(config, [big, small], disk(5), {
      reclaim: {
        containers: { garbageCollect: async () => void reclaimed.push("containerGC") },
        images: {
          freeSpace: async (bytes) => {
            reclaimed.push(`imageGC ${bytes}`);
            // Image GC frees 10Gi: the reading after reclaim is above 10Gi + the 2Gi minimum reclaim.
            h2.stats.set(summary({ ...disk(15), time: iso(h2.clock.now()) }));
            return 10 * Gi;
          },
        },
      },
    });
    expect(await h2.manager.synchronize()).toEqual([]);
    expect(reclaimed).toEqual(["containerGC", "imageGC Infinity"]);
    expect(h2.stats.calls).toBe(2); // once to observe, once after reclaim
    expect(h2.evictions).toEqual([]);
    expect(h2.events).toEqual([{ object: "Node/node-a", type: "Warning", reason: "EvictionThresholdMet", message: "Attempting to reclaim ephemeral-storage" }]);
    expect(h2.manager.conditions().diskPressure).toBe(true);
    expect(h2.manager.admitPod(pod({ name: "new", requests: { memory: "1Mi" } }))).toEqual({
      admit: false,
      reason: "Evicted",
      message: "The node had condition: [DiskPressure]. ",
    });
    expect(h2.lines.some((l) => l.includes("able to reduce resource pressure without evicting pods."))).toBe(true);
  });

  test("when reclaim is not enough (min reclaim not met), the biggest user is evicted at once", async () => {
    const h = harness(config, [small, big], disk(5), {
      reclaim: {
        images: {
          freeSpace: async () => {
            h.stats.set(summary({ ...disk(11), time: iso(h.clock.now()) })); // above 10Gi, below 10Gi + 2Gi
            return Gi;
          },
        },
      },
    });
    expect((await h.manager.synchronize()).map((p) => p.metadata.name)).toEqual(["big"]);
    expect(h.evictions[0]).toMatchObject({
      grace: 1,
      message:
        "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi. " +
        "Container app was using 9Gi, request is 0, has larger consumption of ephemeral-storage. ",
    });
  });

  test("with a dedicated image filesystem, nodefs pressure has nothing to reclaim at node level", async () => {
    const h = harness(config, [small, big], disk(5), { imageFs: { hasDedicatedImageFs: () => true } });
    await h.manager.synchronize();
    expect(h.calls).toEqual([]);
    // nodefs ranks by logs and volumes only: big's 1Gi of logs beats small's none
    expect(h.evictions.map((e) => e.pod)).toEqual(["big"]);
  });

  test("imagefs pressure reclaims too", async () => {
    const h = harness({ evictionHard: { "imagefs.available": "15%" } }, [small], { imagefs: { available: Gi, capacity: 100 * Gi }, pods: usage });
    await h.manager.synchronize();
    expect(h.calls).toEqual(["containerGC", "imageGC"]);
    expect(h.manager.conditions().diskPressure).toBe(true);
  });
});

describe("pid pressure", () => {
  test("evicts the pod with most processes among the lowest priority; PIDPressure rejects all but critical pods", async () => {
    const forker = pod({ name: "forker" });
    const quiet = pod({ name: "quiet" });
    const h = harness({ evictionHard: { "pid.available": "1000" } }, [quiet, forker], {
      pids: { max: 4096, running: 3600 },
      pods: [podStats(forker, { processes: 3000 }), podStats(quiet, { processes: 2 })],
    });
    expect((await h.manager.synchronize()).map((p) => p.metadata.name)).toEqual(["forker"]);
    expect(h.evictions[0]!.message).toBe("The node was low on resource: pids. Threshold quantity: 1k, available: 496. ");
    expect(h.manager.conditions().pidPressure).toBe(true);
    expect(h.manager.taints()).toEqual([{ key: "node.kubernetes.io/pid-pressure", effect: "NoSchedule" }]);
    expect(h.manager.admitPod(pod({ name: "burstable", requests: { memory: "1Mi" } })).admit).toBe(false);
    expect(h.manager.admitPod(pod({ name: "critical", priority: 2_000_001_000 })).admit).toBe(true);
  });
});

describe("soft thresholds", () => {
  const doc = (max: number) => ({
    evictionSoft: { "memory.available": "300Mi" },
    evictionSoftGracePeriod: { "memory.available": "1m" },
    evictionMaxPodGracePeriod: max,
  });
  const mem = (p: Pod): SummaryInput => ({ memory: { available: 200 * Mi, workingSet: Gi }, pods: [podStats(p, { memory: 100 * Mi })] });

  test.each([
    ["min(max, the pod's own)", 30, 10, 10],
    ["the maximum when it is smaller", 30, 60, 30],
    ["the maximum when the pod sets none", 30, undefined, 30],
    ["a negative maximum defers to the pod", -1, 45, 45],
  ] as const)("evict after the grace period, with %s", async (_name, max, own, want) => {
    const p = pod({ name: "p", ...(own !== undefined ? { terminationGracePeriodSeconds: own } : {}) });
    const h = harness(doc(max), [p], mem(p));
    expect(await h.manager.synchronize()).toEqual([]);
    expect(h.manager.conditions().memoryPressure).toBe(true);
    h.at(59_000, mem(p));
    expect(await h.manager.synchronize()).toEqual([]);
    h.at(60_000, mem(p));
    expect(await h.manager.synchronize()).toHaveLength(1);
    expect(h.evictions[0]!.grace).toBe(want);
  });
});

describe("local ephemeral storage limits", () => {
  test("every pod over a limit is evicted at once, before and regardless of thresholds", async () => {
    const a = pod({ name: "a", limits: { "ephemeral-storage": "1Mi" } });
    const b = pod({ name: "b", volumes: [{ name: "cache", emptyDir: { sizeLimit: "1Mi" } }] });
    const c = pod({ name: "c" });
    const h = harness({}, [a, b, c], {
      pods: [podStats(a, { rootfs: 2 * Mi, logs: 0 }), podStats(b, { volumes: [{ name: "cache", usedBytes: 2 * Mi }] }), podStats(c, { rootfs: Gi, logs: 0 })],
    });
    expect((await h.manager.synchronize()).map((p) => p.metadata.name)).toEqual(["a", "b"]);
    expect(h.evictions.map((e) => [e.pod, e.grace, e.message])).toEqual([
      ["a", 1, 'Container app exceeded its local ephemeral storage limit "1Mi". '],
      ["b", 1, 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". '],
    ]);
  });

  test("off with localStorageCapacityIsolation: false", async () => {
    const a = pod({ name: "a", limits: { "ephemeral-storage": "1Mi" } });
    const h = harness({ localStorageCapacityIsolation: false }, [a], { pods: [podStats(a, { rootfs: 2 * Mi, logs: 0 })] });
    expect(await h.manager.synchronize()).toEqual([]);
  });
});

describe("failures and edges", () => {
  const p = pod({ name: "p" });
  const q = pod({ name: "q" });
  const low: SummaryInput = { memory: { available: 10 * Mi, workingSet: Gi }, pods: [podStats(p, { memory: 500 * Mi }), podStats(q, { memory: 100 * Mi })] };
  const config = { evictionHard: { "memory.available": "100Mi" } };

  test("a summary that cannot be read evicts nothing and keeps the last conditions", async () => {
    const h = harness(config, [p], low);
    await h.manager.synchronize();
    h.stats.fail = new Error("cadvisor down");
    h.at(10_000, low);
    expect(await h.manager.synchronize()).toEqual([]);
    expect(h.manager.conditions().memoryPressure).toBe(true);
    expect(h.lines.some((l) => l.includes("failed to get summary stats") && l.includes("cadvisor down"))).toBe(true);
  });

  test("a pod that cannot be evicted (not running) passes the turn to the next in the ranking", async () => {
    const tried: string[] = [];
    const h = harness(config, [p, q], low, {}, { evict: (uid) => (tried.push(uid), uid !== podUid(p)) });
    expect((await h.manager.synchronize()).map((x) => x.metadata.name)).toEqual(["q"]);
    expect(tried).toEqual(["p", "q"]);
    expect(h.events.filter((e) => e.reason === "Evicted").map((e) => e.object)).toEqual(["Pod/q"]);
  });

  test("a failed kill is logged and still counts as this pass's eviction, as upstream", async () => {
    const h = harness(
      config,
      [p, q],
      low,
      {},
      {
        evict: () => {
          throw new Error("runtime gone");
        },
      },
    );
    expect((await h.manager.synchronize()).map((x) => x.metadata.name)).toEqual(["p"]);
    expect(h.lines.some((l) => l.includes("pod failed to evict") && l.includes("runtime gone"))).toBe(true);
  });

  test("no active pods: logged, nothing evicted", async () => {
    const h = harness(config, [], low);
    expect(await h.manager.synchronize()).toEqual([]);
    expect(h.lines.some((l) => l.includes("no pods are active to evict"))).toBe(true);
  });

  test("a threshold without an observation is logged once at info", async () => {
    const { logger, lines } = memoryLogger(0);
    const h = harness({ evictionHard: { "pid.available": "100" } }, [p], low, { logger });
    await h.manager.synchronize();
    h.at(10_000, low);
    await h.manager.synchronize();
    expect(lines.filter((l) => l.includes("no observation found for eviction signal") && l.includes("signal=pid.available"))).toHaveLength(1);
  });

  test("invalid eviction settings refuse to construct", () => {
    expect(() => harness({ evictionSoft: { "memory.available": "1Gi" } }, [], {})).toThrow(EvictionConfigError);
  });

  test("concurrent synchronize calls run one after another", async () => {
    const h = harness(config, [p, q], low);
    const [a, b] = await Promise.all([h.manager.synchronize(), h.manager.synchronize()]);
    expect(a.map((x) => x.metadata.name)).toEqual(["p"]);
    expect(b).toEqual([]); // same reading: stale, nothing more
  });
});

describe("the loop", () => {
  const flush = async () => {
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  };
  const p = pod({ name: "p" });
  const fine: SummaryInput = { memory: { available: Gi, workingSet: Gi }, pods: [podStats(p, { memory: Mi })] };

  test("synchronizes every period and leaves no timer behind after dispose", async () => {
    const h = harness({ evictionHard: { "memory.available": "100Mi" } }, [p], fine);
    h.manager.start(10_000);
    h.manager.start(10_000); // ignored
    await flush();
    expect(h.stats.calls).toBe(1);
    h.clock.advance(10_000);
    await flush();
    h.clock.advance(10_000);
    await flush();
    expect(h.stats.calls).toBe(3);
    await h.manager[Symbol.asyncDispose]();
    expect(h.clock.pendingTimers()).toBe(0);
    h.clock.advance(60_000);
    await flush();
    expect(h.stats.calls).toBe(3);
  });

  test("after an eviction it waits for the pod to be cleaned up (polling every second), then goes again at once", async () => {
    const low: SummaryInput = { memory: { available: 10 * Mi, workingSet: Gi }, pods: [podStats(p, { memory: Mi })] };
    const h = harness({ evictionHard: { "memory.available": "100Mi" } }, [p], low);
    h.manager.start(10_000);
    await flush();
    expect(h.evictions).toHaveLength(1);
    h.clock.advance(1_000);
    await flush();
    expect(h.stats.calls).toBe(1);
    h.cleanedUp.add("p"); // its worker took the eviction: no longer syncing
    h.clock.advance(1_000);
    await flush();
    expect(h.stats.calls).toBe(2); // 2s after the eviction, not 10s
    await h.manager[Symbol.asyncDispose]();
    expect(h.clock.pendingTimers()).toBe(0);
  });
});

test("the API is the one the agent wires (checked by tsc)", async () => {
  type Wired = {
    start(periodMs: number): void;
    synchronize(): Promise<Pod[]>;
    conditions(): { memoryPressure: boolean; diskPressure: boolean; pidPressure: boolean };
    taints(): { key: string; effect: "NoSchedule" }[];
    admitPod(pod: Pod): { admit: true } | { admit: false; reason: "Evicted"; message: string };
    [Symbol.asyncDispose](): Promise<void>;
  };
  const pods: EvictionPods = { activePods: () => [], evict: () => true, stageOf: () => undefined };
  const m: Wired = createEvictionManager({
    config: testConfig(),
    stats: new FakeStatsProvider(summary({})),
    pods,
    reclaim: {},
    clock: new FakeClock(),
    logger: memoryLogger().logger,
  });
  expect(await m.synchronize()).toEqual([]);
  await m[Symbol.asyncDispose]();
});
