/**
 * Every CRI resource value of one container on this node, as upstream's
 * generateLinuxContainerResources puts them together: CPU and memory from
 * the spec (container.ts), swap (swap.ts), the CPU manager's exclusive CPUs
 * and the memory manager's NUMA nodes. The runtime facade asks it for each
 * container it creates or resizes.
 */
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { containerLinuxResources, type ContainerLinuxResources, type ContainerResourceOptions } from "./container.ts";
import { containerSwapResources, type SwapHost } from "./swap.ts";

/** The CRI LinuxContainerResources of one container; 0 (or absent) means "not set" there. */
export interface ContainerCriResources extends ContainerLinuxResources {
  /** The CPU manager's exclusive CPUs ("1", "2-3"). */
  cpusetCpus?: string;
  /** NUMA nodes of the memory manager's pinning ("0", "0,1"). */
  cpusetMems?: string;
  memorySwapLimitInBytes?: number;
}

/** Container-level CPU, memory, swap, cpuset and OOM score values for the CRI, asked by the runtime facade. */
export interface ContainerResourceValues {
  resourcesOf(pod: Pod, container: ContainerSpec): ContainerCriResources;
}

/** A container's exclusive CPUs (the CPU manager); undefined for the shared pool. */
export interface ContainerCpusets {
  cpusetFor(pod: Pod, container: ContainerSpec): string | undefined;
}

/** A container's NUMA nodes (the memory manager); undefined when not pinned. */
export interface ContainerMemoryNodes {
  cpusetMemsFor(pod: Pod, container: ContainerSpec): string | undefined;
}

export interface NodeContainerResourcesOptions {
  /** CPU and memory values from the spec (cpuCFSQuota, memory.oom.group, MemoryQoS). */
  values: ContainerResourceOptions;
  /** memorySwap.swapBehavior and what the host has. */
  swapBehavior: string;
  swapHost: SwapHost;
  cpus: ContainerCpusets;
  memory: ContainerMemoryNodes;
}

export class NodeContainerResources implements ContainerResourceValues {
  constructor(private readonly o: NodeContainerResourcesOptions) {}

  resourcesOf(pod: Pod, container: ContainerSpec): ContainerCriResources {
    const cpusetCpus = this.o.cpus.cpusetFor(pod, container);
    const cpusetMems = this.o.memory.cpusetMemsFor(pod, container);
    const base = containerLinuxResources(pod, container, this.o.values);
    const swap = containerSwapResources(this.o.swapBehavior, pod, container, base.memoryLimitInBytes, this.o.swapHost);
    // Both write cgroup v2 files: one map with the files of each.
    const unified = { ...base.unified, ...swap.unified };
    return {
      ...base,
      ...(cpusetCpus ? { cpusetCpus } : {}),
      ...(cpusetMems ? { cpusetMems } : {}),
      ...swap,
      ...(Object.keys(unified).length > 0 ? { unified } : {}),
    };
  }
}
