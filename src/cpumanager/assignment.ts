/**
 * Which CPUs an exclusive request takes, after upstream's
 * takeByTopologyNUMAPacked (cpumanager/cpu_assignment.go), "packed":
 * 1. whole free NUMA nodes and whole free sockets, while the request needs at
 *    least one: NUMA nodes first where each holds one or more sockets
 *    (sockets >= NUMA nodes, upstream's numaFirst), sockets first otherwise;
 * 2. whole free cores, while it needs at least a core;
 * 3. single CPUs, filling the most used cores first.
 * Every level is visited most allocated first (fewest free CPUs), then by id,
 * within the order of the level above it (numaFirst: NUMA node, socket, core;
 * socketsFirst: socket, NUMA node, core), so that free capacity stays in
 * whole units. (The uncore-cache and spread options are not implemented.)
 * takeByTopologyDistributed is upstream's takeByTopologyNUMADistributed
 * (distribute-cpus-across-numa) over this packed take.
 */
import type { CpuSet } from "../util/cpuset.ts";
import type { CpuInfo, CpuTopology } from "./topology.ts";

export type Take = { ok: true; cpus: CpuSet } | { ok: false; error: string };

type Level = "numa" | "socket" | "core";

export function takeByTopology(t: CpuTopology, available: CpuSet, numCpus: number): Take {
  if (numCpus === 0) return { ok: true, cpus: [] };
  if (numCpus > available.length) return { ok: false, error: `not enough cpus available to satisfy request: requested=${numCpus}, available=${available.length}` };
  const free = new Set(available);
  const taken: number[] = [];
  const need = () => numCpus - taken.length;
  const take = (cpus: readonly CpuInfo[]) => {
    for (const c of cpus) {
      free.delete(c.cpu);
      taken.push(c.cpu);
    }
  };
  const inUnit = (level: Level, id: number) => t.cpus.filter((c) => c[level] === id);
  const freeIn = (level: Level, id: number) => inUnit(level, id).filter((c) => free.has(c.cpu));
  /** upstream acc.sort: the units of `level` with free CPUs among `within`, fewest free CPUs first, then by id. */
  const sorted = (level: Level, within: readonly CpuInfo[]) =>
    [...new Set(within.filter((c) => free.has(c.cpu)).map((c) => c[level]))].sort((a, b) => freeIn(level, a).length - freeIn(level, b).length || a - b);
  const distinct = (level: Level) => new Set(t.cpus.map((c) => c[level])).size;
  const numaFirst = distinct("socket") >= distinct("numa");
  const [first, second]: [Level, Level] = numaFirst ? ["numa", "socket"] : ["socket", "numa"];
  const firsts = () => sorted(first, t.cpus);
  const seconds = () => firsts().flatMap((id) => sorted(second, inUnit(first, id)));
  const cores = () => seconds().flatMap((id) => sorted("core", inUnit(second, id)));
  const takeWhole = (level: Level, ids: number[]) => {
    for (const id of ids) {
      const unit = inUnit(level, id);
      if (freeIn(level, id).length === unit.length && need() >= unit.length) take(unit);
    }
  };

  takeWhole(first, firsts());
  takeWhole(second, seconds());
  takeWhole("core", cores());
  for (const core of cores())
    for (const c of freeIn("core", core).sort((a, b) => a.cpu - b.cpu)) {
      if (need() === 0) break;
      take([c]);
    }
  if (need() > 0) return { ok: false, error: "failed to allocate cpus" };
  return { ok: true, cpus: taken.sort((a, b) => a - b) };
}

/** upstream mean and standardDeviation, each rounded to three decimals. */
function standardDeviation(xs: readonly number[]): number {
  const mean = Math.round((xs.reduce((s, x) => s + x, 0) / xs.length) * 1000) / 1000;
  const sq = xs.reduce((s, x) => s + (x - mean) * (x - mean), 0);
  return Math.round(Math.sqrt(sq / xs.length) * 1000) / 1000;
}

/** upstream iterateCombinations: the k-subsets of `n` in order; `f` returns true to stop. */
function iterateCombinations(n: readonly number[], k: number, f: (combo: number[]) => boolean): void {
  if (k < 1) return;
  const helper = (start: number, left: number, acc: number[]): boolean => {
    if (left === 0) return f(acc);
    for (let i = start; i <= n.length - left; i++) if (helper(i + 1, left - 1, [...acc, n[i]!])) return true;
    return false;
  };
  helper(0, k, []);
}

/**
 * upstream takeByTopologyNUMADistributed (the distribute-cpus-across-numa
 * option): a request that is a multiple of `cpuGroupSize` (1, or CPUs per
 * core with full-pcpus-only) goes over the fewest NUMA nodes that can hold it,
 * split evenly in groups of `cpuGroupSize`; the remainder goes, a group at a
 * time, to the subset of those nodes that leaves the free CPUs of all nodes
 * most balanced (smallest standard deviation). Each node's share is taken
 * packed. Anything else (not a multiple, or no such set of nodes) is taken
 * packed over all available CPUs.
 */
export function takeByTopologyDistributed(t: CpuTopology, available: CpuSet, numCpus: number, cpuGroupSize: number): Take {
  if (numCpus % cpuGroupSize !== 0) return takeByTopology(t, available, numCpus);
  if (numCpus < 1) return { ok: true, cpus: [] };
  if (numCpus > available.length) return { ok: false, error: `not enough cpus available to satisfy request: requested=${numCpus}, available=${available.length}` };
  const free = new Set(available);
  const freeInfo = () => t.cpus.filter((c) => free.has(c.cpu));
  const freeIn = (numa: number) => freeInfo().filter((c) => c.numa === numa);
  const ids = (xs: readonly CpuInfo[], key: (c: CpuInfo) => number) => [...new Set(xs.map(key))];
  const byFree = (xs: number[], count: (id: number) => number) => xs.sort((a, b) => count(a) - count(b) || a - b);

  // upstream sortAvailableNUMANodes: NUMA nodes first when a socket holds several of them or fewer, else within sorted sockets.
  const numaNodesTotal = ids(t.cpus, (c) => c.numa).length;
  const socketsTotal = ids(t.cpus, (c) => c.socket).length;
  const avail = freeInfo();
  const numas =
    socketsTotal >= numaNodesTotal
      ? byFree(
          ids(avail, (c) => c.numa),
          (n) => avail.filter((c) => c.numa === n).length,
        )
      : byFree(
          ids(avail, (c) => c.socket),
          (s) => avail.filter((c) => c.socket === s).length,
        ).flatMap((s) =>
          byFree(
            ids(
              avail.filter((c) => c.socket === s),
              (c) => c.numa,
            ),
            (n) => avail.filter((c) => c.numa === n).length,
          ),
        );

  // upstream rangeNUMANodesNeededToSatisfy.
  const groups = Math.floor((t.cpus.length - 1) / cpuGroupSize) + 1;
  const groupsPerNuma = Math.floor((groups - 1) / numaNodesTotal) + 1;
  const groupsNeeded = Math.floor((numCpus - 1) / cpuGroupSize) + 1;
  const minNumas = Math.floor((groupsNeeded - 1) / groupsPerNuma) + 1;
  const maxNumas = Math.min(groupsNeeded, numas.length);

  const freeCount = new Map(numas.map((n) => [n, freeIn(n).length]));
  const count = (n: number) => freeCount.get(n) ?? 0;
  for (let k = minNumas; k <= maxNumas; k++) {
    let bestBalance = Number.POSITIVE_INFINITY;
    let bestRemainder: number[] = [];
    let bestCombo: number[] | undefined;
    iterateCombinations(numas, k, (combo) => {
      if (bestBalance === 0) return true;
      if (combo.reduce((s, n) => s + count(n), 0) < numCpus) return false;
      if (combo.reduce((s, n) => s + Math.floor(count(n) / cpuGroupSize), 0) * cpuGroupSize < numCpus) return false;
      const distribution = Math.floor(numCpus / combo.length / cpuGroupSize) * cpuGroupSize;
      if (combo.some((n) => count(n) < distribution)) return false;
      const after = new Map(numas.map((n) => [n, count(n)]));
      for (const n of combo) after.set(n, after.get(n)! - distribution);
      const remainder = numCpus - distribution * combo.length;
      const remainderCombo = combo.filter((n) => after.get(n)! >= cpuGroupSize);
      let bestLocalBalance = remainder === 0 ? standardDeviation([...after.values()]) : Number.POSITIVE_INFINITY;
      let bestLocalRemainder: number[] = [];
      for (let j = remainderCombo.length; remainder > 0 && j >= 1; j--)
        iterateCombinations(remainderCombo, j, (subset) => {
          const left = new Map(after);
          if (subset.reduce((s, n) => s + left.get(n)!, 0) < remainder) return false;
          let r = remainder;
          while (r > 0) {
            let progressed = false;
            for (const n of subset) {
              if (r === 0) break;
              if (left.get(n)! < cpuGroupSize) continue;
              left.set(n, left.get(n)! - cpuGroupSize);
              r -= cpuGroupSize;
              progressed = true;
            }
            // upstream loops here forever; a subset that cannot take the remainder in whole groups is not a candidate.
            if (!progressed) return false;
          }
          const balance = standardDeviation([...left.values()]);
          if (balance < bestLocalBalance) {
            bestLocalBalance = balance;
            bestLocalRemainder = subset;
          }
          return false;
        });
      if (bestLocalBalance < bestBalance) {
        bestBalance = bestLocalBalance;
        bestRemainder = bestLocalRemainder;
        bestCombo = combo;
      }
      return false;
    });
    if (bestCombo === undefined) continue;

    const taken: number[] = [];
    const takePacked = (numa: number, n: number) => {
      const got = takeByTopology(
        t,
        freeIn(numa).map((c) => c.cpu),
        n,
      );
      if (!got.ok) return;
      for (const cpu of got.cpus) {
        free.delete(cpu);
        taken.push(cpu);
      }
    };
    const distribution = Math.floor(numCpus / bestCombo.length / cpuGroupSize) * cpuGroupSize;
    for (const n of bestCombo) takePacked(n, distribution);
    let remainder = numCpus - distribution * bestCombo.length;
    while (remainder > 0) {
      let progressed = false;
      for (const n of bestRemainder) {
        if (remainder === 0) break;
        if (freeIn(n).length < cpuGroupSize) continue;
        takePacked(n, cpuGroupSize);
        remainder -= cpuGroupSize;
        progressed = true;
      }
      if (!progressed) break;
    }
    if (taken.length !== numCpus) return { ok: false, error: `accounting error, not enough CPUs allocated, remaining: ${numCpus - taken.length}` };
    return { ok: true, cpus: taken.sort((a, b) => a - b) };
  }
  return takeByTopology(t, available, numCpus);
}
