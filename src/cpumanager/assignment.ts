/**
 * Which CPUs an exclusive request takes, after upstream's
 * takeByTopologyNUMAPacked (cpumanager/cpu_assignment.go), "packed":
 * 1. whole free sockets, while the request needs at least a socket;
 * 2. whole free cores, while it needs at least a core;
 * 3. single CPUs, filling the most used sockets and cores first.
 * Sockets and cores are visited most allocated first (fewest free CPUs), then
 * by id, so that free capacity stays in whole units. (Upstream takes whole
 * NUMA nodes first where they are larger than sockets; the uncore-cache and
 * spread options are not implemented.)
 */
import type { CpuSet } from "../util/cpuset.ts";
import type { CpuInfo, CpuTopology } from "./topology.ts";

export type Take = { ok: true; cpus: CpuSet } | { ok: false; error: string };

const groupBy = (cpus: readonly CpuInfo[], key: (c: CpuInfo) => number) => {
  const out = new Map<number, CpuInfo[]>();
  for (const c of cpus) out.set(key(c), [...(out.get(key(c)) ?? []), c]);
  return out;
};

export function takeByTopology(t: CpuTopology, available: CpuSet, numCpus: number): Take {
  if (numCpus === 0) return { ok: true, cpus: [] };
  if (numCpus > available.length) return { ok: false, error: `not enough cpus available to satisfy request: requested=${numCpus}, available=${available.length}` };
  const free = new Set(available);
  const taken: number[] = [];
  const need = () => numCpus - taken.length;
  const freeIn = (cpus: readonly CpuInfo[]) => cpus.filter((c) => free.has(c.cpu));
  const take = (cpus: readonly CpuInfo[]) => {
    for (const c of cpus) {
      free.delete(c.cpu);
      taken.push(c.cpu);
    }
  };
  const order = (groups: Map<number, CpuInfo[]>) => [...groups.entries()].sort(([ia, a], [ib, b]) => freeIn(a).length - freeIn(b).length || ia - ib).map(([, cpus]) => cpus);
  const sockets = () => order(groupBy(t.cpus, (c) => c.socket));
  const cores = () => sockets().flatMap((s) => order(groupBy(s, (c) => c.core)));

  for (const socket of sockets()) if (freeIn(socket).length === socket.length && need() >= socket.length) take(socket);
  for (const core of cores()) if (freeIn(core).length === core.length && need() >= core.length) take(core);
  for (const core of cores())
    for (const c of freeIn(core).sort((a, b) => a.cpu - b.cpu)) {
      if (need() === 0) break;
      take([c]);
    }
  if (need() > 0) return { ok: false, error: "failed to allocate cpus" };
  return { ok: true, cpus: taken.sort((a, b) => a - b) };
}
