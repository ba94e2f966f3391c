/**
 * What eviction needs to know about a pod: its priority, whether it is
 * critical, its requests, and its usage from the Summary (upstream
 * helpers.go and pkg/kubelet/types).
 */
import { parseQuantity } from "../config/index.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { isPodLevelResource, podLevelResources, podLevelResourcesSet } from "../cgroups/pod-resources.ts";
import type { FsStats, PodStats } from "../stats/types.ts";

/** upstream corev1helpers.PodPriority: unset is 0. */
export const podPriority = (pod: Pod): number => pod.spec.priority ?? 0;

const amount = (q: string | number | undefined): number => (q === undefined ? 0 : typeof q === "number" ? q : parseQuantity(q));

/** A container's request for `resource`, defaulted to its limit as API defaulting does. */
export function containerRequestRaw(c: ContainerSpec, resource: string): string | number | undefined {
  return c.resources?.requests?.[resource] ?? c.resources?.limits?.[resource];
}

/**
 * upstream v1resource.GetResourceRequestQuantity: the sum over app
 * containers, at least any one init container's, plus pod overhead when
 * that is not zero. A pod with pod-level resources counts only its own
 * requests (the containers' are skipped, so a resource the pod does not
 * request, ephemeral-storage included, is 0), as upstream.
 */
export function podRequest(pod: Pod, resource: string): number {
  let total = 0;
  if (podLevelResourcesSet(pod)) {
    const own = podLevelResources(pod)?.requests[resource] ?? 0;
    total = isPodLevelResource(resource) ? (resource === "cpu" ? own / 1000 : own) : 0;
  } else {
    for (const c of pod.spec.containers) total += amount(containerRequestRaw(c, resource));
    for (const c of pod.spec.initContainers ?? []) total = Math.max(total, amount(containerRequestRaw(c, resource)));
  }
  const overhead = (pod.spec as { overhead?: Record<string, string | number> }).overhead?.[resource];
  if (overhead !== undefined && total !== 0) total += amount(overhead);
  return total;
}

/** upstream PodLimits for one resource; undefined when no container sets it. */
export function podLimit(pod: Pod, resource: string): number | undefined {
  const limitOf = (c: ContainerSpec) => c.resources?.limits?.[resource];
  const app = pod.spec.containers.filter((c) => limitOf(c) !== undefined);
  const init = (pod.spec.initContainers ?? []).filter((c) => limitOf(c) !== undefined);
  if (!app.length && !init.length) return undefined;
  let total = app.reduce((sum, c) => sum + amount(limitOf(c)), 0);
  for (const c of init) total = Math.max(total, amount(limitOf(c)));
  return total;
}

type Volume = { name: string; hostPath?: unknown; emptyDir?: { medium?: string; sizeLimit?: string | number }; gitRepo?: unknown; configMap?: unknown };

export const podVolumes = (pod: Pod): Volume[] => (pod.spec.volumes ?? []) as Volume[];

/** upstream localVolumeNames: hostPath and local ephemeral volumes (disk-backed emptyDir, gitRepo, configMap). */
export function localVolumeNames(pod: Pod): string[] {
  return podVolumes(pod)
    .filter((v) => v.hostPath !== undefined || v.gitRepo !== undefined || v.configMap !== undefined || (v.emptyDir !== undefined && !v.emptyDir.medium))
    .map((v) => v.name);
}

/** Which parts of a pod's storage a disk signal weighs (upstream fsStatsType). */
export type FsStatsType = "root" | "logs" | "localVolumeSource";

const used = (fs: FsStats | undefined) => fs?.usedBytes ?? 0;
const inodesUsed = (fs: FsStats | undefined) => fs?.inodesUsed ?? 0;

/** upstream podDiskUsage: bytes and inodes of container rootfs and/or logs, and local volumes. */
export function podDiskUsage(stats: PodStats, pod: Pod, measure: readonly FsStatsType[]): { bytes: number; inodes: number } {
  let bytes = 0;
  let inodes = 0;
  for (const c of stats.containers) {
    if (measure.includes("root")) {
      bytes += used(c.rootfs);
      inodes += inodesUsed(c.rootfs);
    }
    if (measure.includes("logs")) {
      bytes += used(c.logs);
      inodes += inodesUsed(c.logs);
    }
  }
  if (measure.includes("localVolumeSource")) {
    for (const name of localVolumeNames(pod)) {
      const v = stats.volume?.find((s) => s.name === name);
      bytes += used(v);
      inodes += inodesUsed(v);
    }
  }
  return { bytes, inodes };
}

/** upstream memoryUsage: the pod's working set. */
export const podMemoryUsage = (stats: PodStats): number => stats.memory?.workingSetBytes ?? 0;

/** upstream processUsage */
export const podProcessUsage = (stats: PodStats): number => stats.process_stats?.process_count ?? 0;
