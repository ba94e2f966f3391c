import { expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { NodeContainerResources } from "./container-values.ts";
import type { SwapHost } from "./swap.ts";

const GI = 2 ** 30;
const v2: SwapHost = { cgroupVersion: "v2", swapController: true, memoryCapacityBytes: 8 * GI, swapCapacityBytes: 2 * GI };
const guaranteed = {
  metadata: { uid: "u", name: "p", namespace: "default" },
  spec: { containers: [{ name: "app", image: "i", resources: { requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "1", memory: "1Gi" } } }] },
} as Pod;
const app = guaranteed.spec.containers[0]!;
const values = { memoryCapacityBytes: 8 * GI, cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, oomGroup: true, hugePageSizes: ["2MB"] };

test("one container's CRI values: CPU and memory from the spec, cpusets from the CPU and memory managers, the unified files of OOM group and swap in one map", () => {
  const r = new NodeContainerResources({
    values,
    swapBehavior: "LimitedSwap",
    swapHost: v2,
    cpus: { cpusetFor: (_p, c) => (c.name === "app" ? "1" : undefined) },
    memory: { cpusetMemsFor: () => "0" },
  });
  expect(r.resourcesOf(guaranteed, app)).toEqual({
    cpuShares: 1024,
    cpuQuota: 100_000,
    cpuPeriod: 100_000,
    memoryLimitInBytes: GI,
    oomScoreAdj: -997,
    cpusetCpus: "1",
    cpusetMems: "0",
    // A Guaranteed container gets no swap (upstream's LimitedSwap is for Burstable ones): memory.swap.max 0.
    unified: { "memory.oom.group": "1", "memory.swap.max": "0" },
    // Every huge page size of the host: 0 when the container asks for none.
    hugepageLimits: [{ pageSize: "2MB", limit: 0 }],
  });
});

test("without exclusive CPUs, pinned memory or unified files, none of those fields is set", () => {
  const r = new NodeContainerResources({
    values: { ...values, oomGroup: false },
    swapBehavior: "NoSwap",
    swapHost: { ...v2, swapController: false },
    cpus: { cpusetFor: () => undefined },
    memory: { cpusetMemsFor: () => undefined },
  });
  expect(Object.keys(r.resourcesOf(guaranteed, app)).sort()).toEqual(["cpuPeriod", "cpuQuota", "cpuShares", "hugepageLimits", "memoryLimitInBytes", "oomScoreAdj"]);
});
