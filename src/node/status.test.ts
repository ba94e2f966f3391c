import { expect, test } from "bun:test";
import { loadConfig, type KubeletConfiguration } from "../config/index.ts";
import type { MachineInfo } from "./machine.ts";
import { allocatableAmounts, enforcedAllocatable, podCapacity, resources } from "./status.ts";

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
