/**
 * distribute-cpus-across-numa: upstream's TestTakeByTopologyNUMADistributed
 * table (cpu_assignment_test.go, v1.34.12: commonTakeByTopologyTestCases,
 * commonTakeByTopologyExtendedTestCases and its own cases) on upstream's fake
 * topologies (testdata/upstream-topologies.json, extracted from policy_test.go
 * as [cpu, core, socket, numa]), and the option through the static policy.
 */
import { describe, expect, test } from "bun:test";
import topologies from "./testdata/upstream-topologies.json";
import { takeByTopologyDistributed } from "./assignment.ts";
import type { CpuTopology } from "./topology.ts";
import { formatCpuSet, parseCpuSet } from "../util/cpuset.ts";
import type { Pod } from "../pods/schema.ts";
import { fakeTopology, memoryStateStore } from "./fake.ts";
import { CpuPolicy } from "./policy.ts";
import { maskOf } from "../topologymanager/index.ts";

type TopoName = keyof typeof topologies;
const topo = (name: TopoName): CpuTopology => ({ cpus: topologies[name].map(([cpu, core, socket, numa]) => ({ cpu: cpu!, core: core!, socket: socket!, numa: numa! })) });

// [description, topology, available, numCPUs, cpuGroupSize, expected error, expected CPUs]
const CASES: [string, TopoName, string, number, number, string, string][] = [
  // commonTakeByTopologyTestCases (cpuGroupSize 1)
  [
    "take more cpus than are available from single socket with HT",
    "topoSingleSocketHT",
    "0,2,4,6",
    5,
    1,
    "not enough cpus available to satisfy request: requested=5, available=4",
    "",
  ],
  ["take zero cpus from single socket with HT", "topoSingleSocketHT", "0-7", 0, 1, "", ""],
  ["take one cpu from single socket with HT", "topoSingleSocketHT", "0-7", 1, 1, "", "0"],
  ["take one cpu from single socket with HT, some cpus are taken", "topoSingleSocketHT", "1,3,5,6,7", 1, 1, "", "6"],
  ["take two cpus from single socket with HT", "topoSingleSocketHT", "0-7", 2, 1, "", "0,4"],
  ["take all cpus from single socket with HT", "topoSingleSocketHT", "0-7", 8, 1, "", "0-7"],
  ["take two cpus from single socket with HT, only one core totally free", "topoSingleSocketHT", "0-3,6", 2, 1, "", "2,6"],
  ["take a socket of cpus from dual socket with HT", "topoDualSocketHT", "0-11", 6, 1, "", "0,2,4,6,8,10"],
  ["take a socket of cpus from dual socket with multi-numa-per-socket with HT", "topoDualSocketMultiNumaPerSocketHT", "0-79", 40, 1, "", "0-19,40-59"],
  ["take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", "topoDualSocketMultiNumaPerSocketHT", "0-79", 20, 1, "", "0-9,40-49"],
  [
    "take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 NUMA node already taken",
    "topoDualSocketMultiNumaPerSocketHT",
    "10-39,50-79",
    20,
    1,
    "",
    "10-19,50-59",
  ],
  ["take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", "topoDualSocketMultiNumaPerSocketHT", "0-79", 60, 1, "", "0-29,40-69"],
  [
    "take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, a core taken",
    "topoDualSocketMultiNumaPerSocketHT",
    "1-39,41-79",
    60,
    1,
    "",
    "10-39,50-79",
  ],
  // commonTakeByTopologyExtendedTestCases
  ["allocate 4 full cores with 2 distributed across each NUMA node", "topoDualSocketHT", "0-11", 8, 1, "", "0-3,6-9"],
  ["allocate 32 full cores with 8 distributed across each NUMA node", "topoDualSocketMultiNumaPerSocketHT", "0-79", 64, 1, "", "0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77"],
  ["allocate 24 full cores with 8 distributed across the first 3 NUMA nodes", "topoDualSocketMultiNumaPerSocketHT", "0-79", 48, 1, "", "0-7,10-17,20-27,40-47,50-57,60-67"],
  [
    "allocate 24 full cores with 8 distributed across the first 3 NUMA nodes (taking all but 2 from the first NUMA node)",
    "topoDualSocketMultiNumaPerSocketHT",
    "1-29,32-39,41-69,72-79",
    48,
    1,
    "",
    "1-8,10-17,20-27,41-48,50-57,60-67",
  ],
  [
    "allocate 24 full cores with 8 distributed across the last 3 NUMA nodes (even though all 8 could be allocated from the first NUMA node)",
    "topoDualSocketMultiNumaPerSocketHT",
    "2-29,31-39,42-69,71-79",
    48,
    1,
    "",
    "10-17,20-27,31-38,50-57,60-67,71-78",
  ],
  [
    "allocate 8 full cores with 2 distributed across each NUMA node",
    "topoDualSocketMultiNumaPerSocketHT",
    "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71",
    16,
    1,
    "",
    "0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71",
  ],
  // TestTakeByTopologyNUMADistributed's own cases
  ["take one cpu from dual socket with HT - core from Socket 0", "topoDualSocketHT", "1-5,7-11", 1, 1, "", "1"],
  ["take one cpu from dual socket with HT - core from Socket 0 - cpuGroupSize 2", "topoDualSocketHT", "1-5,7-11", 1, 2, "", "2"],
  ["allocate 13 full cores distributed across the first 2 NUMA nodes", "topoDualSocketMultiNumaPerSocketHT", "0-79", 26, 1, "", "0-6,10-16,40-45,50-55"],
  ["allocate 13 full cores distributed across the first 2 NUMA nodes (cpuGroupSize 2)", "topoDualSocketMultiNumaPerSocketHT", "0-79", 26, 2, "", "0-6,10-15,40-46,50-55"],
  [
    "allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 0, 1",
    "topoDualSocketMultiNumaPerSocketHT",
    "0-79",
    62,
    1,
    "",
    "0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76",
  ],
  [
    "allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 1, 2 (cpuGroupSize 2)",
    "topoDualSocketMultiNumaPerSocketHT",
    "0-79",
    62,
    2,
    "",
    "0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76",
  ],
  [
    "allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 2, 3 (to keep balance)",
    "topoDualSocketMultiNumaPerSocketHT",
    "0-8,10-18,20-39,40-48,50-58,60-79",
    62,
    1,
    "",
    "0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77",
  ],
  [
    "allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 2, 3 (to keep balance with cpuGroupSize 2)",
    "topoDualSocketMultiNumaPerSocketHT",
    "0-8,10-18,20-39,40-48,50-58,60-79",
    62,
    2,
    "",
    "0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77",
  ],
  [
    "ensure bestRemainder chosen with NUMA nodes that have enough CPUs to satisfy the request",
    "topoDualSocketMultiNumaPerSocketHT",
    "0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76",
    34,
    1,
    "",
    "0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74",
  ],
  [
    "ensure previous failure encountered on live machine has been fixed (1/1)",
    "topoDualSocketMultiNumaPerSocketHTLarge",
    "0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,94,96,222,223,101-111,229-239,126,127,254,255",
    28,
    1,
    "",
    "43-47,75-79,96,101-105,171-174,203-206,229-232",
  ],
];

describe("takeByTopologyDistributed (upstream TestTakeByTopologyNUMADistributed)", () => {
  test.each(CASES)("%s", (_d, name, available, numCpus, groupSize, expErr, expected) => {
    const got = takeByTopologyDistributed(topo(name), parseCpuSet(available), numCpus, groupSize);
    if (expErr) {
      expect(got).toEqual({ ok: false, error: expErr });
      return;
    }
    if (!got.ok) throw new Error(got.error);
    expect(formatCpuSet(got.cpus)).toBe(formatCpuSet(parseCpuSet(expected)));
  });
});

describe("the static policy with distribute-cpus-across-numa (upstream staticPolicy.takeByTopology)", () => {
  // Two NUMA nodes (one per socket) of three cores with two threads: CPUs 0-2 + 6-8 on node 0, 3-5 + 9-11 on node 1; CPU 0 reserved.
  const policy = (distribute: boolean, full = false) =>
    new CpuPolicy({
      policy: "static",
      fullPcpusOnly: full,
      distributeCpusAcrossNuma: distribute,
      topology: fakeTopology(2, 3, 2),
      reservedSystemCpus: [0],
      reservedMilliCpu: 0,
      store: memoryStateStore(),
      statePath: "/state",
    });
  const guaranteed = (uid: string, cpu: string): Pod =>
    ({
      metadata: { name: uid, namespace: "default", uid },
      spec: { containers: [{ name: "c", image: "busybox", resources: { limits: { cpu, memory: "64Mi" }, requests: { cpu, memory: "64Mi" } } }] },
    }) as unknown as Pod;
  const allocated = (p: CpuPolicy, uid: string, cpu: string, affinity?: number[]) => {
    const pod = guaranteed(uid, cpu);
    expect(p.allocate(pod, pod.spec.containers[0]!, affinity ? maskOf(affinity) : undefined)).toBeUndefined();
    return formatCpuSet(p.exclusiveCpus(uid, "c"));
  };

  test("8 CPUs need both nodes: 4 on each, where packed takes the whole free socket and a core of the other", () => {
    expect(allocated(policy(false), "a", "8")).toBe("1,3-5,7,9-11");
    expect(allocated(policy(true), "a", "8")).toBe("1-4,7-10");
    // the same with the topology manager's affinity to both nodes (upstream allocateCPUs takes the aligned CPUs with takeByTopology too)
    expect(allocated(policy(true), "a", "8", [0, 1])).toBe("1-4,7-10");
  });

  test("a request one node holds goes to the node that leaves the free CPUs most balanced", () => {
    // node 0 has 5 free CPUs, node 1 has 6: 4 CPUs from node 1 leave 5 and 2 (deviation 1.5), from node 0 1 and 6 (2.5)
    expect(allocated(policy(true), "a", "4")).toBe("3-4,9-10");
    expect(allocated(policy(false), "a", "4")).toBe("1-2,7-8");
  });

  test("with full-pcpus-only the shares are whole cores (cpuGroupSize = CPUs per core)", () => {
    // 10 CPUs over both nodes (5 and 6 free): 5 each in single CPUs; in whole cores 4 each (node 0 holds two free cores) and the last core on node 1
    expect(allocated(policy(true), "a", "10")).toBe("1-10");
    expect(allocated(policy(true, true), "a", "10")).toBe("1-5,7-11");
  });
});
