import { expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { admitUnderPressure } from "./admit.ts";
import { pod } from "./testing.ts";
import type { NodeConditionType } from "./types.ts";
import { isCriticalPod } from "../pods/source.ts";

const bestEffort = pod({ name: "be" });
const burstable = pod({ name: "burst", requests: { memory: "10Mi" } });
const staticPod = pod({ name: "static", annotations: { "kubernetes.io/config.source": "file" } });
const apiPod = pod({ name: "api", annotations: { "kubernetes.io/config.source": "api" } });
const mirror = pod({ name: "mirror", annotations: { "kubernetes.io/config.mirror": "abc" } });
const clusterCritical = pod({ name: "crit", priority: 2_000_000_000 });
const tolerant = pod({ name: "tolerant", tolerations: [{ key: "node.kubernetes.io/memory-pressure", operator: "Exists", effect: "NoSchedule" }] });
const tolerantAll = pod({ name: "tolerant-all", tolerations: [{ operator: "Exists" }] });
const tolerantDisk = pod({ name: "tolerant-disk", tolerations: [{ key: "node.kubernetes.io/disk-pressure", operator: "Exists" }] });

const rejected = (conditions: string) => ({ admit: false, reason: "Evicted", message: `The node had condition: [${conditions}]. ` });

test.each([
  ["no pressure admits anything", bestEffort, [], { admit: true }],
  ["memory pressure admits a Burstable pod", burstable, ["MemoryPressure"], { admit: true }],
  ["memory pressure rejects a BestEffort pod", bestEffort, ["MemoryPressure"], rejected("MemoryPressure")],
  ["…unless it tolerates the memory-pressure taint", tolerant, ["MemoryPressure"], { admit: true }],
  ["…or tolerates every taint", tolerantAll, ["MemoryPressure"], { admit: true }],
  ["…a disk-pressure toleration does not help", tolerantDisk, ["MemoryPressure"], rejected("MemoryPressure")],
  ["disk pressure rejects even a Burstable pod", burstable, ["DiskPressure"], rejected("DiskPressure")],
  ["memory and PID pressure reject a Burstable pod", burstable, ["MemoryPressure", "PIDPressure"], rejected("MemoryPressure PIDPressure")],
  ["critical (static) pods are admitted under any pressure", staticPod, ["DiskPressure", "PIDPressure"], { admit: true }],
  ["critical (priority) pods are admitted under any pressure", clusterCritical, ["MemoryPressure"], { admit: true }],
] as [string, Pod, NodeConditionType[], unknown][])("%s", (_name, p, conditions, want) => {
  expect(admitUnderPressure(p, conditions)).toEqual(want as never);
});

test("critical pods are static, mirror, or at system-cluster-critical priority and above (upstream IsCriticalPod)", () => {
  expect([staticPod, mirror, clusterCritical].every(isCriticalPod)).toBe(true);
  expect([apiPod, bestEffort, pod({ name: "high", priority: 1_999_999_999 })].some(isCriticalPod)).toBe(false);
});
