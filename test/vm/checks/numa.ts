/**
 * NUMA alignment on a real two-node kernel (the VM boots with two NUMA
 * nodes of one socket each): the CPU topology and the
 * NUMA nodes are read from the VM's sysfs as the agent reads them, and the
 * static CPU manager (a hint provider) and the topology manager admit pods
 * with policy restricted. Run only when the kernel command line says
 * bunlet.probe=numa (test/integration/numa-vm.test.ts).
 */
import { CpuPolicy, PolicyCpuManager, readCpuTopology } from "../../../src/cpumanager/index.ts";
import { memoryStateStore } from "../../../src/cpumanager/fake.ts";
import type { Pod } from "../../../src/pods/schema.ts";
import { readNumaNodes, TopologyManager } from "../../../src/topologymanager/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { memoryLogger } from "../../../src/util/log.ts";
import type { ProbeCheck } from "../protocol.ts";

const guaranteed = (uid: string, cpus: number): Pod =>
  ({
    metadata: { name: uid, namespace: "default", uid },
    spec: { containers: [{ name: "c", image: "x", resources: { requests: { cpu: String(cpus), memory: "64Mi" }, limits: { cpu: String(cpus), memory: "64Mi" } } }] },
  }) as unknown as Pod;

export const numaChecks: ProbeCheck[] = [
  {
    name: "numa-topology",
    async run() {
      const topology = readCpuTopology("/sys");
      const nodes = readNumaNodes("/sys", 0).map((n) => ({ id: n.id, memoryMiB: Math.round(n.memoryBytes / 2 ** 20), distances: n.distances }));
      return { cpus: topology.cpus, nodes };
    },
  },
  {
    name: "numa-restricted-cpus",
    async run() {
      const topology = readCpuTopology("/sys");
      const nodes = readNumaNodes("/sys", 0);
      const policy = new CpuPolicy({
        policy: "static",
        fullPcpusOnly: false,
        distributeCpusAcrossNuma: false,
        topology,
        reservedSystemCpus: [0],
        reservedMilliCpu: 0,
        store: memoryStateStore(),
        statePath: "/tmp/cpu_manager_state",
      });
      const cpuManager = new PolicyCpuManager({
        policy,
        cri: { listContainers: async () => [], updateContainerResources: async () => {} },
        pods: { activePods: () => [] },
        sources: { allSourcesReady: () => false },
        reconcilePeriodMs: 10_000,
        clock: new FakeClock(0),
        logger: memoryLogger().logger,
      });
      const tm = new TopologyManager({
        policy: "restricted",
        scope: "container",
        options: { preferClosestNuma: false, maxAllowableNumaNodes: 8 },
        numa: { nodes: nodes.map((n) => n.id), distances: new Map(nodes.map((n) => [n.id, n.distances])) },
        providers: [cpuManager],
        logger: memoryLogger().logger,
      });
      const out: Record<string, unknown> = {};
      for (const [uid, cpus] of [
        ["two", 2],
        ["one", 1],
        ["more", 1],
      ] as const) {
        const p = guaranteed(uid, cpus);
        out[uid] = {
          hints: String(JSON.stringify(cpuManager.containerHints(p, p.spec.containers[0]!), (_k, v) => (typeof v === "bigint" ? Number(v) : v))),
          admit: tm.admit(p),
          cpus: policy.exclusiveCpus(uid, "c"),
        };
      }
      return out;
    },
  },
];
