/**
 * The host's NUMA nodes from sysfs (/sys/devices/system/node), as cadvisor
 * reports them to upstream's topology and memory managers: each node's id,
 * its memory (nodeN/meminfo MemTotal), its huge pages per size
 * (nodeN/hugepages/hugepages-<size>kB/nr_hugepages) and its distances to the
 * other nodes (nodeN/distance). A kernel without NUMA has no node directory:
 * then the host is one node 0 with all of its memory, as cadvisor says.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export interface HugePages {
  pageSizeKiB: number;
  numPages: number;
}

export interface NumaNode {
  id: number;
  memoryBytes: number;
  hugePages: HugePages[];
  /** Distance to each node, indexed by node id order as the kernel lists them. */
  distances: number[];
}

export class NumaTopologyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NumaTopologyError";
  }
}

/** Reads `<sysRoot>/devices/system/node`; `fallbackMemoryBytes` is node 0's memory when the kernel lists no nodes. */
export function readNumaNodes(sysRoot: string, fallbackMemoryBytes: number): NumaNode[] {
  const dir = join(sysRoot, "devices/system/node");
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => /^node\d+$/.test(n));
  } catch {
    names = [];
  }
  if (names.length === 0) return [{ id: 0, memoryBytes: fallbackMemoryBytes, hugePages: [], distances: [10] }];
  const read = (p: string) => {
    try {
      return readFileSync(p, "utf8");
    } catch (err) {
      throw new NumaTopologyError(`cannot read ${p}: ${(err as Error).message}`);
    }
  };
  return names
    .map((name) => {
      const id = Number(name.slice(4));
      const nodeDir = join(dir, name);
      const meminfo = read(join(nodeDir, "meminfo"));
      const m = /MemTotal:\s+(\d+)\s*kB/.exec(meminfo);
      if (!m) throw new NumaTopologyError(`${join(nodeDir, "meminfo")} has no "MemTotal: N kB" line`);
      let sizes: string[] = [];
      try {
        sizes = readdirSync(join(nodeDir, "hugepages")).filter((s) => /^hugepages-\d+kB$/.test(s));
      } catch {
        // No huge pages on this node.
      }
      const hugePages = sizes
        .map((s) => ({ pageSizeKiB: Number(/\d+/.exec(s)![0]), numPages: Number(read(join(nodeDir, "hugepages", s, "nr_hugepages")).trim()) }))
        .sort((a, b) => a.pageSizeKiB - b.pageSizeKiB);
      let distances: number[] = [];
      try {
        distances = readFileSync(join(nodeDir, "distance"), "utf8").trim().split(/\s+/).map(Number);
      } catch {
        // Older kernels: no distances (prefer-closest-numa-nodes then refuses to start, as upstream).
      }
      return { id, memoryBytes: Number(m[1]) * 1024, hugePages, distances };
    })
    .sort((a, b) => a.id - b.id);
}
