// The cost of one pass at the agent's pod limit: 110 pods with two
// containers each, their cgroups in a fake v1 tree (5 hierarchies), a log
// file per container, against FakeCri (so the figure is the agent's own
// work: parsing, file reads, statfs, building the Summary; a real runtime
// adds its gRPC time on top). The time is printed, never asserted: speed is
// the benchmarks' business, and this machine is shared.
import { afterAll, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { createStatsCollector } from "./collector.ts";
import { FakeNode, StatsFakeCri } from "./testutil.ts";
import type { PodRef } from "../pods/identity.ts";

const node = new FakeNode("v1");
afterAll(() => node.cleanup());

test("one pass covers 110 pods of two containers each, logs included, without a warning (its time is printed)", async () => {
  const clock = new FakeClock();
  const cri = new StatsFakeCri(clock, node.layerDir);
  const pods: PodRef[] = [];
  for (let i = 0; i < 110; i++) {
    const pod = { uid: `uid-${i}`, name: `pod-${i}`, namespace: "bench" };
    pods.push(pod);
    const ids = await cri.addPod(pod, ["app", "sidecar"]);
    node.addPodCgroup(pod.uid);
    ids.containers.forEach((id, j) => cri.numbers.set(id, { cpuNs: (i + 1) * 1e9 + j, workingSetBytes: 1 << 20, layerBytes: 4096 }));
    node.writeLog(pod, "app", "0.log", 2000);
    node.writeLog(pod, "sidecar", "0.log", 200);
  }
  const { logger, lines } = memoryLogger(3);
  const collector = createStatsCollector({
    nodeName: "bench",
    rootDir: node.rootDir,
    fsRoot: node.fsRoot,
    cgroupRoot: "/kubepods",
    podCgroups: { podCgroupPath: node.podCgroup },
    cri,
    pods: { activePods: () => pods.map((metadata) => ({ metadata })) },
    podLogsDir: node.podLogsDir,
    clock,
    logger,
  });
  const times: number[] = [];
  for (let i = 0; i < 6; i++) {
    clock.advance(10_000);
    const t0 = performance.now();
    await collector.collect();
    times.push(performance.now() - t0);
  }
  await collector[Symbol.asyncDispose]();
  const s = await collector.summary();
  expect(s.pods).toHaveLength(110);
  expect(s.pods.every((p) => p.containers.length === 2 && p.cpu?.usageNanoCores === 0 && p.containers.every((c) => c.logs?.usedBytes))).toBe(true);
  expect(lines.filter((l) => !l.startsWith("I"))).toEqual([]);
  const warm = times.slice(1).sort((a, b) => a - b);
  const median = warm[Math.floor(warm.length / 2)]!;
  console.log(`stats pass, 110 pods x 2 containers: first ${times[0]!.toFixed(1)} ms, warm median ${median.toFixed(1)} ms, max ${warm.at(-1)!.toFixed(1)} ms`);
}, 60_000);
