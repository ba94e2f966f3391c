/**
 * The memory manager (upstream pkg/kubelet/cm/memorymanager): a hint
 * provider of the topology manager (its admission pins a Guaranteed pod's
 * memory to NUMA nodes, policy.ts), and at container creation the cpuset.mems
 * of a pinned container (CRI LinuxContainerResources.cpuset_mems). State of
 * pods no longer active is released before each admission, once every pod
 * source delivered its pods (upstream removeStaleState).
 */
import type { ActivePods, SourcesReady } from "../pods/active.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { HintProvider, ProviderHints, TopologyHint } from "../topologymanager/index.ts";
import type { Logger } from "../util/log.ts";
import type { Block } from "./checkpoint.ts";
import type { MemoryPolicy } from "./policy.ts";
import { podUid } from "../pods/identity.ts";

export interface MemoryManager extends HintProvider {
  /**
   * The cpuset.mems a container is created with ("0", "0,1"); undefined: none
   * is written. Called when the container is created, which is when upstream's
   * AddContainer releases the blocks of the plain init containers before it.
   */
  cpusetMemsFor(pod: Pod, container: ContainerSpec): string | undefined;
  /** A container's pinned blocks, and each node's allocatable memory (the pod resources API). */
  memoryOf(podUid: string, container: string): readonly Block[];
  allocatableMemory(): readonly Block[];
}

export interface MemoryManagerDeps {
  policy: MemoryPolicy;
  /** The pods admitted and not terminated: whose containers keep their memory. */
  pods: Pick<ActivePods, "activePods">;
  sources: SourcesReady;
  logger: Logger;
}

export class PolicyMemoryManager implements MemoryManager {
  constructor(private readonly d: MemoryManagerDeps) {}

  /** The pod being admitted is not active yet: its own blocks (a restarted agent admits its pods again) stay. */
  private removeStale(admitting: Pod): void {
    if (this.d.sources.allSourcesReady()) this.d.policy.removeStale([...this.d.pods.activePods(), admitting]);
  }

  containerHints(pod: Pod, container: ContainerSpec): ProviderHints {
    this.removeStale(pod);
    return this.d.policy.containerHints(pod, container);
  }

  podHints(pod: Pod): ProviderHints {
    this.removeStale(pod);
    return this.d.policy.podHints(pod);
  }

  allocate(pod: Pod, container: ContainerSpec, hint: TopologyHint | undefined): string | undefined {
    this.removeStale(pod);
    const err = this.d.policy.allocate(pod, container, hint);
    if (err) this.d.logger.warn("memory manager: allocate error", { pod: pod.metadata.name, container: container.name, err });
    return err;
  }

  memoryOf(podUid: string, container: string): readonly Block[] {
    return this.d.policy.blocksOf(podUid, container);
  }

  allocatableMemory(): readonly Block[] {
    return this.d.policy.allocatableBlocks();
  }

  cpusetMemsFor(pod: Pod, container: ContainerSpec): string | undefined {
    this.d.policy.containerStarted(pod, container);
    const nodes = this.d.policy.numaNodesOf(podUid(pod), container.name);
    return nodes.length ? nodes.join(",") : undefined;
  }
}
