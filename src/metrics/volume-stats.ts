/**
 * kubelet_volume_stats_* on `/metrics`: capacity, availability and use of
 * every volume backed by a PersistentVolumeClaim, by namespace and claim
 * (upstream pkg/kubelet/metrics/collectors/volume_stats.go), from the last
 * stats pass: the same figures as the volumes of `/stats/summary`. A claim
 * used by several pods on the node is reported once.
 */
import type { Summary } from "../stats/types.ts";
import { Registry } from "./registry.ts";

type Sample = {
  labels: { namespace: string; persistentvolumeclaim: string };
  fs: { capacityBytes?: number; availableBytes?: number; usedBytes?: number; inodes?: number; inodesFree?: number; inodesUsed?: number };
};

export function renderVolumeStatsMetrics(summary: Summary | undefined): string {
  const seen = new Set<string>();
  const samples: Sample[] = [];
  for (const pod of summary?.pods ?? []) {
    for (const v of pod.volume ?? []) {
      if (!v.pvcRef) continue;
      const key = `${v.pvcRef.namespace}/${v.pvcRef.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      samples.push({ labels: { namespace: v.pvcRef.namespace, persistentvolumeclaim: v.pvcRef.name }, fs: v });
    }
  }
  const r = new Registry();
  const gauge = (name: string, help: string, pick: (fs: Sample["fs"]) => number | undefined) =>
    r.gaugeFn(`kubelet_volume_stats_${name}`, help, () => samples.flatMap((s) => (pick(s.fs) === undefined ? [] : [{ labels: s.labels, value: pick(s.fs)! }])));
  gauge("capacity_bytes", "Capacity in bytes of the volume", (fs) => fs.capacityBytes);
  gauge("available_bytes", "Number of available bytes in the volume", (fs) => fs.availableBytes);
  gauge("used_bytes", "Number of used bytes in the volume", (fs) => fs.usedBytes);
  gauge("inodes", "Maximum number of inodes in the volume", (fs) => fs.inodes);
  gauge("inodes_free", "Number of free inodes in the volume", (fs) => fs.inodesFree);
  gauge("inodes_used", "Number of used inodes in the volume", (fs) => fs.inodesUsed);
  return samples.length ? r.render() : "";
}
