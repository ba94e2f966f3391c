import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { type Take, takeByTopology } from "./assignment.ts";
import { checkpointChecksum, decodeCheckpoint, encodeCheckpoint } from "./checkpoint.ts";
import { cpuSet, formatCpuSet, parseCpuSet } from "../util/cpuset.ts";
import { fakeTopology, memoryStateStore } from "./fake.ts";
import { PolicyCpuManager } from "./manager.ts";
import { CpuManagerError, CpuPolicy, guaranteedCpus } from "./policy.ts";
import { readCpuTopology, type CpuTopology } from "./topology.ts";
import topologies from "./testdata/upstream-topologies.json";

type C = { name: string; cpu?: string; memory?: string; restartPolicy?: string };
const pod = (uid: string, containers: C[], init: C[] = []): Pod => {
  const spec = (c: C) => ({
    name: c.name,
    image: "busybox",
    ...(c.restartPolicy ? { restartPolicy: c.restartPolicy } : {}),
    ...(c.cpu ? { resources: { limits: { cpu: c.cpu, memory: c.memory ?? "64Mi" }, requests: { cpu: c.cpu, memory: c.memory ?? "64Mi" } } } : {}),
  });
  return {
    metadata: { name: `pod-${uid}`, namespace: "default", uid },
    spec: { containers: containers.map(spec), ...(init.length ? { initContainers: init.map(spec) } : {}) },
  } as unknown as Pod;
};

const staticPolicy = (opts: { store?: ReturnType<typeof memoryStateStore>; cpus?: number; reserved?: string; milli?: number; full?: boolean } = {}) =>
  new CpuPolicy({
    policy: "static",
    fullPcpusOnly: opts.full ?? false,
    distributeCpusAcrossNuma: false,
    topology: fakeTopology(1, opts.cpus ?? 4, 1),
    reservedSystemCpus: parseCpuSet(opts.reserved ?? ""),
    reservedMilliCpu: opts.milli ?? 0,
    store: opts.store ?? memoryStateStore(),
    statePath: "/var/lib/kubelet/cpu_manager_state",
  });

describe("cpu sets", () => {
  test("parse and format as the kernel and k8s.io/utils/cpuset write them", () => {
    expect(parseCpuSet("0-2,7,9-10")).toEqual([0, 1, 2, 7, 9, 10]);
    expect(formatCpuSet(cpuSet(5, 0, 1, 2, 9))).toBe("0-2,5,9");
    expect(parseCpuSet("")).toEqual([]);
    expect(() => parseCpuSet("3-1")).toThrow("ends before it starts");
    expect(() => parseCpuSet("a")).toThrow("not a CPU or a range");
  });
});

describe("the state file", () => {
  // Expected checksums and JSON produced by upstream 1.34.12's state.CPUManagerCheckpoint.MarshalCheckpoint (a Go program against the module).
  test("upstream's JSON and checksum, byte for byte", () => {
    expect(encodeCheckpoint({ policyName: "static", defaultCpuSet: parseCpuSet("0,2-3"), entries: { "pod-uid-1": { app: [1], side: [4, 5] }, "pod-uid-0": { c: [6] } } })).toBe(
      '{"policyName":"static","defaultCpuSet":"0,2-3","entries":{"pod-uid-0":{"c":"6"},"pod-uid-1":{"app":"1","side":"4-5"}},"checksum":3976418077}',
    );
    expect(encodeCheckpoint({ policyName: "none", defaultCpuSet: [], entries: {} })).toBe('{"policyName":"none","defaultCpuSet":"","checksum":1353318690}');
    expect(checkpointChecksum("static", "0-1", {})).toBe(1636926438);
  });
  test("read back; a wrong checksum is corruption; a zero checksum is accepted as upstream", () => {
    const text = '{"policyName":"static","defaultCpuSet":"0,2-3","entries":{"pod-uid-0":{"c":"6"},"pod-uid-1":{"app":"1","side":"4-5"}},"checksum":3976418077}';
    expect(decodeCheckpoint(text)).toEqual({ policyName: "static", defaultCpuSet: [0, 2, 3], entries: { "pod-uid-0": { c: [6] }, "pod-uid-1": { app: [1], side: [4, 5] } } });
    expect(() => decodeCheckpoint(text.replace("3976418077", "3976418078"))).toThrow("checkpoint is corrupted");
    expect(decodeCheckpoint('{"policyName":"static","defaultCpuSet":"0-1","checksum":0}').defaultCpuSet).toEqual([0, 1]);
  });
});

describe("taking CPUs by topology", () => {
  const taken = (r: Take) => (r.ok ? formatCpuSet(r.cpus) : r.error);
  test("whole sockets, then whole cores, then single threads of the most used cores", () => {
    const t = fakeTopology(2, 2, 2); // CPUs 0-7; cores 0..3 with siblings (0,4) (1,5) (2,6) (3,7); socket 0 = cores 0,1
    expect(takeByTopology(t, parseCpuSet("0-7"), 4)).toEqual({ ok: true, cpus: [0, 1, 4, 5] }); // socket 0
    expect(takeByTopology(t, parseCpuSet("1-7"), 2)).toEqual({ ok: true, cpus: [1, 5] }); // a whole free core of the more used socket, not 4 + 1
    expect(takeByTopology(t, parseCpuSet("1-7"), 1)).toEqual({ ok: true, cpus: [4] }); // fills the half-used core 0
    expect(takeByTopology(t, parseCpuSet("1-2"), 3)).toEqual({ ok: false, error: "not enough cpus available to satisfy request: requested=3, available=2" });
  });

  test("NUMA nodes first where each holds one or more sockets (upstream numaFirst): a whole free NUMA node before sockets of another", () => {
    // The NUMA test VM's sysfs (numa-vm.test.ts): six sockets of one core, CPUs 0-2 on node 0, 3-5 on node 1; CPU 0 reserved.
    const vm: CpuTopology = { cpus: [0, 1, 2, 3, 4, 5].map((cpu) => ({ cpu, core: cpu, socket: cpu, numa: cpu < 3 ? 0 : 1 })) };
    // Node 1 whole, then the most used node's lowest socket; sockets alone (by id) gave 1-4, two CPUs on each node.
    expect(takeByTopology(vm, parseCpuSet("1-5"), 4)).toEqual({ ok: true, cpus: [1, 3, 4, 5] });
    expect(takeByTopology(vm, parseCpuSet("1-5"), 2)).toEqual({ ok: true, cpus: [1, 2] }); // less than a node: node 0's sockets, the more used node
    // upstream's fakeTopoMultiSocketDualSocketPerNumaHT: topoDualSocketMultiNumaPerSocketHT with sockets and NUMA nodes swapped
    // (4 sockets of 20 CPUs, 2 NUMA nodes of 40). With CPU 0 taken, 40 CPUs are NUMA node 1, not sockets 1 and 2 across both nodes.
    const flipped: CpuTopology = {
      cpus: topologies.topoDualSocketMultiNumaPerSocketHT.map(([cpu, core, socket, numa]) => ({ cpu: cpu!, core: core!, socket: numa!, numa: socket! })),
    };
    expect(taken(takeByTopology(flipped, parseCpuSet("1-79"), 40))).toBe("20-39,60-79");
    // Sockets first where a socket holds several NUMA nodes, as before: 20 CPUs are a whole NUMA node of the more used socket.
    const multiNuma: CpuTopology = {
      cpus: topologies.topoDualSocketMultiNumaPerSocketHT.map(([cpu, core, socket, numa]) => ({ cpu: cpu!, core: core!, socket: socket!, numa: numa! })),
    };
    expect(taken(takeByTopology(multiNuma, parseCpuSet("1-79"), 20))).toBe("10-19,50-59");
  });
});

describe("the static policy", () => {
  test("reserves kube + system reserved CPU rounded up from CPU 0; exclusive CPUs leave the shared pool and come back when the pod goes", () => {
    const store = memoryStateStore();
    const p = staticPolicy({ store, milli: 1500 });
    expect(p.reserved).toEqual([0, 1]);
    const g = pod("g", [{ name: "app", cpu: "2" }]);
    expect(p.allocatePod(g)).toEqual({ admit: true });
    expect(p.cpusOf("g", "app")).toEqual([2, 3]);
    expect(p.cpusOf("be", "x")).toEqual([0, 1]); // everything else: the shared pool, reserved CPUs included
    // The pod resources API's view: exclusive CPUs only, and every CPU but the reserved ones.
    expect(p.exclusiveCpus("g", "app")).toEqual([2, 3]);
    expect(p.exclusiveCpus("be", "x")).toEqual([]);
    expect(p.allocatableCpus()).toEqual([2, 3]);
    expect(JSON.parse(store.text!)).toMatchObject({ policyName: "static", defaultCpuSet: "0-1", entries: { g: { app: "2-3" } } });
    p.removeStale([]);
    expect(p.cpusOf("be", "x")).toEqual([0, 1, 2, 3]);
    expect(JSON.parse(store.text!).entries).toBeUndefined();
  });
  test("a Guaranteed pod with pod-level resources gets no exclusive CPUs: upstream's static policy skips such pods", () => {
    const p = staticPolicy({ reserved: "0" });
    const g = pod("pl", [{ name: "app", cpu: "2" }]);
    const podLevel: Pod = { ...g, spec: { ...g.spec, resources: { limits: { cpu: "2", memory: "64Mi" } } } };
    expect(guaranteedCpus(g, g.spec.containers[0]!)).toBe(2);
    expect(guaranteedCpus(podLevel, podLevel.spec.containers[0]!)).toBe(0);
    expect(p.allocatePod(podLevel)).toEqual({ admit: true });
    expect(p.exclusiveCpus("pl", "app")).toEqual([]);
  });
  test("only Guaranteed containers with whole CPUs; not enough CPUs fails admission with upstream's reason and leaves the state alone", () => {
    const p = staticPolicy({ reserved: "0" });
    expect(guaranteedCpus(pod("a", [{ name: "c", cpu: "1500m" }]), pod("a", [{ name: "c", cpu: "1500m" }]).spec.containers[0]!)).toBe(0);
    const burstable = { ...pod("b", [{ name: "c" }]) };
    expect(guaranteedCpus(burstable, burstable.spec.containers[0]!)).toBe(0);
    expect(
      p.allocatePod(
        pod("a", [
          { name: "one", cpu: "1" },
          { name: "two", cpu: "3" },
        ]),
      ),
    ).toEqual({
      admit: false,
      reason: "UnexpectedAdmissionError",
      message: "Allocate failed due to not enough cpus available to satisfy request: requested=3, available=2, which is unexpected",
    });
    expect(p.snapshot()).toEqual({ policyName: "static", defaultCpuSet: [0, 1, 2, 3], entries: {} });
  });
  test("an init container's CPUs are handed on to the pod's app containers (upstream cpusToReuse)", () => {
    const p = staticPolicy({ reserved: "0" });
    expect(p.allocatePod(pod("a", [{ name: "app", cpu: "2" }], [{ name: "init", cpu: "2" }]))).toEqual({ admit: true });
    expect(p.snapshot().entries).toEqual({ a: { init: [1, 2], app: [1, 2] } });
    expect(p.snapshot().defaultCpuSet).toEqual([0, 3]);
  });
  test("a restart reads the state file and keeps every assignment; admitting the same pod again changes nothing", () => {
    const store = memoryStateStore();
    staticPolicy({ store, reserved: "0" }).allocatePod(pod("a", [{ name: "app", cpu: "1" }]));
    const before = store.text;
    const again = staticPolicy({ store, reserved: "0" });
    expect(again.cpusOf("a", "app")).toEqual([1]);
    expect(again.allocatePod(pod("a", [{ name: "app", cpu: "1" }]))).toEqual({ admit: true });
    expect(store.text).toBe(before!);
  });
  test("a state file of another policy, or one that does not add up, stops the start with upstream's message", () => {
    const none = memoryStateStore(encodeCheckpoint({ policyName: "none", defaultCpuSet: [], entries: {} }));
    expect(() => staticPolicy({ store: none, reserved: "0" })).toThrow(
      'could not restore state from checkpoint: configured policy "static" differs from state checkpoint policy "none", please drain this node and delete the CPU manager checkpoint file "/var/lib/kubelet/cpu_manager_state" before restarting Kubelet',
    );
    const lost = memoryStateStore(encodeCheckpoint({ policyName: "static", defaultCpuSet: [0, 1], entries: { a: { c: [2] } } }));
    expect(() => staticPolicy({ store: lost, reserved: "0" })).toThrow('current set of available CPUs "0-3" doesn\'t match with CPUs in state "0-2"');
    const reservedGone = memoryStateStore(encodeCheckpoint({ policyName: "static", defaultCpuSet: [1, 2, 3], entries: { a: { c: [0] } } }));
    expect(() => staticPolicy({ store: reservedGone, reserved: "0" })).toThrow('not all reserved cpus: "0" are present in defaultCpuSet: "1-3"');
  });
  test("static needs reserved CPU; reserved CPUs must be online", () => {
    expect(() => staticPolicy()).toThrow(new CpuManagerError("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"));
    expect(() => staticPolicy({ reserved: "9" })).toThrow('reservedSystemCPUs "9" are not online CPUs');
  });
  test("full-pcpus-only: whole cores or SMTAlignmentError", () => {
    const p = new CpuPolicy({
      policy: "static",
      fullPcpusOnly: true,
      distributeCpusAcrossNuma: false,
      topology: fakeTopology(1, 2, 2),
      reservedSystemCpus: [0],
      reservedMilliCpu: 0,
      store: memoryStateStore(),
      statePath: "x",
    });
    expect(p.allocatePod(pod("a", [{ name: "c", cpu: "1" }]))).toEqual({
      admit: false,
      reason: "SMTAlignmentError",
      message: "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2",
    });
    expect(p.allocatePod(pod("a", [{ name: "c", cpu: "4" }]))).toMatchObject({
      reason: "SMTAlignmentError",
      message: expect.stringContaining("available physical CPUs = 2, requested CPUs = 4"),
    });
    expect(p.allocatePod(pod("a", [{ name: "c", cpu: "2" }]))).toEqual({ admit: true });
    expect(p.cpusOf("a", "c")).toEqual([1, 3]);
  });
  test("the none policy writes no cpuset and keeps an empty state file", () => {
    const store = memoryStateStore();
    const p = new CpuPolicy({
      policy: "none",
      fullPcpusOnly: false,
      distributeCpusAcrossNuma: false,
      topology: fakeTopology(1, 2, 1),
      reservedSystemCpus: [],
      reservedMilliCpu: 0,
      store,
      statePath: "x",
    });
    expect(p.allocatePod(pod("a", [{ name: "c", cpu: "1" }]))).toEqual({ admit: true });
    expect(p.cpusOf("a", "c")).toBeUndefined();
    expect(p.allocatableCpus()).toEqual([]);
    expect(store.text).toBe('{"policyName":"none","defaultCpuSet":"","checksum":1353318690}');
  });
});

describe("the reconcile loop", () => {
  test("running containers of active pods get their cpuset through UpdateContainerResources, once per change", async () => {
    const policy = staticPolicy({ reserved: "0" });
    const be = pod("be", [{ name: "x" }]);
    const g = pod("g", [{ name: "app", cpu: "1" }]);
    let active: Pod[] = [be];
    const updates: [string, unknown][] = [];
    const containers = [
      { id: "c-be", labels: { "io.kubernetes.pod.uid": "be", "io.kubernetes.container.name": "x" } },
      { id: "c-gone", labels: { "io.kubernetes.pod.uid": "other", "io.kubernetes.container.name": "y" } },
    ];
    const m = new PolicyCpuManager({
      policy,
      cri: { listContainers: async () => containers as never, updateContainerResources: async (id, r) => void updates.push([id, r]) },
      pods: { activePods: () => active },
      sources: { allSourcesReady: () => true },
      reconcilePeriodMs: 10_000,
      clock: new FakeClock(0),
      logger: memoryLogger().logger,
    });
    await m.reconcile();
    expect(updates).toEqual([["c-be", { cpusetCpus: "0-3" }]]);
    await m.reconcile();
    expect(updates.length).toBe(1); // unchanged: not written again
    expect(m.allocate(g, g.spec.containers[0]!, undefined)).toBeUndefined();
    expect(m.cpusetFor(g, g.spec.containers[0]!)).toBe("1");
    active = [be, g];
    containers.push({ id: "c-g", labels: { "io.kubernetes.pod.uid": "g", "io.kubernetes.container.name": "app" } });
    await m.reconcile();
    expect(updates.slice(1)).toEqual([
      ["c-be", { cpusetCpus: "0,2-3" }],
      ["c-g", { cpusetCpus: "1" }],
    ]);
    active = [be]; // the Guaranteed pod finished: its CPU goes back to the shared pool
    containers.pop();
    await m.reconcile();
    expect(updates.slice(3)).toEqual([["c-be", { cpusetCpus: "0-3" }]]);
  });
  test("before every source is ready, assignments of pods not yet seen are kept", async () => {
    const policy = staticPolicy({ reserved: "0" });
    policy.allocatePod(pod("g", [{ name: "app", cpu: "1" }]));
    const m = new PolicyCpuManager({
      policy,
      cri: { listContainers: async () => [], updateContainerResources: async () => {} },
      pods: { activePods: () => [] },
      sources: { allSourcesReady: () => false },
      reconcilePeriodMs: 10_000,
      clock: new FakeClock(0),
      logger: memoryLogger().logger,
    });
    await m.reconcile();
    expect(policy.cpusOf("g", "app")).toEqual([1]);
  });
});

describe("sysfs topology", () => {
  test("cores from thread siblings, sockets from physical_package_id, NUMA nodes from node*/cpulist", () => {
    const sys = mkdtempSync(join(tmpdir(), "sysfs-"));
    const cpu = join(sys, "devices/system/cpu");
    mkdirSync(cpu, { recursive: true });
    writeFileSync(join(cpu, "online"), "0-3\n");
    const siblings = ["0,2", "1,3", "0,2", "1,3"];
    for (let i = 0; i < 4; i++) {
      mkdirSync(join(cpu, `cpu${i}/topology`), { recursive: true });
      writeFileSync(join(cpu, `cpu${i}/topology/thread_siblings_list`), `${siblings[i]}\n`);
      writeFileSync(join(cpu, `cpu${i}/topology/physical_package_id`), `${i % 2}\n`);
      mkdirSync(join(sys, `devices/system/node/node${i % 2}`), { recursive: true });
    }
    writeFileSync(join(sys, "devices/system/node/node0/cpulist"), "0,2\n");
    writeFileSync(join(sys, "devices/system/node/node1/cpulist"), "1,3\n");
    expect(readCpuTopology(sys).cpus).toEqual([
      { cpu: 0, core: 0, socket: 0, numa: 0 },
      { cpu: 1, core: 1, socket: 1, numa: 1 },
      { cpu: 2, core: 0, socket: 0, numa: 0 },
      { cpu: 3, core: 1, socket: 1, numa: 1 },
    ]);
  });
  test("this host's /sys reads", () => {
    expect(readCpuTopology("/sys").cpus.length).toBeGreaterThan(0);
  });
});
