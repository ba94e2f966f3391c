/**
 * The topology manager: hint merging by policy (none, best-effort,
 * restricted, single-numa-node), scope container or pod, policy options, and
 * the host's NUMA nodes from sysfs. Its hint providers (the device, CPU and
 * memory managers) are given to it by the agent.
 */
export {
  bitsOf,
  checkPolicyOnMachine,
  countOf,
  isNarrower,
  maskOf,
  mergePolicy,
  parsePolicyOptions,
  DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
  TOPOLOGY_POLICIES,
  TopologyConfigError,
  type NumaInfo,
  type NumaMask,
  type PolicyName,
  type PolicyOptions,
  type ProviderHints,
  type TopologyHint,
} from "./policy.ts";
export {
  TopologyManager,
  TOPOLOGY_AFFINITY_ERROR,
  describe,
  type AllocateFailure,
  type HintProvider,
  type Scope,
  type TopologyAdmitResult,
  type TopologyManagerOptions,
} from "./manager.ts";
export { generateHints, numaMasks, type HintInputs } from "./hints.ts";
export { readNumaNodes, NumaTopologyError, type NumaNode, type HugePages } from "./numa.ts";
