/**
 * Thresholds from the KubeletConfiguration and the pure functions upstream's
 * synchronize is built from (pkg/kubelet/eviction/helpers.go): which
 * thresholds are met, which keep being met until their minimum reclaim is
 * satisfied, and which have held for their grace period.
 */
import { parseQuantity, parseThreshold, type KubeletConfiguration } from "../config/index.ts";
import { formatQuantity, canonicalQuantity } from "./quantity-format.ts";
import { isHard, isSignal, SIGNALS, type Observation, type Observations, type Signal, type Threshold, type ThresholdValue } from "./types.ts";

export class EvictionConfigError extends Error {
  readonly kind = "EvictionConfigError";
}

type EvictionConfig = Pick<KubeletConfiguration, "evictionHard" | "evictionSoft" | "evictionSoftGracePeriod" | "evictionMinimumReclaim" | "enforceNodeAllocatable">;

/**
 * upstream ParseThresholdConfig: hard thresholds, then soft ones (each needs
 * a grace period), minimum reclaims attached to both, and — when
 * enforceNodeAllocatable has "pods" — each hard memory.available threshold
 * copied to allocatableMemory.available. "0%" and "100%" disable a
 * threshold. containerfs.* signals are ignored (see `ignored`), as upstream
 * overrides them from nodefs/imagefs. Throws EvictionConfigError naming the
 * field and signal at fault.
 */
export function parseThresholdConfig(config: EvictionConfig): { thresholds: Threshold[]; ignored: string[] } {
  const ignored: string[] = [];
  const known = (field: string, signal: string): signal is Signal => {
    if (isSignal(signal)) return true;
    if (signal.startsWith("containerfs.")) ignored.push(`${field}[${signal}]`);
    else throw new EvictionConfigError(`${field}: unsupported eviction signal ${signal}`);
    return false;
  };
  const minReclaims = new Map<Signal, ThresholdValue>();
  for (const [signal, text] of entries(config.evictionMinimumReclaim)) {
    if (!known("evictionMinimumReclaim", signal)) continue;
    minReclaims.set(signal, parseMinReclaim(signal, text));
  }
  const graces = new Map<Signal, number>();
  for (const [signal, ms] of entries(config.evictionSoftGracePeriod)) {
    if (!known("evictionSoftGracePeriod", signal)) continue;
    if (ms < 0) throw new EvictionConfigError(`evictionSoftGracePeriod: invalid eviction grace period specified: ${ms}ms, must be a positive value`);
    graces.set(signal, ms);
  }
  const out: Threshold[] = [];
  const add = (kind: "hard" | "soft", signal: Signal, value: ThresholdValue | undefined, gracePeriodMs: number) => {
    if (!value) return;
    const minReclaim = minReclaims.get(signal);
    out.push({ id: `${kind}/${signal}`, signal, value, gracePeriodMs, ...(minReclaim ? { minReclaim } : {}) });
  };
  for (const [signal, text] of entries(config.evictionHard)) {
    if (known("evictionHard", signal)) add("hard", signal, parseStatement("evictionHard", signal, text), 0);
  }
  for (const [signal, text] of entries(config.evictionSoft)) {
    if (!known("evictionSoft", signal)) continue;
    const grace = graces.get(signal);
    if (grace === undefined) throw new EvictionConfigError(`evictionSoft: grace period must be specified for the soft eviction threshold ${signal}`);
    add("soft", signal, parseStatement("evictionSoft", signal, text), grace);
  }
  if (config.enforceNodeAllocatable.includes("pods")) {
    const memory = out.find((t) => t.id === "hard/memory.available");
    if (memory) out.push({ ...memory, id: "allocatable/allocatableMemory.available", signal: "allocatableMemory.available" });
  }
  return { thresholds: sortBySignal(out), ignored };
}

function entries<V>(m: Partial<Record<string, V>> | undefined): [string, V][] {
  return Object.entries(m ?? {}).filter((e): e is [string, V] => e[1] !== undefined);
}

/** Upstream keeps percentages as float32: float32(value) / 100. */
const percentFraction = (text: string): number => Math.fround(Math.fround(Number(text.slice(0, -1))) / 100);

/** upstream parseThresholdStatement; undefined for "0%" and "100%", which upstream ignores. */
function parseStatement(field: string, signal: Signal, text: string): ThresholdValue | undefined {
  try {
    parseThreshold(text);
  } catch (err) {
    throw new EvictionConfigError(`${field}[${signal}]: ${(err as Error).message}`);
  }
  if (text.endsWith("%")) {
    if (text === "0%" || text === "100%") return undefined;
    return { kind: "percentage", fraction: percentFraction(text) };
  }
  const value = parseQuantity(text);
  if (value <= 0) throw new EvictionConfigError(`${field}: eviction threshold ${signal} must be positive: ${canonicalQuantity(text)}`);
  return { kind: "quantity", value, text };
}

/** upstream parseMinimumReclaims */
function parseMinReclaim(signal: Signal, text: string): ThresholdValue {
  if (text.endsWith("%")) {
    const fraction = percentFraction(text);
    if (!(fraction > 0)) throw new EvictionConfigError(`evictionMinimumReclaim: eviction percentage minimum reclaim ${signal} must be positive: ${text}`);
    return { kind: "percentage", fraction };
  }
  let value: number;
  try {
    value = parseQuantity(text);
  } catch (err) {
    throw new EvictionConfigError(`evictionMinimumReclaim[${signal}]: ${(err as Error).message}`);
  }
  if (value < 0) throw new EvictionConfigError(`evictionMinimumReclaim: negative eviction minimum reclaim specified for ${signal}`);
  return { kind: "quantity", value, text };
}

/** upstream GetThresholdQuantity: a percentage is int64(capacity * float32 fraction). */
export function thresholdQuantity(value: ThresholdValue, capacity: number): number {
  return value.kind === "quantity" ? value.value : Math.trunc(capacity * value.fraction);
}

/** The threshold quantity as upstream prints it in "Threshold quantity: %v". */
export function formatThresholdQuantity(value: ThresholdValue, capacity: number): string {
  return value.kind === "quantity" ? canonicalQuantity(value.text) : formatQuantity(thresholdQuantity(value, capacity), "BinarySI");
}

/**
 * upstream thresholdsMet: thresholds whose signal is below the threshold;
 * with `enforceMinReclaim`, below threshold + minimum reclaim (how a met
 * threshold stays met until the signal has recovered past the reclaim).
 * Thresholds without an observation are skipped and reported in `missing`.
 */
export function thresholdsMet(thresholds: readonly Threshold[], observations: Observations, enforceMinReclaim: boolean, missing?: Set<Signal>): Threshold[] {
  return thresholds.filter((t) => {
    const observed = observations[t.signal];
    if (!observed) {
      missing?.add(t.signal);
      return false;
    }
    let quantity = thresholdQuantity(t.value, observed.capacity);
    if (enforceMinReclaim && t.minReclaim) quantity += thresholdQuantity(t.minReclaim, observed.capacity);
    return quantity > observed.available;
  });
}

/** upstream mergeThresholds: union by identity, first list's order first. */
export function mergeThresholds(a: readonly Threshold[], b: readonly Threshold[]): Threshold[] {
  const out = [...a];
  for (const t of b) if (!out.some((o) => o.id === t.id)) out.push(t);
  return out;
}

/** upstream thresholdsFirstObservedAt: keeps the first time each still-met threshold was seen. */
export function thresholdsFirstObservedAt(thresholds: readonly Threshold[], last: ReadonlyMap<string, number>, now: number): Map<string, number> {
  return new Map(thresholds.map((t) => [t.id, last.get(t.id) ?? now]));
}

/** upstream thresholdsMetGracePeriod: the thresholds that have held for their whole grace period. */
export function thresholdsMetGracePeriod(thresholds: readonly Threshold[], firstObservedAt: ReadonlyMap<string, number>, now: number): Threshold[] {
  return thresholds.filter((t) => {
    const at = firstObservedAt.get(t.id);
    return at !== undefined && now - at >= t.gracePeriodMs;
  });
}

/**
 * upstream thresholdsUpdatedStats: act only on thresholds whose stats are
 * newer than at the last pass (or have no time), so one stale reading does
 * not evict twice.
 */
export function thresholdsUpdatedStats(thresholds: readonly Threshold[], observations: Observations, last: Observations): Threshold[] {
  return thresholds.filter((t) => {
    const observed: Observation | undefined = observations[t.signal];
    if (!observed) return false;
    const before = last[t.signal];
    return !before || observed.time === undefined || before.time === undefined || observed.time > before.time;
  });
}

/**
 * upstream byEvictionPriority: memory signals before all others. Within
 * that, signal order then hard before soft, where upstream's order is that
 * of a Go map (unspecified).
 */
export function sortBySignal(thresholds: readonly Threshold[]): Threshold[] {
  const rank = (t: Threshold) => SIGNALS.indexOf(t.signal) * 2 + (isHard(t) ? 0 : 1);
  return [...thresholds].sort((a, b) => rank(a) - rank(b));
}
