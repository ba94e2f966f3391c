/**
 * One pass of upstream's synchronize up to the point of acting, as a pure
 * function of (thresholds, previous state, observations, now):
 *
 *   met now (ignoring grace)  ∪  previously acted-on and not yet reclaimed (threshold + minReclaim)
 *     → first-observed times  → node conditions (held for the transition period)
 *     → grace periods satisfied (the new "acted-on" set)
 *     → only those whose stats are newer than last pass: what to act on now
 */
import { nodeConditions, nodeConditionsLastObservedAt, nodeConditionsObservedSince } from "./conditions.ts";
import { mergeThresholds, sortBySignal, thresholdsFirstObservedAt, thresholdsMet, thresholdsMetGracePeriod, thresholdsUpdatedStats } from "./thresholds.ts";
import type { NodeConditionType, Observations, Signal, Threshold } from "./types.ts";

export interface EvictionState {
  /** When each currently met threshold was first seen met (ms). */
  thresholdsFirstObservedAt: ReadonlyMap<string, number>;
  /** When each condition was last seen (ms); kept after pressure ends so the condition can be held. */
  nodeConditionsLastObservedAt: ReadonlyMap<NodeConditionType, number>;
  /** Thresholds met past their grace period: they stay met until minimum reclaim is satisfied. */
  thresholdsMet: readonly Threshold[];
  lastObservations: Observations;
  /** The conditions the node reports now. */
  nodeConditions: readonly NodeConditionType[];
}

export const initialEvictionState = (): EvictionState => ({
  thresholdsFirstObservedAt: new Map(),
  nodeConditionsLastObservedAt: new Map(),
  thresholdsMet: [],
  lastObservations: {},
  nodeConditions: [],
});

export interface Evaluation {
  state: EvictionState;
  /** Thresholds to reclaim for now, memory first. */
  actOn: Threshold[];
  /** Signals with a threshold but no observation in this summary. */
  missing: Set<Signal>;
}

export function evaluate(input: {
  thresholds: readonly Threshold[];
  state: EvictionState;
  observations: Observations;
  now: number;
  pressureTransitionPeriodMs: number;
}): Evaluation {
  const { state, observations, now } = input;
  const missing = new Set<Signal>();
  let met = thresholdsMet(input.thresholds, observations, false, missing);
  if (state.thresholdsMet.length > 0) met = mergeThresholds(met, thresholdsMet(state.thresholdsMet, observations, true));
  const firstObservedAt = thresholdsFirstObservedAt(met, state.thresholdsFirstObservedAt, now);
  const lastObservedAt = nodeConditionsLastObservedAt(nodeConditions(met), state.nodeConditionsLastObservedAt, now);
  const conditions = nodeConditionsObservedSince(lastObservedAt, input.pressureTransitionPeriodMs, now);
  const graceMet = thresholdsMetGracePeriod(met, firstObservedAt, now);
  const actOn = sortBySignal(thresholdsUpdatedStats(graceMet, observations, state.lastObservations));
  return {
    state: {
      thresholdsFirstObservedAt: firstObservedAt,
      nodeConditionsLastObservedAt: lastObservedAt,
      thresholdsMet: graceMet,
      lastObservations: observations,
      nodeConditions: conditions,
    },
    actOn,
    missing,
  };
}
