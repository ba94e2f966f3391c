/**
 * cgroups: the QoS class, the values each cgroup level gets (pure), and the
 * writer of the pod cgroup tree for cgroup v1 and v2, with the cgroupfs
 * driver (directories made here) or the systemd driver (slices made by
 * systemd over D-Bus, values written to both).
 */
import { join } from "node:path";
import type { Logger } from "../util/log.ts";
import { cgroupPageSizes, readHugePagePools, type HugePagePool } from "./hugepages.ts";
import { createV1Backend } from "./v1.ts";
import { createV2Backend } from "./v2.ts";
import { detectCgroupLayout } from "./detect.ts";
import { nodeCgroupFs, type CgroupFs } from "./fs.ts";
import { createPodCgroupsOn, type PodCgroups } from "./pod-cgroups.ts";
import type { CpuWeightFormula } from "./values.ts";
import { createSystemdBackend } from "./systemd.ts";
import { busctlSystemdUnits, type SystemdUnits } from "./systemd-units.ts";
import { SystemCgroups, type SystemCgroupsOptions } from "./system-cgroups.ts";

export type { PodCgroups } from "./pod-cgroups.ts";
export { podQosClass, type QosClass } from "./qos.ts";
export {
  MAX_SHARES,
  MIN_QUOTA_PERIOD_US,
  MIN_SHARES,
  QUOTA_PERIOD_US,
  milliCpuToQuota,
  milliCpuToShares,
  sharesToCpuWeight,
  type CpuWeightFormula,
} from "./values.ts";
export {
  nodeResourceConfig,
  podLimits,
  podRequests,
  podResourceConfig,
  qosResourceConfigs,
  ReservedConfigError,
  reservedEnforcements,
  type ReservedEnforcement,
  type NodeAllocatable,
  type PodResourceOptions,
  type QosOptions,
  type QosResourceConfigs,
  type ResourceConfig,
} from "./resources.ts";
export {
  binaryQuantity,
  cgroupPageSizes,
  HUGEPAGES_PREFIX,
  hugePageLimits,
  hugePageResourceName,
  hugePageSizeFromResourceName,
  hugePageUnitSize,
  isHugePageResourceName,
  readHugePagePools,
  type HugePagePool,
} from "./hugepages.ts";
export {
  containerHugepageLimits,
  containerLinuxResources,
  containerMemoryQoS,
  PAGE_SIZE,
  type ContainerMemoryQoS,
  containerOomScoreAdj,
  type ContainerLinuxResources,
  type ContainerResourceOptions,
} from "./container.ts";
export { CgroupError, isCgroupError, type CgroupErrorKind } from "./errors.ts";
export { detectCgroupLayout, parseMountinfo, type CgroupLayout, type Hierarchy } from "./detect.ts";
export { nodeCgroupFs, type CgroupFs } from "./fs.ts";
export {
  containerSwapBehavior,
  containerSwapResources,
  limitedSwapWarning,
  readSwapHost,
  swapForBurstableContainer,
  type SwapBehavior,
  type SwapHost,
  type SwapResources,
} from "./swap.ts";
export { FakePodCgroups } from "./fake.ts";
export { CgroupDriverMismatchError, chooseCgroupDriver, type CgroupDriverName, type RuntimeDriverAnswer } from "./driver.ts";
export { expandSlice, parseSystemdName, resourceProperties, systemdCgroupPath } from "./systemd.ts";
export { busctlSystemdUnits, type SystemdUnits, type UnitProperty } from "./systemd-units.ts";

export interface PodCgroupsOptions {
  /** cgroupRoot: the parent of kubepods, in cgroupfs form ("/" when empty). */
  cgroupRoot: string;
  /** Where /sys/fs/cgroup and /proc/self/mountinfo are found; "/" by default (tests: a directory tree). */
  fsRoot?: string;
  /** podPidsLimit; -1 for no pod-level limit. */
  podPidsLimit: number;
  cpuCFSQuota: boolean;
  /** cpuCFSQuotaPeriod in milliseconds (100 upstream by default). */
  cpuCFSQuotaPeriodMs: number;
  logger: Logger;
  /** MemoryQoS feature: memory.min on pod and QoS cgroups (cgroup v2 only). Default false. */
  memoryQoS?: boolean;
  /** qosReserved memory percentage (QOSReserved feature); unset for none. */
  qosReservedMemoryPercent?: number;
  /** cgroup v2 shares → weight conversion; match the runtime's (runc < 1.3.2: linear). Default "linear". */
  cpuWeightFormula?: CpuWeightFormula;
  /** File operations; tests inject a fake cgroupfs. */
  fs?: CgroupFs;
  /** cgroupDriver: "cgroupfs" (default) or "systemd". */
  driver?: "cgroupfs" | "systemd";
  /** The systemd driver's D-Bus calls; busctl on the system bus by default. */
  systemd?: SystemdUnits;
  /** The host's huge page pools (their sizes get hugetlb limits); read from <fsRoot>/sys/kernel/mm/hugepages by default. */
  hugePagePools?: readonly HugePagePool[];
}

/**
 * Detects the host's cgroup version (synchronously: a few small reads) and
 * returns the writer for it. Throws CgroupError (NotFound / Unsupported)
 * when no usable cgroup mount is found.
 */
export function createPodCgroups(opts: PodCgroupsOptions): PodCgroups {
  const fs = opts.fs ?? nodeCgroupFs;
  const layout = detectCgroupLayout(opts.fsRoot ?? "/", fs);
  const cpuWeightFormula = opts.cpuWeightFormula ?? "linear";
  // libcontainer HugePageSizes: read once, as upstream.
  const pools = opts.hugePagePools ?? readHugePagePools(join(opts.fsRoot ?? "/", "sys"));
  const hugePageSizes = cgroupPageSizes(pools);
  const files =
    layout.version === "v2"
      ? createV2Backend({ unified: layout.unified, fs, logger: opts.logger, cpuWeightFormula, hugePageSizes })
      : createV1Backend({ hierarchies: layout.hierarchies, ...(layout.unified ? { unified: layout.unified } : {}), fs, logger: opts.logger, hugePageSizes });
  const driver = opts.driver ?? "cgroupfs";
  const backend = driver === "systemd" ? createSystemdBackend({ files, units: opts.systemd ?? busctlSystemdUnits(), fs, logger: opts.logger, cpuWeightFormula }) : files;
  return createPodCgroupsOn({
    driver,
    backend,
    fs,
    logger: opts.logger,
    cgroupRoot: opts.cgroupRoot,
    podPidsLimit: opts.podPidsLimit,
    cpuCFSQuota: opts.cpuCFSQuota,
    cpuCFSQuotaPeriodUs: Math.round(opts.cpuCFSQuotaPeriodMs * 1000),
    memoryQoS: opts.memoryQoS ?? false,
    hugePageSizesBytes: pools.map((p) => p.pageSizeKiB * 1024),
    ...(opts.qosReservedMemoryPercent !== undefined ? { qosReservedMemoryPercent: opts.qosReservedMemoryPercent } : {}),
  });
}
export { ActivePodCgroups } from "./active.ts";
export { enforceReservedCgroups } from "./reserved.ts";
export { SystemCgroups, ENSURE_PERIOD_MS, OOM_SCORE_PERIOD_MS, nodeProcFs, type ProcFs } from "./system-cgroups.ts";

/**
 * kubeletCgroups and systemCgroups (system-cgroups.ts) on the host's layout,
 * with the cgroupfs writer whatever the cgroupDriver, as upstream.
 */
export function createSystemCgroups(opts: Omit<SystemCgroupsOptions, "cgroups"> & { fsRoot?: string; fs?: CgroupFs }): SystemCgroups {
  if (!opts.kubeletCgroups && !opts.systemCgroups) return new SystemCgroups(opts);
  const fs = opts.fs ?? nodeCgroupFs;
  const layout = detectCgroupLayout(opts.fsRoot ?? "/", fs);
  const backend =
    layout.version === "v2"
      ? createV2Backend({ unified: layout.unified, fs, logger: opts.logger, cpuWeightFormula: "linear" })
      : createV1Backend({ hierarchies: layout.hierarchies, ...(layout.unified ? { unified: layout.unified } : {}), fs, logger: opts.logger });
  return new SystemCgroups({ ...opts, cgroups: { layout, backend, fs } });
}
