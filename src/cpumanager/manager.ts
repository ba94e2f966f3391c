/**
 * The CPU manager (upstream pkg/kubelet/cm/cpumanager): admission allocates
 * exclusive CPUs (policy.ts), container creation asks for a container's
 * cpuset (CRI LinuxContainerResources.cpuset_cpus), and a reconcile loop
 * every cpuManagerReconcilePeriod releases the CPUs of pods that are no
 * longer active and writes each running container's cpuset through the CRI
 * (UpdateContainerResources) when it differs from the last one written, so
 * the shared pool's containers follow it as it shrinks and grows.
 */
import type { ActivePods, SourcesReady } from "../pods/active.ts";
import { ContainerState, type CriService } from "../cri/index.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { ContainerNameLabel, PodUidLabel } from "../runtime/labels.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { formatCpuSet } from "../util/cpuset.ts";
import type { CpuPolicy } from "./policy.ts";
import { podUid } from "../pods/identity.ts";
import type { AllocateFailure, HintProvider, ProviderHints, TopologyHint } from "../topologymanager/index.ts";

/**
 * A hint provider of the topology manager (upstream: the CPU manager's
 * GetTopologyHints, GetPodTopologyHints and Allocate, which the topology
 * manager's admission calls with the merged affinity).
 */
export interface CpuManager extends HintProvider {
  /** The cpuset a container is created with; undefined: none is written. */
  cpusetFor(pod: Pod, container: ContainerSpec): string | undefined;
  /** The container's exclusive CPUs and the CPUs the policy can give (the pod resources API). */
  exclusiveCpus(podUid: string, container: string): readonly number[];
  allocatableCpus(): readonly number[];
  /** Starts the reconcile loop (static policy only). */
  start(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface CpuManagerDeps {
  policy: CpuPolicy;
  cri: Pick<CriService, "listContainers" | "updateContainerResources">;
  /** The pods admitted and not terminated: whose containers keep their exclusive CPUs. */
  pods: Pick<ActivePods, "activePods">;
  /** Stale state is released only once every pod source delivered its pods (upstream: sourcesReady). */
  sources: SourcesReady;
  reconcilePeriodMs: number;
  clock: Clock;
  logger: Logger;
}

export class PolicyCpuManager implements CpuManager {
  /** Container ID → the cpuset last written to it (upstream lastUpdateState). */
  private written = new Map<string, string>();
  private cancel: (() => void) | undefined;
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(private readonly d: CpuManagerDeps) {}

  /** upstream removeStaleState before hints and Allocate, so CPUs of finished pods are free again; the pod being admitted keeps its own. */
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

  allocate(pod: Pod, container: ContainerSpec, hint: TopologyHint | undefined): AllocateFailure | undefined {
    this.removeStale(pod);
    const err = this.d.policy.allocate(pod, container, hint?.affinity);
    if (err !== undefined) this.d.logger.warn("CPU manager: cannot allocate", { pod: pod.metadata.name, container: container.name, err });
    return err;
  }

  beginAdmission(pod: Pod): void {
    this.d.policy.beginAdmission(pod);
  }

  rollback(pod: Pod): void {
    this.d.policy.rollback(pod);
  }

  cpusetFor(pod: Pod, container: ContainerSpec): string | undefined {
    const set = this.d.policy.cpusOf(podUid(pod), container.name);
    return set?.length ? formatCpuSet(set) : undefined;
  }

  exclusiveCpus(podUid: string, container: string): readonly number[] {
    return this.d.policy.exclusiveCpus(podUid, container);
  }

  allocatableCpus(): readonly number[] {
    return this.d.policy.allocatableCpus();
  }

  start(): void {
    if (this.d.policy.name !== "static" || this.stopped) return;
    const tick = () => {
      this.running = this.reconcile().finally(() => {
        if (!this.stopped) this.cancel = this.d.clock.setTimer(this.d.reconcilePeriodMs, tick);
      });
    };
    tick();
  }

  /** One pass of upstream reconcileState. */
  async reconcile(): Promise<void> {
    const active = this.d.pods.activePods();
    if (this.d.sources.allSourcesReady()) this.d.policy.removeStale(active);
    const byUid = new Map(active.map((p) => [podUid(p), p]));
    let containers: Awaited<ReturnType<CpuManagerDeps["cri"]["listContainers"]>>;
    try {
      containers = await this.d.cri.listContainers({ state: { state: ContainerState.CONTAINER_RUNNING } });
    } catch (err) {
      this.d.logger.warn("CPU manager: cannot list containers to reconcile cpusets", { err: (err as Error).message });
      return;
    }
    const seen = new Set<string>();
    for (const c of containers) {
      seen.add(c.id);
      const pod = byUid.get(c.labels[PodUidLabel] ?? "");
      const name = c.labels[ContainerNameLabel];
      if (!pod || !name) continue;
      const set = this.d.policy.cpusOf(podUid(pod), name);
      if (!set?.length) continue;
      const cpus = formatCpuSet(set);
      if (this.written.get(c.id) === cpus) continue;
      try {
        await this.d.cri.updateContainerResources(c.id, { cpusetCpus: cpus });
        this.written.set(c.id, cpus);
        this.d.logger.info("CPU manager: container cpuset updated", { pod: pod.metadata.name, container: name, cpuset: cpus });
      } catch (err) {
        this.d.logger.warn("CPU manager: cannot update a container's cpuset", { pod: pod.metadata.name, container: name, cpuset: cpus, err: (err as Error).message });
      }
    }
    for (const id of this.written.keys()) if (!seen.has(id)) this.written.delete(id);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    this.cancel?.();
    await this.running;
  }
}
