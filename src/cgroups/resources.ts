/**
 * What each level of the cgroup tree gets, as plain values:
 *   node  (kubepods)             nodeResourceConfig     ← node_container_manager_linux.go
 *   QoS   (burstable, besteffort) qosResourceConfigs    ← qos_container_manager_linux.go
 *   pod   (pod<uid>)             podResourceConfig      ← helpers_linux.go ResourceConfigForPod
 * Pure functions of the pods and options; the writers (v1.ts, v2.ts) only
 * turn a ResourceConfig into file writes.
 */
import type { Pod } from "../pods/schema.ts";
import { amounts, podLimits, podRequests } from "./pod-resources.ts";
import { podQosClass, type QosClass } from "./qos.ts";
import { MIN_SHARES, intValue, milliCpuToQuota, milliCpuToShares, milliValue } from "./values.ts";
import { HUGETLB_UNBOUNDED, hugePageLimits } from "./hugepages.ts";

/**
 * One cgroup's settings in cgroup v1 terms (v2 converts shares to a weight).
 * An absent field is left as it is; -1 means unlimited ("max").
 */
export interface ResourceConfig {
  cpuShares?: number;
  /** Microseconds per period; -1 unlimited. */
  cpuQuota?: number;
  /** Microseconds. */
  cpuPeriod?: number;
  /** Bytes; -1 unlimited. */
  memoryLimit?: number;
  /** cgroup v2 memory.min in bytes (memory QoS only). */
  memoryMin?: number;
  /** -1 unlimited. */
  pidsLimit?: number;
  /**
   * Huge page limits, page size in bytes → bytes. When present, every size
   * of the host it does not name gets 0 (upstream maybeSetHugetlb); written
   * only where the hugetlb controller is.
   */
  hugePageLimits?: ReadonlyMap<number, number>;
}

export { containerLimits, containerRequests, podLimits, podRequests, type ResourceAmounts } from "./pod-resources.ts";

export interface PodResourceOptions {
  /** cpuCFSQuota: enforce CPU limits with CFS quota (false writes quota -1). */
  cpuCFSQuota: boolean;
  cpuCFSQuotaPeriodUs: number;
  /** podPidsLimit; -1 (or 0) leaves the pod unlimited below kubepods. */
  podPidsLimit: number;
  /** MemoryQoS (cgroup v2): memory.min = the pod's memory requests. */
  memoryQoS?: boolean;
}

/**
 * ResourceConfigForPod: Guaranteed pods get shares, quota and memory limit;
 * Burstable pods get shares, and quota / memory limit only when every
 * container declares that limit (one unlimited container makes the pod
 * unlimited) or the pod sets it in spec.resources; BestEffort pods get the
 * minimum shares. Requests and limits are the pod-level ones where the pod
 * sets them (pod-resources.ts).
 * Deliberate difference: upstream leaves pids.max unset when podPidsLimit <= 0;
 * here it is written as -1 ("max"), the same on a new cgroup, and an update
 * from a limited value back to unlimited takes effect.
 */
export function podResourceConfig(pod: Pod, opts: PodResourceOptions): ResourceConfig {
  const reqs = podRequests(pod);
  const { limits, cpuDeclared, memoryDeclared } = podLimits(pod);
  const cpuShares = milliCpuToShares(reqs.cpu ?? 0);
  const cpuPeriod = opts.cpuCFSQuotaPeriodUs;
  const cpuQuota = opts.cpuCFSQuota ? milliCpuToQuota(limits.cpu ?? 0, cpuPeriod) : -1;
  const memoryLimit = limits.memory ?? 0;
  const pidsLimit = opts.podPidsLimit > 0 ? opts.podPidsLimit : -1;

  const qos = podQosClass(pod);
  // Huge pages by request (the API makes requests equal limits), whatever the QoS class.
  const config: ResourceConfig = { pidsLimit, hugePageLimits: hugePageLimits(reqs) };
  if (qos === "Guaranteed") {
    Object.assign(config, { cpuShares, cpuQuota, cpuPeriod, memoryLimit });
  } else if (qos === "Burstable") {
    config.cpuShares = cpuShares;
    if (cpuDeclared) Object.assign(config, { cpuQuota, cpuPeriod });
    if (memoryDeclared) config.memoryLimit = memoryLimit;
  } else {
    config.cpuShares = MIN_SHARES;
  }
  if (opts.memoryQoS && (reqs.memory ?? 0) > 0) config.memoryMin = reqs.memory;
  return config;
}

export interface NodeAllocatable {
  cpuMilli: number;
  memoryBytes: number;
  pids?: number;
  /** hugepages-<size> → bytes: the pools (not enforcing) or the pools − reserved (enforcing), as upstream writes either on kubepods. */
  hugePages?: Readonly<Record<string, number>>;
}

/**
 * kubepods (getCgroupConfig of node allocatable): cpu shares always, since
 * the default 1024 would starve pods against the rest of the node; memory
 * and pids only when enforcing ("pods" in enforceNodeAllocatable).
 * Upstream writes the node's capacity when not enforcing; without a capacity
 * here, unlimited (-1) is written, which the parent bounds the same way.
 */
export function nodeResourceConfig(allocatable: NodeAllocatable, enforce: boolean): ResourceConfig {
  return {
    cpuShares: milliCpuToShares(allocatable.cpuMilli),
    memoryLimit: enforce ? allocatable.memoryBytes : -1,
    pidsLimit: enforce && allocatable.pids !== undefined && allocatable.pids > 0 ? allocatable.pids : -1,
    hugePageLimits: hugePageLimits(allocatable.hugePages ?? {}),
  };
}

/** setHugePagesUnbounded: the QoS levels never bound huge pages (every host size gets 1 << 62). */
export const unboundedHugePages = (hostSizesBytes: readonly number[]): ReadonlyMap<number, number> => new Map(hostSizesBytes.map((size) => [size, HUGETLB_UNBOUNDED]));

export interface QosOptions {
  /** MemoryQoS on cgroup v2: memory.min of burstable = its pods' memory requests,
   *  of kubepods (the Guaranteed level) = Guaranteed + Burstable requests. */
  memoryQoS?: boolean;
  /** qosReserved memory percentage (QOSReserved): caps burstable and besteffort
   *  so that this share of higher classes' requests stays free. */
  qosReservedMemoryPercent?: number;
  /** Needed for qosReserved; without it no memory limits are computed. */
  allocatableMemoryBytes?: number;
}

export interface QosResourceConfigs {
  /** The Guaranteed level is kubepods itself; only memory QoS touches it here. */
  guaranteed: ResourceConfig;
  burstable: ResourceConfig;
  besteffort: ResourceConfig;
}

/**
 * UpdateCgroups of the QoS container manager: burstable shares follow the
 * sum of Burstable pods' CPU requests (2 when there are none); besteffort
 * always has the minimum shares.
 */
export function qosResourceConfigs(activePods: readonly Pod[], opts: QosOptions = {}): QosResourceConfigs {
  let burstableCpu = 0;
  const memReq: Record<QosClass, number> = { Guaranteed: 0, Burstable: 0, BestEffort: 0 };
  for (const pod of activePods) {
    const qos = podQosClass(pod);
    const reqs = podRequests(pod);
    if (qos === "Burstable") burstableCpu += reqs.cpu ?? 0;
    if (qos !== "BestEffort") memReq[qos] += reqs.memory ?? 0;
  }
  const out: QosResourceConfigs = {
    guaranteed: {},
    burstable: { cpuShares: milliCpuToShares(burstableCpu) },
    besteffort: { cpuShares: MIN_SHARES },
  };
  if (opts.memoryQoS) {
    const burstableMin = memReq.Burstable;
    const guaranteedMin = memReq.Guaranteed + burstableMin;
    if (burstableMin > 0) out.burstable.memoryMin = burstableMin;
    if (guaranteedMin > 0) out.guaranteed.memoryMin = guaranteedMin;
  }
  const pct = opts.qosReservedMemoryPercent;
  const allocatable = opts.allocatableMemoryBytes ?? 0;
  if (pct !== undefined && pct > 0 && allocatable > 0) {
    const burstableLimit = allocatable - Math.trunc((memReq.Guaranteed * pct) / 100);
    out.burstable.memoryLimit = burstableLimit;
    out.besteffort.memoryLimit = burstableLimit - Math.trunc((memReq.Burstable * pct) / 100);
  }
  return out;
}

/** The enforceNodeAllocatable levels that write a reserved cgroup, with the fields they read. */
const RESERVED_LEVELS = [
  { level: "system-reserved", kind: "system", compressibleOnly: false },
  { level: "system-reserved-compressible", kind: "system", compressibleOnly: true },
  { level: "kube-reserved", kind: "kube", compressibleOnly: false },
  { level: "kube-reserved-compressible", kind: "kube", compressibleOnly: true },
] as const;

export interface ReservedSettings {
  enforceNodeAllocatable: readonly string[];
  systemReserved: Readonly<Record<string, string>>;
  kubeReserved: Readonly<Record<string, string>>;
  systemReservedCgroup: string;
  kubeReservedCgroup: string;
}

/** One reserved cgroup to write at start (upstream's enforceExistingCgroup). */
export interface ReservedEnforcement {
  /** The enforceNodeAllocatable level that asks for it. */
  level: string;
  /** The setting that names the cgroup, for messages. */
  field: "systemReservedCgroup" | "kubeReservedCgroup";
  /** The cgroup as configured (cgroupfs path, or a slice with the systemd driver). */
  cgroup: string;
  config: ResourceConfig;
}

export class ReservedConfigError extends Error {
  override readonly name = "ReservedConfigError";
}

/**
 * What enforceNodeAllocatable's reserved levels write (getCgroupConfig of the
 * reserved list): cpu → shares; unless `-compressible`, also memory → the
 * memory limit and pid → pids.max; with MemoryQoS, memory.min = that memory
 * too. A level whose reserved list is empty is an error, as upstream's
 * "cgroup is not configured properly".
 */
export function reservedEnforcements(k: ReservedSettings, memoryQoS: boolean): ReservedEnforcement[] {
  const out: ReservedEnforcement[] = [];
  for (const { level, kind, compressibleOnly } of RESERVED_LEVELS) {
    if (!k.enforceNodeAllocatable.includes(level)) continue;
    const field = kind === "system" ? "systemReservedCgroup" : "kubeReservedCgroup";
    const listName = kind === "system" ? "systemReserved" : "kubeReserved";
    const cgroup = kind === "system" ? k.systemReservedCgroup : k.kubeReservedCgroup;
    const list = kind === "system" ? k.systemReserved : k.kubeReserved;
    if (cgroup === "") throw new ReservedConfigError(`${field} must be specified when ${JSON.stringify(level)} is in enforceNodeAllocatable`);
    if (Object.keys(list).length === 0)
      throw new ReservedConfigError(`${field} ${JSON.stringify(cgroup)} is not configured properly: ${listName} is empty, nothing to enforce for ${JSON.stringify(level)}`);
    // upstream getCgroupConfig: huge pages of the list (none for the compressible levels); the writer gives every other size 0.
    const config: ResourceConfig = { hugePageLimits: compressibleOnly ? new Map() : hugePageLimits(amounts(list)) };
    if (list["cpu"] !== undefined) config.cpuShares = milliCpuToShares(milliValue(list["cpu"]));
    if (!compressibleOnly) {
      if (list["memory"] !== undefined) {
        config.memoryLimit = intValue(list["memory"]);
        if (memoryQoS) config.memoryMin = config.memoryLimit;
      }
      if (list["pid"] !== undefined) config.pidsLimit = intValue(list["pid"]);
    }
    out.push({ level, field, cgroup, config });
  }
  return out;
}
