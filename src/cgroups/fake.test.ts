import { expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { FakePodCgroups, createPodCgroups, isCgroupError, type PodCgroups } from "./index.ts";
import { fakeCgroupTree } from "./fake-fs.ts";
import { memoryLogger } from "../util/log.ts";

const pod = (uid: string, limits?: Record<string, string>): Pod => ({
  metadata: { name: uid, uid },
  spec: { containers: [{ name: "c", image: "i", ...(limits ? { resources: { limits } } : {}) }] },
});

test("FakePodCgroups conforms and names paths like the real writer", () => {
  const tree = fakeCgroupTree("v2");
  try {
    const real = createPodCgroups({
      cgroupRoot: "/r",
      fsRoot: tree.root,
      fs: tree.fs,
      podPidsLimit: -1,
      cpuCFSQuota: true,
      cpuCFSQuotaPeriodMs: 100,
      logger: memoryLogger().logger,
    });
    const fake = new FakePodCgroups({ cgroupRoot: "/r" }) satisfies PodCgroups;
    for (const p of [pod("a"), pod("b", { cpu: "1", memory: "1Gi" }), pod("c", { cpu: "1" })]) {
      expect(fake.podCgroupPath(p)).toBe(real.podCgroupPath(p));
    }
  } finally {
    tree.cleanup();
  }
});

test("FakePodCgroups keeps state, records calls, fails on demand", async () => {
  const fake = new FakePodCgroups();
  await fake.setupNode({ allocatable: { cpuMilli: 1000, memoryBytes: 1 }, enforce: true });
  expect(await fake.ensurePod(pod("a", { cpu: "1", memory: "1Gi" }))).toBe("/kubepods/poda");
  expect(fake.pods.get("a")?.config.memoryLimit).toBe(2 ** 30);
  await fake.updateQos([pod("b", { cpu: "500m" })]);
  expect(fake.qos?.burstable.cpuShares).toBe(512);
  fake.busy.add("a");
  expect(await fake.removePod("a").catch((e: unknown) => isCgroupError(e, "Busy"))).toBe(true);
  fake.busy.delete("a");
  fake.failNext("listPodUids", new Error("boom"));
  await expect(fake.listPodUids()).rejects.toThrow("boom");
  await fake.removePod("a");
  expect(await fake.listPodUids()).toEqual([]);
  expect(fake.calls.map((c) => c.method)).toEqual(["setupNode", "ensurePod", "updateQos", "removePod", "listPodUids", "removePod", "listPodUids"]);
});
