import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pod } from "../pods/schema.ts";
import { readNumaNodes, type NumaNode, TopologyManager } from "../topologymanager/index.ts";
import { memoryLogger } from "../util/log.ts";
import { checkpointChecksum, decodeCheckpoint, encodeCheckpoint, type MemoryManagerState, type StateStore } from "./checkpoint.ts";
import { PolicyMemoryManager } from "./manager.ts";
import { MemoryManagerError, MemoryPolicy, podRequestedMemory } from "./policy.ts";
import { reservedMemoryConfigErrors } from "../config/reserved-memory.ts";
import { exactQuantity } from "../pods/resource-names.ts";
import { systemReservedMemory } from "./reserved.ts";

const Mi = 2 ** 20;
const Gi = 2 ** 30;

function memoryStore(initial?: string): StateStore & { text: string | undefined } {
  const s = {
    text: initial,
    read: () => s.text,
    write(t: string) {
      s.text = t;
    },
  };
  return s;
}

type C = { name: string; memory?: string; cpu?: string; restartPolicy?: string; burstable?: boolean };
const pod = (uid: string, containers: C[], init: C[] = []): Pod => {
  const spec = (c: C) => ({
    name: c.name,
    image: "busybox",
    ...(c.restartPolicy ? { restartPolicy: c.restartPolicy } : {}),
    ...(c.memory
      ? {
          resources: c.burstable
            ? { requests: { memory: c.memory } }
            : { limits: { cpu: c.cpu ?? "100m", memory: c.memory }, requests: { cpu: c.cpu ?? "100m", memory: c.memory } },
        }
      : {}),
  });
  return {
    metadata: { name: `pod-${uid}`, namespace: "default", uid },
    spec: { containers: containers.map(spec), ...(init.length ? { initContainers: init.map(spec) } : {}) },
  } as unknown as Pod;
};

const nodes = (...gib: number[]): NumaNode[] => gib.map((g, id) => ({ id, memoryBytes: g * Gi, hugePages: [], distances: [] }));
const staticPolicy = (o: { store?: StateStore; nodes?: NumaNode[]; reserved?: [number, number][] } = {}) =>
  new MemoryPolicy({
    policy: "Static",
    nodes: o.nodes ?? nodes(4),
    systemReserved: new Map((o.reserved ?? [[0, 512 * Mi]]).map(([id, bytes]) => [id, { memory: bytes }])),
    store: o.store ?? memoryStore(),
    statePath: "/var/lib/kubelet/memory_manager_state",
    podLevelResources: true,
  });

describe("NUMA nodes from sysfs", () => {
  test("memory, huge pages and distances of each node; no node directory is one node 0", () => {
    const root = mkdtempSync(join(tmpdir(), "numa-"));
    for (const [id, kb] of [
      [0, 4194304],
      [1, 2097152],
    ] as const) {
      const dir = join(root, "devices/system/node", `node${id}`);
      mkdirSync(join(dir, "hugepages/hugepages-2048kB"), { recursive: true });
      writeFileSync(join(dir, "meminfo"), `Node ${id} MemTotal:       ${kb} kB\nNode ${id} MemFree:        1000 kB\n`);
      writeFileSync(join(dir, "hugepages/hugepages-2048kB/nr_hugepages"), id === 0 ? "4\n" : "0\n");
      writeFileSync(join(dir, "distance"), id === 0 ? "10 21\n" : "21 10\n");
    }
    writeFileSync(join(root, "devices/system/node/possible"), "0-1\n");
    expect(readNumaNodes(root, 1)).toEqual([
      { id: 0, memoryBytes: 4 * Gi, hugePages: [{ pageSizeKiB: 2048, numPages: 4 }], distances: [10, 21] },
      { id: 1, memoryBytes: 2 * Gi, hugePages: [{ pageSizeKiB: 2048, numPages: 0 }], distances: [21, 10] },
    ]);
    expect(readNumaNodes(join(root, "nothing"), 123)).toEqual([{ id: 0, memoryBytes: 123, hugePages: [], distances: [10] }]);
  });
});

describe("the state file", () => {
  // upstream 1.34.12 state_checkpoint_test.go "Restore valid checkpoint": its checksum 4215593881.
  const upstream: MemoryManagerState = {
    policyName: "static",
    machineState: new Map([[0, { numberOfAssignments: 0, memoryMap: { memory: { total: 2048, systemReserved: 512, allocatable: 1536, reserved: 512, free: 1024 } }, cells: [] }]]),
    entries: { pod: { container1: [{ numaAffinity: [0], type: "memory", size: 512 }] } },
  };
  test("upstream's checksum and JSON", () => {
    expect(checkpointChecksum(upstream)).toBe(4215593881);
    const text = encodeCheckpoint(upstream);
    expect(text).toBe(
      '{"policyName":"static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},"checksum":4215593881}',
    );
    const back = decodeCheckpoint(text);
    expect(back.entries).toEqual(upstream.entries);
    expect(back.machineState).toEqual(upstream.machineState);
  });
  test("upstream's own file text reads back; a changed byte is corruption; null and [] are kept apart", () => {
    const file = `{
      "policyName":"static",
      "machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},
      "entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},
      "checksum": 4215593881
    }`;
    expect(decodeCheckpoint(file).checksum).toBe(4215593881);
    expect(() => decodeCheckpoint(file.replace('"size":512', '"size":513'))).toThrow("checkpoint is corrupted");
    expect(() => decodeCheckpoint(file.replace('"cells":[]', '"cells":null'))).toThrow("checkpoint is corrupted");
    expect(() => decodeCheckpoint("{")).toThrow("not JSON");
  });
  test("no entries: the field is left out, as Go's omitempty", () => {
    const text = encodeCheckpoint({ policyName: "None", machineState: new Map(), entries: {} });
    expect(text).toMatch(/^\{"policyName":"None","machineState":\{\},"checksum":\d+\}$/);
    expect(decodeCheckpoint(text).entries).toEqual({});
  });
});

describe("reservedMemory", () => {
  const q = (bytes: number, text: string) => ({ bytes, text });
  test("the list itself: supported types, non-zero, no duplicates (upstream's messages)", () => {
    expect(
      reservedMemoryConfigErrors([
        { numaNode: 0, limits: { memory: "1Gi", cpu: "1" } },
        { numaNode: 0, limits: { memory: "0" } },
      ]),
    ).toEqual([
      'invalid configuration: the limit type "cpu" for NUMA node 0 is not supported, only [memory hugepages-<HugePageSize>] is accepted',
      'invalid configuration: reserved memory may not be zero for NUMA node 0 and resource "memory"',
      'invalid configuration: the reserved memory has a duplicate value for NUMA node 0 and resource "memory"',
    ]);
  });
  test("must add up to kubeReserved + systemReserved + evictionHard, per type, on existing nodes", () => {
    const two = nodes(4, 4);
    const reserved = systemReservedMemory(two, { memory: { bytes: 1124 * Mi, binary: true } }, [
      { numaNode: 0, limits: { memory: q(1024 * Mi, "1Gi") } },
      { numaNode: 1, limits: { memory: q(100 * Mi, "100Mi") } },
    ]);
    expect([...reserved]).toEqual([
      [0, { memory: 1024 * Mi }],
      [1, { memory: 100 * Mi }],
    ]);
    expect(() => systemReservedMemory(two, { memory: { bytes: 1124 * Mi, binary: true } }, [{ numaNode: 0, limits: { memory: q(Gi, "1Gi") } }])).toThrow(
      'the total amount "1Gi" of type "memory" is not equal to the value "1124Mi" determined by Node Allocatable feature',
    );
    expect(() => systemReservedMemory(two, { memory: { bytes: Gi, binary: true } }, [{ numaNode: 2, limits: { memory: q(Gi, "1Gi") } }])).toThrow(
      "the reserved memory configuration references a NUMA node 2 that does not exist on this machine",
    );
    // Nothing reserved anywhere but Node Allocatable reserves memory: upstream's mismatch.
    expect(() => systemReservedMemory(two, { memory: { bytes: 100 * 1000 * 1000, binary: false } }, [])).toThrow(
      'the total amount "0" of type "memory" is not equal to the value "100M"',
    );
    expect(exactQuantity(1536 * Mi, true)).toBe("1536Mi");
    expect(exactQuantity(1234567, false)).toBe("1234567");
  });
  test("Static without reserved memory does not start (upstream's message)", () => {
    expect(() => staticPolicy({ reserved: [] })).toThrow(new MemoryManagerError("[memorymanager] you should specify the system reserved memory"));
  });
});

describe("the Static policy", () => {
  test("a Guaranteed container's memory is pinned to node 0 and written to the state file; others are not pinned", () => {
    const store = memoryStore();
    const p = staticPolicy({ store });
    const g = pod("g", [{ name: "app", memory: "1Gi" }]);
    expect(p.containerHints(g, g.spec.containers[0]!)).toEqual({ memory: [{ affinity: 1n, preferred: true }] });
    expect(p.allocate(g, g.spec.containers[0]!, undefined)).toBeUndefined();
    expect(p.numaNodesOf("g", "app")).toEqual([0]);
    const b = pod("b", [{ name: "app", memory: "1Gi", burstable: true }]);
    expect(p.containerHints(b, b.spec.containers[0]!)).toBeUndefined();
    expect(p.allocate(b, b.spec.containers[0]!, undefined)).toBeUndefined();
    expect(p.numaNodesOf("b", "app")).toEqual([]);
    const state = decodeCheckpoint(store.text!);
    expect(state.policyName).toBe("Static");
    expect(state.entries).toEqual({ g: { app: [{ numaAffinity: [0], type: "memory", size: Gi }] } });
    expect(state.machineState.get(0)).toEqual({
      numberOfAssignments: 1,
      memoryMap: { memory: { total: 4 * Gi, systemReserved: 512 * Mi, allocatable: 3584 * Mi, reserved: Gi, free: 2560 * Mi } },
      cells: [0],
    });
  });

  test("the pod resources API's view: a container's blocks and each node's allocatable memory per type", () => {
    const p = staticPolicy({ nodes: [{ id: 0, memoryBytes: 4 * Gi, hugePages: [{ pageSizeKiB: 2048, numPages: 512 }], distances: [] }] });
    const g = pod("g", [{ name: "app", memory: "1Gi" }]);
    p.allocate(g, g.spec.containers[0]!, undefined);
    expect(p.blocksOf("g", "app")).toEqual([{ numaAffinity: [0], type: "memory", size: Gi }]);
    expect(p.blocksOf("g", "other")).toEqual([]);
    // 4Gi − 512Mi reserved − 1Gi of huge pages; the huge pages themselves.
    expect(p.allocatableBlocks()).toEqual([
      { numaAffinity: [0], type: "hugepages-2Mi", size: Gi },
      { numaAffinity: [0], type: "memory", size: 2560 * Mi },
    ]);
  });

  test("not enough free memory on any node: upstream's error, and the state is unchanged", () => {
    const store = memoryStore();
    const p = staticPolicy({ store });
    const big = pod("big", [{ name: "app", memory: "3Gi" }]);
    expect(p.allocate(big, big.spec.containers[0]!, undefined)).toBeUndefined();
    const before = store.text;
    const more = pod("more", [{ name: "app", memory: "1Gi" }]);
    expect(p.containerHints(more, more.spec.containers[0]!)).toEqual({});
    expect(p.allocate(more, more.spec.containers[0]!, undefined)).toBe("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available");
    expect(store.text).toBe(before);
    // The pod goes: its memory is free again.
    expect(p.removeStale([])).toBe(true);
    expect(p.allocate(more, more.spec.containers[0]!, undefined)).toBeUndefined();
  });

  test("two nodes: the narrowest hint is preferred; a request larger than one node spans both and groups them", () => {
    const p = staticPolicy({ nodes: nodes(4, 4), reserved: [[0, 512 * Mi]] });
    const small = pod("s", [{ name: "app", memory: "1Gi" }]);
    expect(p.containerHints(small, small.spec.containers[0]!)).toEqual({
      memory: [
        { affinity: 1n, preferred: true },
        { affinity: 2n, preferred: true },
        { affinity: 3n, preferred: false },
      ],
    });
    const wide = pod("w", [{ name: "app", memory: "5Gi" }]);
    expect(p.containerHints(wide, wide.spec.containers[0]!)).toEqual({ memory: [{ affinity: 3n, preferred: true }] });
    expect(p.allocate(wide, wide.spec.containers[0]!, undefined)).toBeUndefined();
    expect(p.numaNodesOf("w", "app")).toEqual([0, 1]);
    expect(p.snapshot().machineState.get(1)!.cells).toEqual([0, 1]);
    // Node 0 is now grouped with node 1: it is not offered alone.
    expect(p.containerHints(small, small.spec.containers[0]!)).toEqual({ memory: [{ affinity: 3n, preferred: false }] });
  });

  test("a restart reads the state back; a state that does not match the host refuses to start", () => {
    const store = memoryStore();
    const p = staticPolicy({ store });
    const g = pod("g", [{ name: "app", memory: "1Gi" }]);
    p.allocate(g, g.spec.containers[0]!, undefined);
    const again = staticPolicy({ store });
    expect(again.numaNodesOf("g", "app")).toEqual([0]);
    expect(again.snapshot()).toEqual(p.snapshot());
    // Another amount reserved: the stored tables no longer add up.
    expect(() => staticPolicy({ store, reserved: [[0, 256 * Mi]] })).toThrow("[memorymanager] the expected machine state is different from the real one");
  });

  test("another policy in the state file refuses to start with upstream's message", () => {
    const store = memoryStore();
    staticPolicy({ store });
    expect(() => new MemoryPolicy({ policy: "None", nodes: nodes(4), systemReserved: new Map(), store, statePath: "/x/memory_manager_state", podLevelResources: true })).toThrow(
      'could not restore state from checkpoint: [memorymanager] configured policy "None" differs from state checkpoint policy "Static", please drain this node and delete the memory manager checkpoint file "/x/memory_manager_state" before restarting Kubelet',
    );
  });

  test("init containers hand their memory on; pod requests are upstream's max of init and sum of app containers", () => {
    const p = staticPolicy();
    const g = pod("g", [{ name: "app", memory: "1Gi" }], [{ name: "init", memory: "2Gi" }]);
    expect(podRequestedMemory(g)).toEqual(new Map([["memory", 2 * Gi]]));
    expect(p.allocate(g, g.spec.initContainers![0]!, undefined)).toBeUndefined();
    expect(p.allocate(g, g.spec.containers[0]!, undefined)).toBeUndefined();
    // The app container reused the init container's memory: only 2Gi is reserved, and the init block shrank to 1Gi.
    const s = p.snapshot();
    expect(s.machineState.get(0)!.memoryMap!["memory"]!.reserved).toBe(2 * Gi);
    expect(s.entries["g"]!["init"]).toEqual([{ numaAffinity: [0], type: "memory", size: Gi }]);
    // The app container is created: the finished init container's blocks go.
    p.containerStarted(g, g.spec.containers[0]!);
    expect(p.snapshot().entries["g"]).toEqual({ app: [{ numaAffinity: [0], type: "memory", size: Gi }] });
    expect(p.snapshot().machineState.get(0)!.memoryMap!["memory"]!.reserved).toBe(Gi);
  });
});

describe("with the topology manager", () => {
  const manager = (policy: "none" | "best-effort" | "restricted" | "single-numa-node", scope: "container" | "pod" = "container") => {
    const p = staticPolicy();
    const active: Pod[] = [];
    const mm = new PolicyMemoryManager({ policy: p, pods: { activePods: () => active }, sources: { allSourcesReady: () => true }, logger: memoryLogger().logger });
    const tm = new TopologyManager({
      policy,
      scope,
      options: { preferClosestNuma: false, maxAllowableNumaNodes: 8 },
      numa: { nodes: [0], distances: new Map() },
      providers: [mm],
      logger: memoryLogger().logger,
    });
    return { p, mm, tm, active };
  };

  test("admitted with node 0; cpuset.mems 0 at creation", () => {
    for (const policy of ["none", "best-effort", "restricted", "single-numa-node"] as const)
      for (const scope of ["container", "pod"] as const) {
        const { mm, tm } = manager(policy, scope);
        const g = pod("g", [{ name: "app", memory: "1Gi" }]);
        expect(tm.admit(g)).toEqual({ admit: true });
        expect(mm.cpusetMemsFor(g, g.spec.containers[0]!)).toBe("0");
      }
  });

  test("no memory left: the provider has no hint (upstream's empty map), so the merge admits and Allocate fails with upstream's messages", () => {
    const big = pod("big", [{ name: "app", memory: "3Gi" }]);
    const more = pod("more", [{ name: "app", memory: "1Gi" }]);
    for (const policy of ["best-effort", "restricted"] as const) {
      const { tm, active } = manager(policy);
      expect(tm.admit(big)).toEqual({ admit: true });
      active.push(big);
      expect(tm.admit(more)).toEqual({
        admit: false,
        reason: "UnexpectedAdmissionError",
        message: "Allocate failed due to [memorymanager] failed to find NUMA nodes to extend the current topology hint, which is unexpected",
      });
    }
    // none gives no hint; single-numa-node turns the all-nodes hint into none.
    for (const policy of ["none", "single-numa-node"] as const) {
      const { tm, active } = manager(policy);
      expect(tm.admit(big)).toEqual({ admit: true });
      active.push(big);
      expect(tm.admit(more)).toEqual({
        admit: false,
        reason: "UnexpectedAdmissionError",
        message: "Allocate failed due to [memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available, which is unexpected",
      });
    }
  });

  test("single-numa-node refuses memory that only fits across two nodes with TopologyAffinityError; restricted admits it", () => {
    for (const [policy, admitted] of [
      ["single-numa-node", false],
      ["restricted", true],
    ] as const) {
      const p = staticPolicy({ nodes: nodes(4, 4) });
      const mm = new PolicyMemoryManager({ policy: p, pods: { activePods: () => [] }, sources: { allSourcesReady: () => true }, logger: memoryLogger().logger });
      const tm = new TopologyManager({
        policy,
        scope: "container",
        options: { preferClosestNuma: false, maxAllowableNumaNodes: 8 },
        numa: { nodes: [0, 1], distances: new Map() },
        providers: [mm],
        logger: memoryLogger().logger,
      });
      const wide = pod("w", [{ name: "app", memory: "5Gi" }]);
      expect(tm.admit(wide)).toEqual(
        admitted ? { admit: true } : { admit: false, reason: "TopologyAffinityError", message: "Resources cannot be allocated with Topology locality" },
      );
      expect(mm.cpusetMemsFor(wide, wide.spec.containers[0]!)).toBe(admitted ? "0,1" : undefined);
    }
  });

  test("a pod no longer active gives its memory back at the next admission", () => {
    const { tm, active } = manager("restricted");
    const big = pod("big", [{ name: "app", memory: "3Gi" }]);
    expect(tm.admit(big)).toEqual({ admit: true });
    active.push(big);
    active.pop();
    expect(tm.admit(pod("more", [{ name: "app", memory: "3Gi" }]))).toEqual({ admit: true });
  });
});
