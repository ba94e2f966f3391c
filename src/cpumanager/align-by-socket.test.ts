/**
 * align-by-socket: upstream's cases of TestGetPodTopologyHintsWithPolicyOptions
 * (topology_hints_test.go), the alignBySocketOptionTestCases of
 * TestStaticPolicyAdd (policy_static_test.go) and the hardware part of
 * TestValidateStaticPolicyOptions (policy_options_test.go), v1.34.12, on
 * upstream's topoDualSocketMultiNumaPerSocketHT (2 sockets of 2 NUMA nodes:
 * node 0 = 0-9,40-49, 1 = 10-19,50-59 on socket 0; 2 = 20-29,60-69,
 * 3 = 30-39,70-79 on socket 1).
 */
import { describe, expect, test } from "bun:test";
import topologies from "./testdata/upstream-topologies.json";
import type { Pod } from "../pods/schema.ts";
import { maskOf, type TopologyHint } from "../topologymanager/index.ts";
import { type CpuSet, difference, formatCpuSet, parseCpuSet, union } from "../util/cpuset.ts";
import { encodeCheckpoint } from "./checkpoint.ts";
import { memoryStateStore } from "./fake.ts";
import { CpuManagerError, CpuPolicy } from "./policy.ts";
import type { CpuTopology } from "./topology.ts";

const topology: CpuTopology = {
  cpus: topologies.topoDualSocketMultiNumaPerSocketHT.map(([cpu, core, socket, numa]) => ({ cpu: cpu!, core: core!, socket: socket!, numa: numa! })),
};
const pod = (cpu: string): Pod =>
  ({
    metadata: { name: "fakePod", namespace: "default", uid: "p" },
    spec: { containers: [{ name: "c", image: "busybox", resources: { limits: { cpu, memory: "64Mi" }, requests: { cpu, memory: "64Mi" } } }] },
  }) as unknown as Pod;

/** A static policy whose free CPUs are `free`: `reserved` is reserved, every other CPU belongs to another pod. */
function policy(alignBySocket: boolean, free: string, reserved: string): CpuPolicy {
  const shared = union(parseCpuSet(free), parseCpuSet(reserved));
  const others: CpuSet = difference(parseCpuSet("0-79"), shared);
  const store = memoryStateStore(encodeCheckpoint({ policyName: "static", defaultCpuSet: shared, entries: { other: { x: others } } }));
  return new CpuPolicy({
    policy: "static",
    fullPcpusOnly: false,
    distributeCpusAcrossNuma: false,
    alignBySocket,
    topology,
    reservedSystemCpus: parseCpuSet(reserved),
    reservedMilliCpu: 0,
    store,
    statePath: "/state",
  });
}
const h = (nodes: number[], preferred: boolean): TopologyHint => ({ affinity: maskOf(nodes), preferred });

describe("hints (upstream TestGetPodTopologyHintsWithPolicyOptions)", () => {
  // CPU 79 is reserved here only because this policy needs one; it is not free and changes no hint.
  const some = [h([0, 1], false), h([0, 2], false), h([0, 3], false), h([0, 1, 2], false), h([0, 1, 3], false), h([0, 2, 3], false), h([0, 1, 2, 3], false)];

  test("AlignBySocket:false, preferred hints do not contain socket aligned hints", () => {
    expect(policy(false, "2,3,11", "79").podHints(pod("2"))).toEqual({ cpu: [h([0], true), ...some] });
  });

  test("AlignBySocket:true, preferred hints contain socket aligned hints", () => {
    expect(policy(true, "2,3,11", "79").podHints(pod("2"))).toEqual({ cpu: [h([0], true), h([0, 1], true), ...some.slice(1)] });
  });

  test("AlignBySocket:true, preferred hints are spread across sockets since 2 sockets are required", () => {
    expect(policy(true, "0-28,40-57", "79").podHints(pod("41"))).toEqual({ cpu: [h([0, 1, 2], true), h([0, 1, 2, 3], true)] });
    expect(policy(false, "0-28,40-57", "79").podHints(pod("41"))).toEqual({ cpu: [h([0, 1, 2], true), h([0, 1, 2, 3], false)] });
  });
});

describe("allocation (upstream TestStaticPolicyAdd alignBySocketOptionTestCases)", () => {
  const allocate = (alignBySocket: boolean) => {
    const p = policy(alignBySocket, "2,11,21,22", "0");
    const q = pod("2");
    expect(p.allocate(q, q.spec.containers[0]!, maskOf([0, 2]))).toBeUndefined();
    return formatCpuSet(p.exclusiveCpus("p", "c"));
  };
  test("align by socket: true, CPUs within the same socket as the hint's NUMA nodes are part of the allocation", () => {
    expect(allocate(true)).toBe("2,11");
  });
  test("align by socket: false, CPUs are taken strictly from the hint's NUMA nodes", () => {
    expect(allocate(false)).toBe("2,21");
  });
});

test("align-by-socket refuses a host with more sockets than NUMA nodes (upstream ValidateStaticPolicyOptions)", () => {
  // upstream fakeTopoMultiSocketDualSocketPerNumaHT's shape: 4 sockets, 2 NUMA nodes
  const cpus = Array.from({ length: 16 }, (_, cpu) => ({ cpu, core: cpu % 8, socket: Math.floor((cpu % 8) / 2), numa: Math.floor((cpu % 8) / 4) }));
  const make = (alignBySocket: boolean) => () =>
    new CpuPolicy({
      policy: "static",
      fullPcpusOnly: false,
      distributeCpusAcrossNuma: false,
      alignBySocket,
      topology: { cpus },
      reservedSystemCpus: [0],
      reservedMilliCpu: 0,
      store: memoryStateStore(),
      statePath: "/state",
    });
  expect(make(true)).toThrow(new CpuManagerError("Align by socket is not compatible with hardware where number of sockets are more than number of NUMA"));
  expect(make(false)).not.toThrow();
});
