/**
 * CPU and memory numbers as the kernel wants them, after upstream's
 * pkg/kubelet/cm/helpers_linux.go and pkg/kubelet/kuberuntime/helpers_linux.go.
 * Pure; integer arithmetic truncates like Go's int64 division.
 */
import { parseQuantity } from "../config/index.ts";

/** Kernel limits of cpu.shares (kernel/sched/sched.h MIN_SHARES, MAX_SHARES). */
export const MIN_SHARES = 2;
export const MAX_SHARES = 262144;
const SHARES_PER_CPU = 1024;
const MILLI_CPU_TO_CPU = 1000;
/** The default CFS period, 100 ms in microseconds. */
export const QUOTA_PERIOD_US = 100_000;
/** The kernel refuses a quota below 1 ms. */
export const MIN_QUOTA_PERIOD_US = 1000;

/** Quantities go through float64; drop the float noise before rounding up
 *  ("1.1" is 1.1000000000000001 cores, which must be 1100m, not 1101m). */
const ceilClean = (x: number): number => Math.ceil(Number(x.toPrecision(15)));

/** Quantity.MilliValue(): ceil(q * 1000). */
export function milliValue(q: string | number | undefined): number {
  if (q === undefined) return 0;
  return ceilClean((typeof q === "number" ? q : parseQuantity(q)) * 1000);
}

/** Quantity.Value(): ceil(q). */
export function intValue(q: string | number | undefined): number {
  if (q === undefined) return 0;
  return ceilClean(typeof q === "number" ? q : parseQuantity(q));
}

/** MilliCPUToShares: 0 (no request) is the kernel minimum, not the kernel default 1024. */
export function milliCpuToShares(milliCpu: number): number {
  if (milliCpu === 0) return MIN_SHARES;
  const shares = Math.trunc((milliCpu * SHARES_PER_CPU) / MILLI_CPU_TO_CPU);
  return Math.min(MAX_SHARES, Math.max(MIN_SHARES, shares));
}

/**
 * MilliCPUToQuota: the CFS quota in microseconds for a CPU limit over
 * `periodUs`; 0 for no limit, at least 1 ms otherwise.
 */
export function milliCpuToQuota(milliCpu: number, periodUs: number): number {
  if (milliCpu === 0) return 0;
  return Math.max(MIN_QUOTA_PERIOD_US, Math.trunc((milliCpu * periodUs) / MILLI_CPU_TO_CPU));
}

/**
 * How cgroup v1 cpu.shares become cgroup v2 cpu.weight:
 * - `linear` is KEP-2254's `1 + ((shares - 2) * 9999) / 262142`, what runc
 *   before 1.3.2 (Debian 12 ships 1.1.5) writes for containers;
 * - `quadratic` is opencontainers/cgroups v0.0.5 (runc >= 1.3.2, crun >= 1.23):
 *   `ceil(10^((L^2 + 125L)/612 - 7/34))` with L = log2(shares), which maps the
 *   v1 default 1024 to the v2 default 100 (linear gives 39).
 * Pod and container cgroups should use the runtime's formula, so siblings compare
 * fairly. 0 means unset in both.
 */
export type CpuWeightFormula = "linear" | "quadratic";

export function sharesToCpuWeight(shares: number, formula: CpuWeightFormula = "linear"): number {
  if (shares === 0) return 0;
  if (formula === "linear") {
    // Out-of-range shares would give an out-of-range weight the kernel refuses.
    const s = Math.min(MAX_SHARES, Math.max(MIN_SHARES, shares));
    return 1 + Math.trunc(((s - 2) * 9999) / 262142);
  }
  if (shares <= MIN_SHARES) return 1;
  if (shares >= MAX_SHARES) return 10000;
  const l = Math.log2(shares);
  const exponent = (l * l + 125 * l) / 612 - 7 / 34;
  return Math.ceil(10 ** exponent);
}
