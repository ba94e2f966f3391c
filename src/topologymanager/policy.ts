/**
 * Topology hints and how a policy merges them (upstream
 * pkg/kubelet/cm/topologymanager policy*.go): every hint provider gives, per
 * resource, the NUMA node sets that could satisfy a container (or a pod) and
 * whether each is preferred; the policy tries every combination, ANDs the
 * sets and keeps the best. best-effort admits whatever wins, restricted and
 * single-numa-node admit only a preferred result (single-numa-node keeps only
 * hints of one node first).
 */
import { StartupConfigError } from "../util/errors.ts";

/** A set of NUMA node ids as a bit mask (bit N: node N). */
export type NumaMask = bigint;

export const maskOf = (nodes: readonly number[]): NumaMask => nodes.reduce((m, n) => m | (1n << BigInt(n)), 0n);
export const bitsOf = (m: NumaMask): number[] => {
  const out: number[] = [];
  for (let i = 0; m >> BigInt(i) !== 0n; i++) if ((m >> BigInt(i)) & 1n) out.push(i);
  return out;
};
export const countOf = (m: NumaMask): number => bitsOf(m).length;
/** upstream IsNarrowerThan: fewer nodes, or as many with lower-numbered ones. */
export const isNarrower = (a: NumaMask, b: NumaMask): boolean => (countOf(a) === countOf(b) ? a < b : countOf(a) < countOf(b));

/** `affinity` undefined: no preference (upstream's nil NUMANodeAffinity). */
export interface TopologyHint {
  affinity: NumaMask | undefined;
  preferred: boolean;
}

/**
 * Per resource name: the provider's hints. A provider that returns undefined
 * (or no resource) has no preference; a resource with undefined hints has no
 * preference; a resource with an empty list cannot be satisfied anywhere.
 */
export type ProviderHints = Record<string, TopologyHint[] | undefined> | undefined;

export type PolicyName = "none" | "best-effort" | "restricted" | "single-numa-node";
export const TOPOLOGY_POLICIES: readonly PolicyName[] = ["none", "best-effort", "restricted", "single-numa-node"];

export interface PolicyOptions {
  preferClosestNuma: boolean;
  maxAllowableNumaNodes: number;
}

export const DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8;
const STABLE_OPTIONS = ["prefer-closest-numa-nodes"];
const BETA_OPTIONS = ["max-allowable-numa-nodes"];

export class TopologyConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TopologyConfigError";
  }
}

/**
 * upstream NewManager's checks against the machine, for any policy but none:
 * prefer-closest-numa-nodes needs the NUMA distances, and a machine with more
 * NUMA nodes than max-allowable-numa-nodes is refused. The agent does not start (exit 2).
 */
export function checkPolicyOnMachine(policy: PolicyName, options: PolicyOptions, nodes: readonly { distances: readonly number[] }[]): void {
  if (policy === "none") return;
  if (options.preferClosestNuma && nodes.some((n) => n.distances.length === 0))
    throw new StartupConfigError(
      "topologyManagerPolicyOptions prefer-closest-numa-nodes: cannot discover NUMA topology: error getting NUMA distances (no /sys/devices/system/node/nodeN/distance)",
    );
  if (nodes.length > options.maxAllowableNumaNodes)
    throw new StartupConfigError(
      `topologyManagerPolicy ${JSON.stringify(policy)}: unsupported on machines with more than ${options.maxAllowableNumaNodes} NUMA Nodes (max-allowable-numa-nodes)`,
    );
}

/** upstream NewPolicyOptions with CheckPolicyOptionAvailable; `betaEnabled`: the TopologyManagerPolicyBetaOptions gate. */
export function parsePolicyOptions(options: Record<string, string>, betaEnabled: boolean): PolicyOptions {
  const opts: PolicyOptions = { preferClosestNuma: false, maxAllowableNumaNodes: DEFAULT_MAX_ALLOWABLE_NUMA_NODES };
  for (const [name, value] of Object.entries(options)) {
    if (!STABLE_OPTIONS.includes(name) && !BETA_OPTIONS.includes(name)) throw new TopologyConfigError(`unknown Topology Manager Policy option: ${JSON.stringify(name)}`);
    if (BETA_OPTIONS.includes(name) && !betaEnabled)
      throw new TopologyConfigError(`topology manager policy beta-level options not enabled, but option ${JSON.stringify(name)} provided`);
    if (name === "prefer-closest-numa-nodes") {
      // Go's strconv.ParseBool.
      if (["1", "t", "T", "TRUE", "true", "True"].includes(value)) opts.preferClosestNuma = true;
      else if (["0", "f", "F", "FALSE", "false", "False"].includes(value)) opts.preferClosestNuma = false;
      else throw new TopologyConfigError(`bad value for option ${JSON.stringify(name)}: strconv.ParseBool: parsing ${JSON.stringify(value)}: invalid syntax`);
    } else {
      if (!/^[+-]?\d+$/.test(value))
        throw new TopologyConfigError(`unable to convert policy option to integer ${JSON.stringify(name)}: strconv.Atoi: parsing ${JSON.stringify(value)}: invalid syntax`);
      const n = Number(value);
      if (n < DEFAULT_MAX_ALLOWABLE_NUMA_NODES)
        throw new TopologyConfigError(`the minimum value of ${JSON.stringify(name)} should not be less than ${DEFAULT_MAX_ALLOWABLE_NUMA_NODES}`);
      opts.maxAllowableNumaNodes = n;
    }
  }
  return opts;
}

export interface NumaInfo {
  nodes: readonly number[];
  /** Node id → distance to each node id (only read with prefer-closest-numa-nodes). */
  distances: ReadonlyMap<number, readonly number[]>;
}

function averageDistance(info: NumaInfo, m: NumaMask): number {
  const bits = bitsOf(m);
  if (bits.length === 0) return 0;
  let sum = 0;
  for (const a of bits) for (const b of bits) sum += info.distances.get(a)?.[b] ?? 0;
  return sum / (bits.length * bits.length);
}

/** upstream NUMAInfo.Closest: fewer nodes, then the lower average distance, then lower-numbered nodes. */
function closest(info: NumaInfo, a: NumaMask, b: NumaMask): NumaMask {
  if (countOf(a) !== countOf(b)) return isNarrower(a, b) ? a : b;
  const da = averageDistance(info, a);
  const db = averageDistance(info, b);
  if (da === db) return a < b ? a : b;
  return da < db ? a : b;
}

/** upstream filterProvidersHints: one list of hints per (provider, resource). */
function filterProvidersHints(providers: readonly ProviderHints[]): TopologyHint[][] {
  const out: TopologyHint[][] = [];
  for (const hints of providers) {
    if (!hints || Object.keys(hints).length === 0) {
      out.push([{ affinity: undefined, preferred: true }]);
      continue;
    }
    for (const resource of Object.keys(hints)) {
      const list = hints[resource];
      if (list === undefined) out.push([{ affinity: undefined, preferred: true }]);
      else if (list.length === 0) out.push([{ affinity: undefined, preferred: false }]);
      else out.push(list);
    }
  }
  return out;
}

function narrowestOf(hints: readonly TopologyHint[]): NumaMask | undefined {
  let best: NumaMask | undefined;
  for (const h of hints) if (h.affinity !== undefined && (best === undefined || isNarrower(h.affinity, best))) best = h.affinity;
  return best;
}

/** upstream HintMerger.Merge. */
function mergeHints(info: NumaInfo, hints: TopologyHint[][], policy: PolicyName, opts: PolicyOptions): TopologyHint {
  const defaultMask = maskOf(info.nodes);
  let bestNonPreferredCount = 0;
  for (const list of hints) {
    const n = narrowestOf(list);
    if (n !== undefined && countOf(n) > bestNonPreferredCount) bestNonPreferredCount = countOf(n);
  }
  const compareMasks = (current: TopologyHint, candidate: TopologyHint): TopologyHint => {
    if (candidate.affinity === current.affinity) return current;
    const best =
      policy !== "single-numa-node" && opts.preferClosestNuma
        ? closest(info, current.affinity!, candidate.affinity!)
        : isNarrower(current.affinity!, candidate.affinity!)
          ? current.affinity!
          : candidate.affinity!;
    return best === current.affinity ? current : candidate;
  };
  const compare = (current: TopologyHint | undefined, candidate: TopologyHint): TopologyHint | undefined => {
    const cand = countOf(candidate.affinity ?? 0n);
    if (cand === 0) return current;
    if (!current) return candidate;
    const cur = countOf(current.affinity ?? 0n);
    if (!current.preferred && candidate.preferred) return candidate;
    if (current.preferred && !candidate.preferred) return current;
    if (current.preferred && candidate.preferred) return compareMasks(current, candidate);
    // Neither is preferred: prefer the one as wide as the widest narrowest hint.
    if (cur > bestNonPreferredCount) return compareMasks(current, candidate);
    if (cur === bestNonPreferredCount) return cand !== bestNonPreferredCount ? current : compareMasks(current, candidate);
    if (cand > bestNonPreferredCount) return current;
    if (cand === bestNonPreferredCount) return candidate;
    if (cand > cur) return candidate;
    if (cand < cur) return current;
    return compareMasks(current, candidate);
  };
  let best: TopologyHint | undefined;
  const iterate = (i: number, accum: TopologyHint[]) => {
    if (i === hints.length) {
      // upstream mergePermutation: AND of the affinities; preferred when all are preferred and agree.
      let preferred = true;
      let merged = defaultMask;
      let first: NumaMask | undefined;
      for (const h of accum) {
        if (h.affinity !== undefined) {
          if (first === undefined) first = h.affinity;
          else if (h.affinity !== first) preferred = false;
          merged &= h.affinity;
        }
        if (!h.preferred) preferred = false;
      }
      best = compare(best, { affinity: merged, preferred });
      return;
    }
    for (const h of hints[i]!) iterate(i + 1, [...accum, h]);
  };
  iterate(0, []);
  return best ?? { affinity: defaultMask, preferred: false };
}

/** A policy's Merge: the best hint and whether the pod may be admitted with it. Not called for "none". */
export function mergePolicy(policy: PolicyName, info: NumaInfo, opts: PolicyOptions, providers: readonly ProviderHints[]): { hint: TopologyHint; admit: boolean } {
  let filtered = filterProvidersHints(providers);
  if (policy === "single-numa-node") filtered = filtered.map((list) => list.filter((h) => h.preferred && (h.affinity === undefined || countOf(h.affinity) === 1)));
  let hint = mergeHints(info, filtered, policy, opts);
  if (policy === "single-numa-node" && hint.affinity === maskOf(info.nodes)) hint = { affinity: undefined, preferred: hint.preferred };
  return { hint, admit: policy === "best-effort" || policy === "none" ? true : hint.preferred };
}
