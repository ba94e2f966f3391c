/**
 * Small conversions shared by the node and pod parts: cgroup numbers to
 * Summary types, and the per-part error collection that keeps one failed
 * reading from failing the whole summary.
 */
import type { CgroupMemory, CgroupPressure } from "./cgroupfs.ts";
import type { CpuRates } from "./rate.ts";
import type { CpuStats, IoStats, MemoryStats } from "./types.ts";

export interface PartError {
  part: string;
  err: unknown;
}

/** Runs `fn`; an exception becomes an entry in `errors` and an undefined result. */
export function attempt<T>(part: string, errors: PartError[], fn: () => T): T | undefined {
  try {
    return fn();
  } catch (err) {
    errors.push({ part, err });
    return undefined;
  }
}

export function cpuStats(ctx: { rates: CpuRates; nowMs: number; time: string }, key: string, usageNs: number): CpuStats {
  const out: CpuStats = { time: ctx.time, usageCoreNanoSeconds: usageNs };
  const rate = ctx.rates.observe(key, usageNs, ctx.nowMs);
  if (rate !== undefined) out.usageNanoCores = rate;
  return out;
}

/** Summary MemoryStats of a cgroup; `capacity` stands in for the limit (the node's MemTotal). */
export function memoryStats(time: string, m: CgroupMemory, capacity?: number): MemoryStats {
  const limit = m.limitBytes ?? capacity;
  const out: MemoryStats = { time, usageBytes: m.usageBytes, workingSetBytes: m.workingSetBytes };
  if (limit !== undefined) out.availableBytes = Math.max(0, limit - m.workingSetBytes);
  if (m.rssBytes !== undefined) out.rssBytes = m.rssBytes;
  if (m.pageFaults !== undefined) out.pageFaults = m.pageFaults;
  if (m.majorPageFaults !== undefined) out.majorPageFaults = m.majorPageFaults;
  return out;
}

/**
 * KubeletPSI: a cgroup's pressure onto its Summary entry: cpu.psi and
 * memory.psi (creating either with only its time when the entry has none),
 * io = { time, psi }. Nothing for a resource whose file was not read.
 */
export function withPressure<T extends { cpu?: CpuStats; memory?: MemoryStats; io?: IoStats }>(time: string, target: T, psi: CgroupPressure | undefined): T {
  if (!psi) return target;
  if (psi.cpu) target.cpu = { ...(target.cpu ?? { time }), psi: psi.cpu };
  if (psi.memory) target.memory = { ...(target.memory ?? { time }), psi: psi.memory };
  if (psi.io) target.io = { time, psi: psi.io };
  return target;
}
