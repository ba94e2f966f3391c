/**
 * The host's CPU topology from sysfs, as upstream's cpumanager/topology
 * builds it from cadvisor: each online CPU with its core (upstream's unique
 * core id: the lowest CPU among its thread siblings), its socket
 * (physical_package_id) and its NUMA node (/sys/devices/system/node/nodeN/cpulist).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type CpuSet, parseCpuSet } from "../util/cpuset.ts";

export interface CpuInfo {
  cpu: number;
  core: number;
  socket: number;
  numa: number;
}

export interface CpuTopology {
  cpus: readonly CpuInfo[];
}

export class TopologyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TopologyError";
  }
}

export const allCpus = (t: CpuTopology): CpuSet => t.cpus.map((c) => c.cpu).sort((a, b) => a - b);

/** CPUs per core (upstream CPUsPerCore: all CPUs over the number of cores). */
export function cpusPerCore(t: CpuTopology): number {
  const cores = new Set(t.cpus.map((c) => c.core)).size;
  return cores === 0 ? 0 : t.cpus.length / cores;
}

/** Reads `<sysRoot>/devices/system/cpu` and `<sysRoot>/devices/system/node` ("/sys" on a host). */
export function readCpuTopology(sysRoot: string): CpuTopology {
  const cpuDir = join(sysRoot, "devices/system/cpu");
  const read = (p: string) => readFileSync(p, "utf8").trim();
  let online: CpuSet;
  try {
    online = parseCpuSet(read(join(cpuDir, "online")));
  } catch (err) {
    throw new TopologyError(`cannot read the online CPUs from ${join(cpuDir, "online")}: ${(err as Error).message}`);
  }
  const numaOf = new Map<number, number>();
  const nodeDir = join(sysRoot, "devices/system/node");
  let nodes: string[] = [];
  try {
    nodes = readdirSync(nodeDir).filter((n) => /^node\d+$/.test(n));
  } catch {
    // No NUMA information (a kernel without CONFIG_NUMA): every CPU is on node 0, as cadvisor reports.
  }
  for (const n of nodes) for (const cpu of parseCpuSet(read(join(nodeDir, n, "cpulist")))) numaOf.set(cpu, Number(n.slice(4)));
  const cpus = online.map((cpu): CpuInfo => {
    const topo = join(cpuDir, `cpu${cpu}`, "topology");
    try {
      const siblings = parseCpuSet(read(join(topo, "thread_siblings_list")));
      return { cpu, core: Math.min(...siblings), socket: Number(read(join(topo, "physical_package_id"))), numa: numaOf.get(cpu) ?? 0 };
    } catch (err) {
      throw new TopologyError(`cannot read the topology of CPU ${cpu} from ${topo}: ${(err as Error).message}`);
    }
  });
  return { cpus };
}
