/**
 * Node conditions from met thresholds, held for the pressure transition
 * period after pressure was last seen (upstream nodeConditions,
 * nodeConditionsLastObservedAt, nodeConditionsObservedSince), and the
 * taints the node lifecycle controller derives from them.
 */
import { CONDITION_TO_TAINT, NODE_CONDITIONS, SIGNAL_TO_CONDITION, type NodeConditionType, type Threshold } from "./types.ts";

/** The conditions the given (met) thresholds put the node in, in report order. */
export function nodeConditions(thresholds: readonly Threshold[]): NodeConditionType[] {
  const found = new Set(thresholds.map((t) => SIGNAL_TO_CONDITION[t.signal]));
  return NODE_CONDITIONS.filter((c) => found.has(c));
}

/** Conditions seen now are stamped `now`; the others keep their last time. */
export function nodeConditionsLastObservedAt(observed: readonly NodeConditionType[], last: ReadonlyMap<NodeConditionType, number>, now: number): Map<NodeConditionType, number> {
  const out = new Map(last);
  for (const c of observed) out.set(c, now);
  return out;
}

/** Conditions last seen less than `periodMs` ago: the ones the node reports. */
export function nodeConditionsObservedSince(lastObservedAt: ReadonlyMap<NodeConditionType, number>, periodMs: number, now: number): NodeConditionType[] {
  return NODE_CONDITIONS.filter((c) => {
    const at = lastObservedAt.get(c);
    return at !== undefined && now - at < periodMs;
  });
}

export interface PressureTaint {
  key: string;
  effect: "NoSchedule";
}

/** node.kubernetes.io/{memory,disk,pid}-pressure:NoSchedule for each condition. */
export function taintsFor(conditions: readonly NodeConditionType[]): PressureTaint[] {
  return NODE_CONDITIONS.filter((c) => conditions.includes(c)).map((c) => ({ key: CONDITION_TO_TAINT[c], effect: "NoSchedule" }));
}
