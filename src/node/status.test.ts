import { expect, test } from "bun:test";
import { loadConfig, type KubeletConfiguration } from "../config/index.ts";
import type { MachineInfo } from "./machine.ts";
import { allocatableAmounts, enforcedAllocatable, nodeStatus, podCapacity, resources } from "./status.ts";

const machine: MachineInfo = {
  machineID: "m",
  systemUUID: "s",
  bootID: "b",
  kernelVersion: "6",
  osImage: "Debian",
  architecture: "amd64",
  cpuCores: 2,
  memoryBytes: 8 * 2 ** 30,
  ephemeralStorageBytes: 100 * 2 ** 30,
  hostname: "n1",
  hugePages: [],
};
const config = (argv: string[]): KubeletConfiguration => {
  const r = loadConfig(argv, { readFile: () => "", hostname: () => "n1" });
  if (r.kind !== "run") throw new Error(JSON.stringify(r));
  return r.config.kubelet;
};

test("podsPerCore caps the pod capacity at cores × podsPerCore, reported and admitted against", () => {
  const k = config(["--pods-per-core=10"]);
  expect(podCapacity(machine, k)).toBe(20);
  expect(resources(machine, k).capacity.pods).toBe("20");
  expect(resources(machine, k).allocatable.pods).toBe("20");
  expect(allocatableAmounts(machine, k).pods).toBe(20);
});

test("maxPods stays the cap when it is lower, and alone when podsPerCore is 0", () => {
  expect(podCapacity(machine, config(["--pods-per-core=100", "--max-pods=50"]))).toBe(50);
  expect(podCapacity(machine, config(["--max-pods=50"]))).toBe(50);
});

test("the kubepods limit (enforceNodeAllocatable pods) is capacity − reserved, without the hard eviction threshold the Node's allocatable takes off", () => {
  const k = config(["--kube-reserved=cpu=100m,memory=16Mi", "--system-reserved=cpu=1,memory=100Mi", "--eviction-hard=memory.available<600Mi"]);
  const MI = 2 ** 20;
  expect(enforcedAllocatable(machine, k)).toEqual({ cpu: 900, memory: 8 * 2 ** 30 - 116 * MI });
  expect(allocatableAmounts(machine, k).memory).toBe(8 * 2 ** 30 - 116 * MI - 600 * MI);
});

test("one hugepages-<size> per pool (nr_hugepages × page size); allocatable = pool − reserved; memory allocatable loses every pre-allocated page", () => {
  const MI = 2 ** 20;
  const withPools: MachineInfo = {
    ...machine,
    hugePages: [
      { pageSizeKiB: 2048, numPages: 16 },
      { pageSizeKiB: 1048576, numPages: 0 },
    ],
  };
  const k = config(["--system-reserved=memory=100Mi,hugepages-2Mi=4Mi", "--kube-reserved=hugepages-2Mi=2Mi", "--eviction-hard=memory.available<100Mi"]);
  const r = resources(withPools, k);
  expect(r.capacity).toMatchObject({ "hugepages-2Mi": "32Mi", "hugepages-1Gi": "0", memory: `${(8 * 2 ** 30) / 1024}Ki` });
  expect(r.allocatable).toMatchObject({ "hugepages-2Mi": "26Mi", "hugepages-1Gi": "0", memory: `${(8 * 2 ** 30 - 200 * MI - 32 * MI) / 1024}Ki` });
  expect(Object.keys(r.capacity).filter((n) => n.startsWith("hugepages-"))).toEqual(["hugepages-2Mi", "hugepages-1Gi"]);
  expect(allocatableAmounts(withPools, k).hugePages).toEqual({ "hugepages-2Mi": 26 * MI, "hugepages-1Gi": 0 });
  // The kubepods memory limit keeps the pools' memory (upstream: capacity − reserved; hugetlb limits bound the pages).
  expect(enforcedAllocatable(withPools, k).memory).toBe(8 * 2 ** 30 - 100 * MI);
});

test("a host without huge page pools reports no hugepages resource at all (no made-up hugepages-2Mi)", () => {
  const r = resources(machine, config([]));
  expect(Object.keys(r.capacity).some((n) => n.startsWith("hugepages-"))).toBe(false);
  expect(Object.keys(r.allocatable).some((n) => n.startsWith("hugepages-"))).toBe(false);
});

test("a size the registered Node lists and this machine has no pool of any more is deleted from the status (reconcileHugePageResource)", () => {
  const status = nodeStatus({
    id: { nodeName: "n1", nodeIPs: [], nodeLabels: {}, kubeletVersion: "v" },
    machine: { ...machine, hugePages: [{ pageSizeKiB: 2048, numPages: 1 }] },
    config: config([]),
    health: { errors: [], runtimeVersion: "x" },
    images: [],
    internalIP: undefined,
    previousConditions: [],
    now: "2026-01-01T00:00:00Z",
    registered: { status: { capacity: { cpu: "2", "hugepages-2Mi": "0", "hugepages-1Gi": "2Gi" } } },
  }) as { capacity: Record<string, string | null>; allocatable: Record<string, string | null> };
  expect(status.capacity["hugepages-1Gi"]).toBeNull();
  expect(status.allocatable["hugepages-1Gi"]).toBeNull();
  expect(status.capacity["hugepages-2Mi"]).toBe("2Mi");
});
