/**
 * The static policy's options (upstream cpumanager policy_options.go
 * NewStaticPolicyOptions with CheckPolicyOptionAvailable, 1.34): each option
 * is alpha, beta or stable and needs its feature gate; values are Go
 * booleans; some pairs cannot be used together. Of upstream's options this
 * agent acts on full-pcpus-only, distribute-cpus-across-numa and
 * align-by-socket; the others
 * pass upstream's checks first and are then refused by name.
 */

/** The options stop the agent at start (exit 2), as upstream's NewStaticPolicy error stops the kubelet. */
export class CpuPolicyOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CpuPolicyOptionsError";
  }
}

export interface StaticPolicyOptions {
  /** full-pcpus-only (stable): exclusive CPUs in whole physical cores. */
  fullPcpusOnly: boolean;
  /** distribute-cpus-across-numa (beta): spread a request that needs several NUMA nodes evenly over them. */
  distributeCpusAcrossNuma: boolean;
  /** align-by-socket (alpha): CPUs count as aligned at socket rather than NUMA boundary (hints and allocation). */
  alignBySocket: boolean;
}

const ALPHA = ["align-by-socket", "distribute-cpus-across-cores"];
const BETA = ["strict-cpu-reservation", "distribute-cpus-across-numa", "prefer-align-cpus-by-uncorecache"];
const STABLE = ["full-pcpus-only"];
/** Options this agent acts on (src/cpumanager/policy.ts, PolicyConfig). */
export const ACTED_CPU_POLICY_OPTIONS = ["full-pcpus-only", "distribute-cpus-across-numa", "align-by-socket"] as const;

/** Go's strconv.ParseBool. */
function parseGoBool(name: string, value: string): boolean {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(value)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(value)) return false;
  throw new CpuPolicyOptionsError(`bad value for option ${JSON.stringify(name)}: strconv.ParseBool: parsing ${JSON.stringify(value)}: invalid syntax`);
}

/** The gates of upstream's option maturities, from featureGates (CPUManagerPolicyAlphaOptions off and CPUManagerPolicyBetaOptions on by default in 1.34). */
export const cpuPolicyOptionGates = (featureGates: Record<string, boolean>) => ({
  alpha: featureGates["CPUManagerPolicyAlphaOptions"] === true,
  beta: featureGates["CPUManagerPolicyBetaOptions"] !== false,
});

/** `gates`: whether CPUManagerPolicyAlphaOptions (default off) and CPUManagerPolicyBetaOptions (default on) are enabled. */
export function parseStaticPolicyOptions(options: Record<string, string>, gates: { alpha: boolean; beta: boolean }): StaticPolicyOptions {
  const set = new Map<string, boolean>();
  for (const [name, value] of Object.entries(options)) {
    const alpha = ALPHA.includes(name);
    const beta = BETA.includes(name);
    if (!alpha && !beta && !STABLE.includes(name)) throw new CpuPolicyOptionsError(`unknown CPU Manager Policy option: ${JSON.stringify(name)}`);
    if (alpha && !gates.alpha) throw new CpuPolicyOptionsError(`CPU Manager Policy Alpha-level Options not enabled, but option ${JSON.stringify(name)} provided`);
    if (beta && !gates.beta) throw new CpuPolicyOptionsError(`CPU Manager Policy Beta-level Options not enabled, but option ${JSON.stringify(name)} provided`);
    set.set(name, parseGoBool(name, value));
  }
  const on = (name: string) => set.get(name) === true;
  for (const [a, b] of [
    ["full-pcpus-only", "distribute-cpus-across-cores"],
    ["distribute-cpus-across-numa", "distribute-cpus-across-cores"],
    ["prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"],
    ["prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"],
  ] as const)
    if (on(a) && on(b)) throw new CpuPolicyOptionsError(`static policy options ${a} and ${b} can not be used at the same time`);
  for (const name of set.keys())
    if (!(ACTED_CPU_POLICY_OPTIONS as readonly string[]).includes(name))
      throw new CpuPolicyOptionsError(
        `${JSON.stringify(name)}: this CPU manager policy option is not implemented by this agent; only ${ACTED_CPU_POLICY_OPTIONS.map((o) => JSON.stringify(o)).join(", ")} are`,
      );
  return { fullPcpusOnly: on("full-pcpus-only"), distributeCpusAcrossNuma: on("distribute-cpus-across-numa"), alignBySocket: on("align-by-socket") };
}

/** upstream ValidateStaticPolicyOptions, its part that needs no hardware: align-by-socket is incompatible with the single-numa-node topology manager policy. */
export function alignBySocketConfigError(opts: StaticPolicyOptions, topologyManagerPolicy: string): string | undefined {
  if (opts.alignBySocket && topologyManagerPolicy === "single-numa-node")
    return "Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option";
  return undefined;
}
