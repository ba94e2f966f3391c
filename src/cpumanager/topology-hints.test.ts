// The static policy as a hint provider of the topology manager, on upstream's test machine
// (cpumanager/topology_hints_test.go returnMachineInfo): two NUMA nodes (one per socket) of three
// cores with two threads each, CPUs 0-2 + 6-8 on node 0 and 3-5 + 9-11 on node 1.
import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { type HintProvider, maskOf, type PolicyName, type Scope, type TopologyHint, TopologyManager } from "../topologymanager/index.ts";
import { type CpuSet, difference, formatCpuSet, parseCpuSet } from "../util/cpuset.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { encodeCheckpoint } from "./checkpoint.ts";
import { fakeTopology, memoryStateStore } from "./fake.ts";
import { PolicyCpuManager } from "./manager.ts";
import { CpuPolicy, podGuaranteedCpus } from "./policy.ts";

type C = { name: string; cpu?: string; restartPolicy?: string };
const pod = (uid: string, containers: C[], init: C[] = []): Pod => {
  const spec = (c: C) => ({
    name: c.name,
    image: "busybox",
    ...(c.restartPolicy ? { restartPolicy: c.restartPolicy } : {}),
    ...(c.cpu ? { resources: { limits: { cpu: c.cpu, memory: "64Mi" }, requests: { cpu: c.cpu, memory: "64Mi" } } } : {}),
  });
  return {
    metadata: { name: `pod-${uid}`, namespace: "default", uid },
    spec: { containers: containers.map(spec), ...(init.length ? { initContainers: init.map(spec) } : {}) },
  } as unknown as Pod;
};

const topology = fakeTopology(2, 3, 2);
const h = (nodes: number[], preferred: boolean): TopologyHint => ({ affinity: maskOf(nodes), preferred });

/**
 * A static policy whose shared pool without the reserved CPU is `available`;
 * `mine` are the CPUs already assigned to pod "p" container "c"; every other
 * CPU belongs to another pod. `reserved` must lie outside both.
 */
function policyWith(opts: { available: string; reserved: string; mine?: string }): CpuPolicy {
  const available = parseCpuSet(opts.available);
  const reserved = parseCpuSet(opts.reserved);
  const mine = parseCpuSet(opts.mine ?? "");
  const others = difference(difference(difference(parseCpuSet("0-11"), available), reserved), mine);
  const entries: Record<string, Record<string, CpuSet>> = {};
  if (mine.length) entries["p"] = { c: mine };
  if (others.length) entries["other"] = { x: others };
  const store = memoryStateStore(encodeCheckpoint({ policyName: "static", defaultCpuSet: [...reserved, ...available].sort((a, b) => a - b), entries }));
  return new CpuPolicy({
    policy: "static",
    fullPcpusOnly: false,
    distributeCpusAcrossNuma: false,
    topology,
    reservedSystemCpus: reserved,
    reservedMilliCpu: 0,
    store,
    statePath: "/state",
  });
}

describe("container hints (upstream TestGetTopologyHints cases)", () => {
  const one = (cpu: string) => pod("p", [{ name: "c", cpu }]);
  const hintsOf = (p: CpuPolicy, q: Pod) => p.containerHints(q, q.spec.containers[0]!);

  test("a container on the shared pool (not Guaranteed, or a fractional CPU) has no preference", () => {
    const p = policyWith({ available: "1-11", reserved: "0" });
    expect(hintsOf(p, pod("p", [{ name: "c" }]))).toBeUndefined();
    expect(hintsOf(p, one("1500m"))).toBeUndefined();
  });

  test("2 CPUs, 4 available on node 0 and 6 on node 1: either node, preferred; both, not", () => {
    expect(hintsOf(policyWith({ available: "2-11", reserved: "0" }), one("2"))).toEqual({ cpu: [h([0], true), h([1], true), h([0, 1], false)] });
  });

  test("5 CPUs: only node 1 holds them (preferred), or both", () => {
    expect(hintsOf(policyWith({ available: "2-11", reserved: "0" }), one("5"))).toEqual({ cpu: [h([1], true), h([0, 1], false)] });
  });

  test("7 CPUs: more than a node has, so both nodes are the preferred hint", () => {
    expect(hintsOf(policyWith({ available: "2-11", reserved: "0" }), one("7"))).toEqual({ cpu: [h([0, 1], true)] });
  });

  test("11 CPUs with 10 available, or 5 with 4: no hint at all (it fits nowhere)", () => {
    expect(hintsOf(policyWith({ available: "2-11", reserved: "0" }), one("11"))).toEqual({ cpu: [] });
    expect(hintsOf(policyWith({ available: "0-3", reserved: "4" }), one("5"))).toEqual({ cpu: [] });
  });

  test("2 CPUs with one free on each node: both nodes, not preferred (a node could hold 2 when empty)", () => {
    expect(hintsOf(policyWith({ available: "0,3", reserved: "1" }), one("2"))).toEqual({ cpu: [h([0, 1], false)] });
  });

  test("already allocated (an agent restart): the hints are regenerated from its own CPUs", () => {
    expect(hintsOf(policyWith({ available: "", reserved: "1", mine: "0,6" }), one("2"))).toEqual({ cpu: [h([0], true), h([0, 1], false)] });
    expect(hintsOf(policyWith({ available: "", reserved: "1", mine: "3,9" }), one("2"))).toEqual({ cpu: [h([1], true), h([0, 1], false)] });
    expect(hintsOf(policyWith({ available: "", reserved: "11", mine: "0-10" }), one("11"))).toEqual({ cpu: [h([0, 1], true)] });
  });

  test("already allocated with a different count than requested: a preference that cannot be satisfied", () => {
    expect(hintsOf(policyWith({ available: "", reserved: "1", mine: "0,3,6,9" }), one("2"))).toEqual({ cpu: [] });
    expect(hintsOf(policyWith({ available: "", reserved: "1", mine: "0,3,6,9" }), one("11"))).toEqual({ cpu: [] });
  });

  test("the none policy gives no hints", () => {
    const none = new CpuPolicy({
      policy: "none",
      fullPcpusOnly: false,
      distributeCpusAcrossNuma: false,
      topology,
      reservedSystemCpus: [],
      reservedMilliCpu: 0,
      store: memoryStateStore(),
      statePath: "/s",
    });
    expect(hintsOf(none, one("2"))).toBeUndefined();
    expect(none.podHints(one("2"))).toBeUndefined();
  });
});

describe("pod hints (upstream TestPodGuaranteedCPUs and TestGetPodTopologyHints)", () => {
  test("the CPUs a pod needs: its long-running containers together, or its largest init container with the sidecars before it", () => {
    expect(podGuaranteedCpus(pod("p", [{ name: "a", cpu: "2" }]))).toBe(2);
    expect(podGuaranteedCpus(pod("p", [{ name: "a", cpu: "3" }], [{ name: "i", cpu: "2" }]))).toBe(3);
    expect(podGuaranteedCpus(pod("p", [{ name: "a", cpu: "2" }], [{ name: "i", cpu: "5" }]))).toBe(5);
    expect(
      podGuaranteedCpus(
        pod(
          "p",
          [
            { name: "a", cpu: "1" },
            { name: "b", cpu: "2" },
          ],
          [],
        ),
      ),
    ).toBe(3);
    expect(podGuaranteedCpus(pod("p", [{ name: "a", cpu: "1" }], [{ name: "s", cpu: "2", restartPolicy: "Always" }]))).toBe(3);
    expect(
      podGuaranteedCpus(
        pod(
          "p",
          [{ name: "a", cpu: "1" }],
          [
            { name: "s", cpu: "2", restartPolicy: "Always" },
            { name: "i", cpu: "5" },
          ],
        ),
      ),
    ).toBe(7);
    expect(podGuaranteedCpus(pod("p", [{ name: "a", cpu: "1" }, { name: "be" }]))).toBe(0); // not Guaranteed
  });

  test("two containers of 3 CPUs: one node holds the pod's 6 only when it is free", () => {
    const q = pod("q", [
      { name: "a", cpu: "3" },
      { name: "b", cpu: "3" },
    ]);
    expect(policyWith({ available: "2-11", reserved: "0" }).podHints(q)).toEqual({ cpu: [h([1], true), h([0, 1], false)] });
    expect(policyWith({ available: "1-5,7-11", reserved: "0" }).podHints(q)).toEqual({ cpu: [h([1], true), h([0, 1], false)] });
    expect(policyWith({ available: "1-10", reserved: "0" }).podHints(q)).toEqual({ cpu: [h([0, 1], false)] });
  });
});

describe("allocation aligned to the merged affinity (upstream allocateCPUs)", () => {
  const two = pod("g", [{ name: "app", cpu: "2" }]);
  const app = two.spec.containers[0]!;

  test("without an affinity the packed order decides; with one, the affinity's node first", () => {
    const free = policyWith({ available: "1-11", reserved: "0" });
    expect(free.allocate(two, app, undefined)).toBeUndefined();
    expect(free.cpusOf("g", "app")).toEqual([1, 7]); // a whole core of the fuller socket 0
    const aligned = policyWith({ available: "1-11", reserved: "0" });
    expect(aligned.allocate(two, app, maskOf([1]))).toBeUndefined();
    expect(aligned.cpusOf("g", "app")).toEqual([3, 9]); // a whole core on node 1
  });

  test("more CPUs than the affinity's nodes have free: all of those, then the rest from the other node", () => {
    const p = policyWith({ available: "1-11", reserved: "0" });
    const seven = pod("g", [{ name: "app", cpu: "7" }]);
    expect(p.allocate(seven, seven.spec.containers[0]!, maskOf([1]))).toBeUndefined();
    const got = p.cpusOf("g", "app")!;
    expect(got.length).toBe(7);
    expect(got.filter((c) => [3, 4, 5, 9, 10, 11].includes(c))).toEqual([3, 4, 5, 9, 10, 11]);
  });
});

describe("through the topology manager", () => {
  const numa = { nodes: [0, 1], distances: new Map() };
  const managerOf = (policy: CpuPolicy) =>
    new PolicyCpuManager({
      policy,
      cri: { listContainers: async () => [], updateContainerResources: async () => {} },
      pods: { activePods: () => [] },
      sources: { allSourcesReady: () => false },
      reconcilePeriodMs: 10_000,
      clock: new FakeClock(0),
      logger: memoryLogger().logger,
    });
  const tm = (policy: PolicyName, scope: Scope, providers: HintProvider[]) =>
    new TopologyManager({ policy, scope, options: { preferClosestNuma: false, maxAllowableNumaNodes: 8 }, numa, providers, logger: memoryLogger().logger });

  test("single-numa-node puts 5 CPUs on the one node that holds them; the next 5 fit on no single node: TopologyAffinityError, nothing taken", () => {
    const policy = policyWith({ available: "1-11", reserved: "0" });
    const m = tm("single-numa-node", "container", [managerOf(policy)]);
    expect(m.admit(pod("a", [{ name: "c", cpu: "5" }]))).toEqual({ admit: true });
    expect(formatCpuSet(policy.cpusOf("a", "c")!)).toBe("1-2,6-8"); // node 0 (its 5 free CPUs), the narrower fit
    expect(m.admit(pod("b", [{ name: "c", cpu: "5" }]))).toEqual({ admit: true });
    expect(formatCpuSet(policy.cpusOf("b", "c")!)).toBe("3-5,9-10");
    expect(m.admit(pod("d", [{ name: "c", cpu: "2" }]))).toEqual({
      admit: false,
      reason: "TopologyAffinityError",
      message: "Resources cannot be allocated with Topology locality",
    });
    expect(Object.keys(policy.snapshot().entries).sort()).toEqual(["a", "b"]);
  });

  test("restricted refuses a cross-node fit; best-effort admits it across both nodes", () => {
    const restricted = policyWith({ available: "0,3", reserved: "1" });
    expect(tm("restricted", "container", [managerOf(restricted)]).admit(pod("a", [{ name: "c", cpu: "2" }]))).toMatchObject({
      admit: false,
      reason: "TopologyAffinityError",
    });
    expect(restricted.cpusOf("a", "c")).toEqual([0, 1, 3]); // the shared pool: nothing was taken
    const bestEffort = policyWith({ available: "0,3", reserved: "1" });
    expect(tm("best-effort", "container", [managerOf(bestEffort)]).admit(pod("a", [{ name: "c", cpu: "2" }]))).toEqual({ admit: true });
    expect(bestEffort.cpusOf("a", "c")).toEqual([0, 3]);
  });

  test("container scope: when the second container is refused the first one's CPUs go back to the pool", () => {
    const policy = policyWith({ available: "1-8,11", reserved: "0" }); // node 0: 1,2,6,7,8; node 1: 3,4,5,11
    const m = tm("restricted", "container", [managerOf(policy)]);
    const q = pod("q", [
      { name: "a", cpu: "4" },
      { name: "b", cpu: "5" },
    ]);
    expect(m.admit(q)).toMatchObject({ admit: false, reason: "TopologyAffinityError" });
    expect(policy.snapshot().entries["q"]).toBeUndefined();
    expect(formatCpuSet(policy.snapshot().defaultCpuSet)).toBe("0-8,11");
  });

  test("a refused admission of a pod admitted before (a resize asking more) takes nothing the first admission gave it", () => {
    const policy = policyWith({ available: "1-11", reserved: "0" });
    const m = tm("restricted", "container", [managerOf(policy)]);
    expect(m.admit(pod("a", [{ name: "c", cpu: "2" }]))).toEqual({ admit: true });
    const held = policy.cpusOf("a", "c");
    expect(m.admit(pod("a", [{ name: "c", cpu: "3" }]))).toMatchObject({ admit: false, reason: "TopologyAffinityError" });
    expect(policy.cpusOf("a", "c")).toEqual(held!);
    expect(held!.length).toBe(2);
  });

  test("pod scope: the whole pod's CPUs on one node", () => {
    const policy = policyWith({ available: "1-11", reserved: "0" });
    const q = pod("q", [
      { name: "a", cpu: "2" },
      { name: "b", cpu: "4" },
    ]);
    expect(tm("single-numa-node", "pod", [managerOf(policy)]).admit(q)).toEqual({ admit: true });
    expect([...policy.cpusOf("q", "a")!, ...policy.cpusOf("q", "b")!].sort((x, y) => x - y)).toEqual([3, 4, 5, 9, 10, 11]);
  });
});
