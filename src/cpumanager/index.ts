/**
 * The CPU manager: policies none and static, exclusive CPUs for Guaranteed
 * containers, the upstream state file, cpusets through the CRI. The agent
 * builds it with createCpuManager and wires admit and cpusetFor.
 */
import { posix } from "node:path";
import { fileStateStore } from "./checkpoint.ts";
import type { CpuSet } from "../util/cpuset.ts";
import { type CpuManager, type CpuManagerDeps, PolicyCpuManager } from "./manager.ts";
import { CpuPolicy, type PolicyName } from "./policy.ts";
import type { CpuTopology } from "./topology.ts";

export { type CpuSet, formatCpuSet, parseCpuSet, CpuSetParseError } from "../util/cpuset.ts";
export { readCpuTopology, TopologyError, type CpuTopology } from "./topology.ts";
export { CpuPolicy, CpuManagerError, CPU_MANAGER_POLICIES, guaranteedCpus, type CpuAdmitResult, type PolicyName } from "./policy.ts";
export { PolicyCpuManager, type CpuManager, type CpuManagerDeps } from "./manager.ts";
export { encodeCheckpoint, decodeCheckpoint, checkpointChecksum, type CpuManagerState, type StateStore } from "./checkpoint.ts";

export const CPU_MANAGER_STATE_FILE = "cpu_manager_state";

export interface CreateCpuManagerOptions extends Omit<CpuManagerDeps, "policy"> {
  rootDir: string;
  policy: PolicyName;
  /** cpuManagerPolicyOptions as src/config/cpu-policy-options.ts parses them. */
  policyOptions: { fullPcpusOnly: boolean; distributeCpusAcrossNuma: boolean; alignBySocket: boolean };
  topology: CpuTopology;
  reservedSystemCpus: CpuSet;
  reservedMilliCpu: number;
}

/** Reads (or starts) <rootDir>/cpu_manager_state; throws CpuManagerError when the agent must not start. */
export function createCpuManager(o: CreateCpuManagerOptions): CpuManager {
  const statePath = posix.join(o.rootDir, CPU_MANAGER_STATE_FILE);
  const policy = new CpuPolicy({
    policy: o.policy,
    fullPcpusOnly: o.policyOptions.fullPcpusOnly,
    distributeCpusAcrossNuma: o.policyOptions.distributeCpusAcrossNuma,
    alignBySocket: o.policyOptions.alignBySocket,
    topology: o.topology,
    reservedSystemCpus: o.reservedSystemCpus,
    reservedMilliCpu: o.reservedMilliCpu,
    store: fileStateStore(statePath),
    statePath,
  });
  const { rootDir: _r, policy: _p, policyOptions: _o, topology: _t, reservedSystemCpus: _s, reservedMilliCpu: _m, ...deps } = o;
  return new PolicyCpuManager({ ...deps, policy });
}
