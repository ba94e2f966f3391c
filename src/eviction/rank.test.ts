import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import type { PodStats } from "../stats/types.ts";
import { podStatsLookup } from "./observations.ts";
import { rankDiskPressure, rankFuncFor, rankMemoryPressure, rankPidPressure } from "./rank.ts";
import { Gi, Mi, pod, podStats, summary } from "./testing.ts";

const names = (pods: Pod[]) => pods.map((p) => p.metadata.name);
const lookup = (stats: PodStats[]) => podStatsLookup(summary({ pods: stats }));

describe("memory (upstream rankMemoryPressure)", () => {
  test("pods over their requests first (upstream TestOrderedByExceedsRequestMemory)", () => {
    const below = pod({ name: "below", requests: { memory: "100Mi" } });
    const exceeds = pod({ name: "exceeds", requests: { memory: "100Mi" } });
    const stats = lookup([podStats(below, { memory: 99 * Mi }), podStats(exceeds, { memory: 101 * Mi })]);
    expect(names(rankMemoryPressure([below, exceeds], stats))).toEqual(["exceeds", "below"]);
  });

  test("then lower priority first, then more usage above requests", () => {
    // All four exceed their requests; priority decides before usage.
    const high = pod({ name: "high", priority: 100, requests: { memory: "10Mi" } });
    const lowSmall = pod({ name: "low-small", priority: -10, requests: { memory: "10Mi" } });
    const lowBig = pod({ name: "low-big", priority: -10, requests: { memory: "100Mi" } });
    const none = pod({ name: "default-priority" });
    const under = pod({ name: "under-requests", priority: -100, requests: { memory: "1Gi" } });
    const stats = lookup([
      podStats(high, { memory: 900 * Mi }),
      podStats(lowSmall, { memory: 50 * Mi }), // 40Mi above
      podStats(lowBig, { memory: 300 * Mi }), // 200Mi above
      podStats(none, { memory: 20 * Mi }),
      podStats(under, { memory: 500 * Mi }),
    ]);
    expect(names(rankMemoryPressure([under, high, lowSmall, none, lowBig], stats))).toEqual(["low-big", "low-small", "default-priority", "high", "under-requests"]);
  });

  test("limits stand in for missing requests, as API defaulting does", () => {
    const guaranteed = pod({ name: "guaranteed", limits: { memory: "200Mi" } });
    const bestEffort = pod({ name: "best-effort" });
    const stats = lookup([podStats(guaranteed, { memory: 150 * Mi }), podStats(bestEffort, { memory: 10 * Mi })]);
    expect(names(rankMemoryPressure([guaranteed, bestEffort], stats))).toEqual(["best-effort", "guaranteed"]);
  });

  test("pods without stats rank first", () => {
    const known = pod({ name: "known", priority: -5 });
    const unknown = pod({ name: "unknown", priority: 1000 });
    expect(names(rankMemoryPressure([known, unknown], lookup([podStats(known, { memory: Gi })])))).toEqual(["unknown", "known"]);
  });

  test("ties keep the order the pods came in", () => {
    const a = pod({ name: "a" });
    const b = pod({ name: "b" });
    const stats = lookup([podStats(a, { memory: Mi }), podStats(b, { memory: Mi })]);
    expect(names(rankMemoryPressure([b, a], stats))).toEqual(["b", "a"]);
  });
});

describe("disk (upstream rankDiskPressureFunc)", () => {
  test("over ephemeral-storage requests first, then priority, then usage above requests (rootfs + logs + local volumes)", () => {
    const requested = pod({ name: "requested", requests: { "ephemeral-storage": "1Gi" } });
    const logs = pod({ name: "logs" });
    const volume = pod({
      name: "volume",
      volumes: [
        { name: "scratch", emptyDir: {} },
        { name: "cfg", secret: {} },
      ],
    });
    const stats = lookup([
      podStats(requested, { rootfs: 500 * Mi, logs: 100 * Mi }),
      podStats(logs, { rootfs: 10 * Mi, logs: 200 * Mi }), // 210Mi
      // 10Mi + the emptyDir's 300Mi; the secret volume is not local storage
      podStats(volume, {
        rootfs: 10 * Mi,
        logs: 0,
        volumes: [
          { name: "scratch", usedBytes: 300 * Mi },
          { name: "cfg", usedBytes: 5 * Gi },
        ],
      }),
    ]);
    expect(names(rankDiskPressure(["root", "logs", "localVolumeSource"], "ephemeral-storage")([requested, logs, volume], stats))).toEqual(["volume", "logs", "requested"]);
  });

  test("with a dedicated image filesystem, nodefs weighs logs and volumes, imagefs weighs writable layers", () => {
    const layers = pod({ name: "layers" });
    const logs = pod({ name: "logs" });
    const stats = lookup([podStats(layers, { rootfs: Gi, logs: Mi }), podStats(logs, { rootfs: Mi, logs: 100 * Mi })]);
    expect(names(rankFuncFor("nodefs.available", true)([layers, logs], stats))).toEqual(["logs", "layers"]);
    expect(names(rankFuncFor("imagefs.available", true)([logs, layers], stats))).toEqual(["layers", "logs"]);
    expect(names(rankFuncFor("nodefs.available", false)([logs, layers], stats))).toEqual(["layers", "logs"]);
  });

  test("inodes rank by inodes used", () => {
    const few = pod({ name: "few" });
    const many = pod({ name: "many" });
    const stats = lookup([podStats(few, { rootfs: Gi, rootfsInodes: 10, logs: 0 }), podStats(many, { rootfs: Mi, rootfsInodes: 5000, logs: 0 })]);
    expect(names(rankFuncFor("nodefs.inodesFree", false)([few, many], stats))).toEqual(["many", "few"]);
  });
});

describe("pids (upstream rankPIDPressure)", () => {
  test("lower priority first, then more processes", () => {
    const important = pod({ name: "important", priority: 10 });
    const busy = pod({ name: "busy" });
    const quiet = pod({ name: "quiet" });
    const stats = lookup([podStats(important, { processes: 900 }), podStats(busy, { processes: 300 }), podStats(quiet, { processes: 3 })]);
    expect(names(rankPidPressure([important, quiet, busy], stats))).toEqual(["busy", "quiet", "important"]);
  });
});
