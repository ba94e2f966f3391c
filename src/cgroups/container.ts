/**
 * Container-level values for the CRI's LinuxContainerResources, after
 * upstream's kuberuntime (generateLinuxContainerResources /
 * calculateLinuxResources) and pkg/kubelet/qos/policy.go.
 */
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { podQosClass } from "./qos.ts";
import { aggregate, containerLimits, containerRequests, podLevelRequestsSet, podLevelResources, podLevelResourcesSet, type ResourceAmounts } from "./pod-resources.ts";
import { milliCpuToQuota, milliCpuToShares, milliValue } from "./values.ts";
import { isCriticalPod } from "../pods/source.ts";
import { hugePageLimits, hugePageUnitSize } from "./hugepages.ts";

const GUARANTEED_OOM_SCORE_ADJ = -997;
const BESTEFFORT_OOM_SCORE_ADJ = 1000;

const isNodeCriticalPod = (pod: Pod) => isCriticalPod(pod) && pod.spec.priorityClassName === "system-node-critical";

const memoryRequest = (c: ContainerSpec) => containerRequests(c).memory ?? 0;

/**
 * GetContainerOOMScoreAdjust. Guaranteed (and node-critical) containers get
 * -997, BestEffort 1000. Burstable: 1000 - 1000 * request / capacity, so a
 * container that uses more than it requested scores about 1000; clamped to
 * [1000 - 997, 999] so that it stays above Guaranteed and below BestEffort.
 * A sidecar never scores above the smallest regular container, so it is not
 * killed before the containers it serves.
 * With pod-level memory requests, the part of the pod's request its
 * containers do not request is shared equally among all of them (init and
 * sidecars included) and added to each one's request, for the sidecar's
 * smallest regular container too (upstream remainingPodMemReqPerContainer).
 */
export function containerOomScoreAdj(pod: Pod, container: ContainerSpec, memoryCapacityBytes: number): number {
  if (!(memoryCapacityBytes > 0)) throw new RangeError(`memory capacity must be positive, got ${memoryCapacityBytes}`);
  if (isNodeCriticalPod(pod)) return GUARANTEED_OOM_SCORE_ADJ;
  const qos = podQosClass(pod);
  if (qos === "Guaranteed") return GUARANTEED_OOM_SCORE_ADJ;
  if (qos === "BestEffort") return BESTEFFORT_OOM_SCORE_ADJ;

  const score = (req: number) => 1000 - Math.trunc((1000 * req) / memoryCapacityBytes);
  const remaining = podLevelRequestsSet(pod) ? remainingPodMemoryRequestPerContainer(pod) : 0;
  let adj = score(memoryRequest(container) + remaining);
  const sidecar = container.restartPolicy === "Always" && (pod.spec.initContainers ?? []).some((c) => c.name === container.name);
  if (sidecar) {
    const minRegular = Math.min(...pod.spec.containers.map(memoryRequest));
    adj = Math.min(adj, score(minRegular + remaining));
  }
  if (adj < 1000 + GUARANTEED_OOM_SCORE_ADJ) return 1000 + GUARANTEED_OOM_SCORE_ADJ;
  if (adj === BESTEFFORT_OOM_SCORE_ADJ) return adj - 1;
  return adj;
}

/** Upstream remainingPodMemReqPerContainer: (pod memory request - containers' aggregate) / number of containers, truncated. */
function remainingPodMemoryRequestPerContainer(pod: Pod): number {
  const podMemory = podLevelResources(pod)?.requests.memory ?? 0;
  if (podMemory === 0) return 0;
  const count = pod.spec.containers.length + (pod.spec.initContainers ?? []).length;
  return Math.trunc((podMemory - (aggregate(pod, containerRequests).memory ?? 0)) / count);
}

/**
 * kuberuntime getCPULimit / getMemoryLimit: a container without its own
 * limit is bounded by the pod's (spec.resources.limits) when the pod sets
 * pod-level resources; 0 when neither has one.
 */
export function effectiveContainerLimit(pod: Pod, container: ContainerSpec, name: "cpu" | "memory"): number {
  const own = containerLimits(container)[name] ?? 0;
  if (own === 0 && podLevelResourcesSet(pod)) return podLevelResources(pod)?.limits[name] ?? 0;
  return own;
}

export interface ContainerResourceOptions {
  /** The machine's memory (cadvisor MachineInfo.MemoryCapacity). */
  memoryCapacityBytes: number;
  /** cpuCFSQuota from the configuration. */
  cpuCFSQuota: boolean;
  cpuCFSQuotaPeriodUs: number;
  /**
   * MemoryQoS (the alpha gate) on a cgroup v2 node: memory.min and memory.high
   * through the CRI's unified map. Unset: neither (the gate off, or cgroup v1).
   */
  memoryQoS?: ContainerMemoryQoS;
  /**
   * memory.oom.group = 1 through the unified map, so an OOM kill takes every
   * process of the container, not one: upstream's default on cgroup v2, off
   * on cgroup v1 and with singleProcessOOMKill: true.
   */
  oomGroup: boolean;
  /** The host's huge page sizes as the kernel names them ("2MB", "1GB"; libcontainer HugePageSizes): each gets a CRI limit. */
  hugePageSizes: readonly string[];
}

export interface ContainerMemoryQoS {
  /** memoryThrottlingFactor, in (0, 1]. */
  throttlingFactor: number;
  /** Node allocatable memory: stands in for the limit of a container without one. */
  allocatableMemoryBytes: number;
}

/** upstream's defaultPageSize (os.Getpagesize on the node): memory.high is a whole number of pages. */
export const PAGE_SIZE = 4096;

/**
 * MemoryQoS values of one container (generateLinuxContainerResources):
 * memory.min = its memory request; memory.high, only when request and
 * limit differ (never for a Guaranteed container), =
 * floor((request + factor × (limit or node allocatable − request)) / page) × page,
 * and only when above the request. Values are decimal byte counts.
 */
export function containerMemoryQoS(container: ContainerSpec, qos: ContainerMemoryQoS): Record<string, string> {
  const request = containerRequests(container).memory ?? 0;
  const limit = containerLimits(container).memory ?? 0;
  const unified: Record<string, string> = {};
  if (request !== 0) unified["memory.min"] = String(request);
  if (request !== limit) {
    const ceiling = limit !== 0 ? limit : qos.allocatableMemoryBytes;
    const high = ceiling > 0 ? Math.floor((request + (ceiling - request) * qos.throttlingFactor) / PAGE_SIZE) * PAGE_SIZE : 0;
    if (high !== 0 && high > request) unified["memory.high"] = String(high);
  }
  return unified;
}

/** The numbers of the CRI LinuxContainerResources; 0 means "not set" there. */
export interface ContainerLinuxResources {
  cpuShares: number;
  cpuQuota: number;
  cpuPeriod: number;
  memoryLimitInBytes: number;
  oomScoreAdj: number;
  /** cgroup v2 files for the runtime to write (memory.oom.group, MemoryQoS); absent when none. */
  unified?: Record<string, string>;
  /** One limit per huge page size of the host, in bytes; 0 for a size the container does not ask for. */
  hugepageLimits: { pageSize: string; limit: number }[];
}

/**
 * upstream GetHugepageLimitsFromResources: every page size of the host with
 * limit 0 (no huge pages of that size), then the pod's `hugepages-<size>`
 * limits when it sets pod-level resources, then the container's own, which
 * win per size. A size the host does not have is not sent (the pod was not
 * admitted with it anyway).
 */
export function containerHugepageLimits(container: ContainerSpec, hostSizes: readonly string[], podLevelLimits: ResourceAmounts = {}): { pageSize: string; limit: number }[] {
  const wanted = new Map<string, number>();
  for (const list of [podLevelLimits, containerLimits(container)]) {
    for (const [bytes, limit] of hugePageLimits(list)) {
      try {
        wanted.set(hugePageUnitSize(bytes), limit);
      } catch {
        // not a size the kernel can have: as upstream, skipped
      }
    }
  }
  return hostSizes.map((pageSize) => ({ pageSize, limit: wanted.get(pageSize) ?? 0 }));
}

/**
 * The CRI resources of one container of `pod` (regular, init or sidecar):
 * shares from the CPU request (the limit when it names no request), quota
 * from the CPU limit over the configured period (0, unlimited, without a
 * limit; quota and period 0 when cpuCFSQuota is off), memory limit (0
 * without one), the OOM score adjustment of its QoS class, and a huge page
 * limit per size. The cpu and memory limits are the pod's where the
 * container has none and the pod sets pod-level resources
 * (effectiveContainerLimit).
 */
export function containerLinuxResources(pod: Pod, container: ContainerSpec, opts: ContainerResourceOptions): ContainerLinuxResources {
  const cpuLimit = effectiveContainerLimit(pod, container, "cpu");
  const memoryLimit = effectiveContainerLimit(pod, container, "memory");
  const requested = container.resources?.requests?.cpu;
  const cpuShares = milliCpuToShares(requested === undefined ? cpuLimit : milliValue(requested));
  const cpuPeriod = opts.cpuCFSQuota ? opts.cpuCFSQuotaPeriodUs : 0;
  const cpuQuota = opts.cpuCFSQuota ? milliCpuToQuota(cpuLimit, cpuPeriod) : 0;
  const unified = { ...(opts.oomGroup ? { "memory.oom.group": "1" } : {}), ...(opts.memoryQoS ? containerMemoryQoS(container, opts.memoryQoS) : {}) };
  return {
    cpuShares,
    cpuQuota,
    cpuPeriod,
    memoryLimitInBytes: memoryLimit,
    oomScoreAdj: containerOomScoreAdj(pod, container, opts.memoryCapacityBytes),
    ...(Object.keys(unified).length > 0 ? { unified } : {}),
    hugepageLimits: containerHugepageLimits(container, opts.hugePageSizes, podLevelResourcesSet(pod) ? podLevelResources(pod)?.limits : undefined),
  };
}
