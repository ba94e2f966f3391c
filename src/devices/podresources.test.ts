import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { posix } from "node:path";
import type { Pod } from "../pods/schema.ts";
import { memoryLogger } from "../util/log.ts";
import { PodResourcesListerClient } from "./gen/podresources/api.client.ts";
import { dialUnix, type UnixServer } from "../util/grpc.ts";
import { type ComputeResourcesSource, containerDevices, NO_COMPUTE_RESOURCES, podResources, servePodResources } from "./podresources.ts";

let dir: string;
let server: UnixServer | undefined;
afterEach(() => {
  server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const pod = {
  metadata: { name: "gpu", namespace: "ml", uid: "u1" },
  spec: {
    initContainers: [
      { name: "setup", image: "x" },
      { name: "side", image: "x", restartPolicy: "Always" },
    ],
    containers: [{ name: "main", image: "x" }],
  },
} as unknown as Pod;

async function client(getEnabled = true, compute: ComputeResourcesSource = NO_COMPUTE_RESOURCES) {
  dir = mkdtempSync(posix.join(tmpdir(), "podres-"));
  server = await servePodResources({
    dir,
    devices: {
      devicesInUse: () => new Map([["u1", new Map([["main", new Map([["example.com/dev", [{ id: "d2", numa: [] }]]])]])]]),
      allocatableDevices: () =>
        new Map([
          [
            "example.com/dev",
            [
              { id: "d1", numa: [] },
              { id: "d2", numa: [] },
            ],
          ],
        ]),
    },
    compute,
    pods: { activePods: () => [pod] },
    getEnabled,
    logger: memoryLogger().logger,
  });
  return new PodResourcesListerClient(dialUnix(posix.join(dir, "kubelet.sock")));
}

const main = { name: "main", devices: [{ resourceName: "example.com/dev", deviceIds: ["d2"] }], cpuIds: [], memory: [], dynamicResources: [] };
const side = { name: "side", devices: [], cpuIds: [], memory: [], dynamicResources: [] };

test("List, Get and GetAllocatableResources report devices per container over the v1 API", async () => {
  const c = await client();
  expect(await c.list({}).response).toEqual({ podResources: [{ name: "gpu", namespace: "ml", containers: [side, main] }] });
  expect(await c.get({ podName: "gpu", podNamespace: "ml" }).response).toEqual({ podResources: { name: "gpu", namespace: "ml", containers: [side, main] } });
  expect(await c.get({ podName: "nope", podNamespace: "ml" }).response.catch((e: Error) => e.message)).toBe("pod nope in namespace ml not found");
  // One entry per device, as upstream lists them.
  expect(await c.getAllocatableResources({}).response).toEqual({
    devices: [
      { resourceName: "example.com/dev", deviceIds: ["d1"] },
      { resourceName: "example.com/dev", deviceIds: ["d2"] },
    ],
    cpuIds: [],
    memory: [],
  });
});

test("exclusive CPUs and NUMA-pinned memory of the CPU and memory managers, per container, and what the node can give", async () => {
  const c = await client(true, {
    cpus: { exclusiveCpus: (uid, name) => (uid === "u1" && name === "main" ? [2, 3] : []), allocatableCpus: () => [1, 2, 3] },
    memory: {
      memoryOf: (uid, name) => (uid === "u1" && name === "main" ? [{ type: "memory", size: 64 * 2 ** 20, numaAffinity: [0] }] : []),
      allocatableMemory: () => [
        { type: "hugepages-2Mi", size: 2 ** 30, numaAffinity: [0] },
        { type: "memory", size: 3 * 2 ** 30, numaAffinity: [0] },
        { type: "memory", size: 0, numaAffinity: null },
      ],
    },
  });
  const pinned = { ...main, cpuIds: [2n, 3n], memory: [{ memoryType: "memory", size: 67108864n, topology: { nodes: [{ iD: 0n }] } }] };
  expect(await c.list({}).response).toEqual({ podResources: [{ name: "gpu", namespace: "ml", containers: [side, pinned] }] });
  expect(await c.getAllocatableResources({}).response).toEqual({
    devices: [
      { resourceName: "example.com/dev", deviceIds: ["d1"] },
      { resourceName: "example.com/dev", deviceIds: ["d2"] },
    ],
    cpuIds: [1n, 2n, 3n],
    memory: [
      { memoryType: "hugepages-2Mi", size: 1073741824n, topology: { nodes: [{ iD: 0n }] } },
      { memoryType: "memory", size: 3221225472n, topology: { nodes: [{ iD: 0n }] } },
      { memoryType: "memory", size: 0n, topology: { nodes: [] } },
    ],
  });
});

test("each device's NUMA nodes as upstream's ContainerDevices.topology: one entry per device and node, none without topology", () => {
  const devices = new Map([
    [
      "example.com/nic",
      [
        { id: "n1", numa: [1, 0] },
        { id: "n2", numa: [] },
      ],
    ],
    ["example.com/dev", [{ id: "d2", numa: [1] }]],
  ]);
  const node = (id: number) => ({ nodes: [{ iD: BigInt(id) }] });
  expect(containerDevices(devices)).toEqual([
    { resourceName: "example.com/dev", deviceIds: ["d2"], topology: node(1) },
    { resourceName: "example.com/nic", deviceIds: ["n1"], topology: node(0) },
    { resourceName: "example.com/nic", deviceIds: ["n1"], topology: node(1) },
    { resourceName: "example.com/nic", deviceIds: ["n2"] },
  ]);
  expect(podResources(pod, new Map([["main", devices]])).containers[1]?.devices).toEqual(containerDevices(devices));
});

test("Get is refused when the KubeletPodResourcesGet gate is off, as upstream", async () => {
  const c = await client(false);
  expect(await c.get({ podName: "gpu", podNamespace: "ml" }).response.catch((e: Error) => e.message)).toBe("PodResources API Get method disabled");
});
