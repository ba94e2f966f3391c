/**
 * The memory manager: policies None and Static, NUMA pinning of Guaranteed
 * pods' memory, the upstream state file, cpuset.mems through the CRI. The
 * agent builds it with createMemoryManager and gives it to the topology
 * manager as a hint provider.
 */
import { posix } from "node:path";
import type { NumaNode } from "../topologymanager/numa.ts";
import { fileStateStore } from "./checkpoint.ts";
import { type MemoryManager, type MemoryManagerDeps, PolicyMemoryManager } from "./manager.ts";
import { MemoryPolicy, type MemoryPolicyName, type SystemReserved } from "./policy.ts";

export { MemoryPolicy, MemoryManagerError, requestedMemory, podRequestedMemory, type MemoryPolicyName, type SystemReserved } from "./policy.ts";
export { PolicyMemoryManager, type MemoryManager, type MemoryManagerDeps } from "./manager.ts";
export { encodeCheckpoint, decodeCheckpoint, checkpointChecksum, spewText, type MemoryManagerState, type Block, type MachineState, type StateStore } from "./checkpoint.ts";
export { systemReservedMemory, systemReservedFromConfig, type MemoryReservationAmounts, type NodeAllocatableReservation } from "./reserved.ts";

export const MEMORY_MANAGER_STATE_FILE = "memory_manager_state";

export interface CreateMemoryManagerOptions extends Omit<MemoryManagerDeps, "policy"> {
  rootDir: string;
  policy: MemoryPolicyName;
  nodes: readonly NumaNode[];
  /** From systemReservedMemory (empty with the None policy). */
  systemReserved: SystemReserved;
  podLevelResources: boolean;
}

/** Reads (or starts) <rootDir>/memory_manager_state; throws MemoryManagerError when the agent must not start. */
export function createMemoryManager(o: CreateMemoryManagerOptions): MemoryManager {
  const statePath = posix.join(o.rootDir, MEMORY_MANAGER_STATE_FILE);
  const policy = new MemoryPolicy({
    policy: o.policy,
    nodes: o.nodes,
    systemReserved: o.systemReserved,
    store: fileStateStore(statePath),
    statePath,
    podLevelResources: o.podLevelResources,
  });
  return new PolicyMemoryManager({ policy, pods: o.pods, sources: o.sources, logger: o.logger });
}
