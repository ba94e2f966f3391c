/**
 * How a hint provider builds its hints (upstream cpumanager
 * generateCPUTopologyHints and devicemanager generateDeviceTopologyHints):
 * every combination of NUMA nodes, one node first, then two, and so on
 * (upstream bitmask.IterateBitMasks), is a hint when what is free on it (plus
 * what the pod may reuse, all of which must lie in it) covers the request;
 * the hints as narrow as the narrowest combination that could hold the
 * request on an empty node are preferred.
 */
import { countOf, maskOf, type NumaMask, type TopologyHint } from "./policy.ts";

/** Every non-empty set of `nodes`, by size, then in lexical order of the nodes' positions. */
export function numaMasks(nodes: readonly number[]): NumaMask[] {
  const sorted = [...nodes].sort((a, b) => a - b);
  const out: NumaMask[] = [];
  const pick = (from: number, size: number, chosen: number[]) => {
    if (chosen.length === size) {
      out.push(maskOf(chosen));
      return;
    }
    for (let i = from; i < sorted.length; i++) pick(i + 1, size, [...chosen, sorted[i]!]);
  };
  for (let size = 1; size <= sorted.length; size++) pick(0, size, []);
  return out;
}

export interface HintInputs {
  /** The NUMA nodes of the resource's topology. */
  nodes: readonly number[];
  request: number;
  /** How many of the resource exist on the nodes of `mask`, free or not. */
  totalIn(mask: NumaMask): number;
  /** How many free ones lie on the nodes of `mask`. */
  availableIn(mask: NumaMask): number;
  /** How many reusable ones lie on `mask`, or undefined when one of them lies outside it (the mask is then no hint). */
  reusableIn(mask: NumaMask): number | undefined;
  /** Also preferred (the CPU manager's align-by-socket: upstream isHintSocketAligned), given the narrowest size. */
  alsoPreferred?(mask: NumaMask, minAffinitySize: number): boolean;
}

export function generateHints(i: HintInputs): TopologyHint[] {
  let minAffinitySize = i.nodes.length;
  const hints: TopologyHint[] = [];
  for (const mask of numaMasks(i.nodes)) {
    if (i.totalIn(mask) >= i.request && countOf(mask) < minAffinitySize) minAffinitySize = countOf(mask);
    const reusable = i.reusableIn(mask);
    if (reusable === undefined) continue;
    if (reusable + i.availableIn(mask) < i.request) continue;
    hints.push({ affinity: mask, preferred: false });
  }
  return hints.map((h) => ({
    affinity: h.affinity,
    preferred: i.alsoPreferred?.(h.affinity!, minAffinitySize) === true || countOf(h.affinity!) === minAffinitySize,
  }));
}
