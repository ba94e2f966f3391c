/**
 * Volume usage for the Summary's `pod.volume` list and the pod's
 * ephemeral-storage (upstream's volume stats calculator: MetricsDu of each
 * volume directory, recomputed every volumeStatsAggPeriod, not every
 * pass, because a `du` of a large emptyDir is expensive). Eviction reads it
 * to enforce emptyDir `sizeLimit`.
 */
import { lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { statFs, type DiskUsage, type FsInfo } from "./fs.ts";

export interface VolumeUsage {
  name: string;
  /** Where it lives, for statfs (capacity: nodefs or its own tmpfs). */
  path: string;
  usage: DiskUsage;
  /** Counted in the pod's ephemeral-storage (upstream isVolumeEphemeral: emptyDir on disk, configMap). */
  ephemeral: boolean;
  /** The claim of a volume backed by a PersistentVolumeClaim. */
  pvcRef?: { name: string; namespace: string };
  /** Reported by the volume's plugin (a CSI driver's NodeGetVolumeStats): used as is instead of statfs of `path` and `usage`. */
  measured?: MeasuredFs;
}

/** Upstream volume.Metrics as the summary reports it: every field present. */
export interface MeasuredFs {
  capacityBytes: number;
  availableBytes: number;
  usedBytes: number;
  inodes: number;
  inodesFree: number;
  inodesUsed: number;
}

/** A volume its plugin measured, by the pod's volume name. */
export interface DriverVolume extends MeasuredFs {
  name: string;
  pvcRef?: { name: string; namespace: string };
}

/** What the volume manager tells the stats of a pod's volumes beyond its directory (volumes/: VolumeManager). */
export interface PodVolumeStats {
  /** The pod's volumes backed by PersistentVolumeClaims (outside its directory). */
  claimVolumes(uid: string): ClaimedVolumePath[];
  /** The pod's volumes measured by their plugin (CSI drivers' NodeGetVolumeStats). */
  driverVolumeStats(uid: string): Promise<DriverVolume[]>;
}

/**
 * A volume outside the pod's directory (a `local` PersistentVolume's path),
 * reported by its claim with the figures of the file system it is on
 * (upstream's local plugin uses MetricsStatFS: capacity, available and used
 * of that file system, not what the directory holds).
 */
export interface ClaimedVolumePath {
  name: string;
  path: string;
  pvcRef: { name: string; namespace: string };
}

const CSI_PLUGIN_DIR = "kubernetes.io~csi";

/** `du` of a tree: allocated bytes and inodes, symlinks not followed, other filesystems (nested mounts) not entered. */
export function treeUsage(root: string): DiskUsage {
  const top = lstatSync(root);
  const total = { bytes: top.blocks * 512, inodes: 1 };
  const walk = (dir: string) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // removed while walking
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      try {
        const st = lstatSync(path);
        if (st.dev !== top.dev) continue;
        total.bytes += st.blocks * 512;
        total.inodes += 1;
        if (st.isDirectory()) walk(path);
      } catch {
        // removed while walking
      }
    }
  };
  walk(root);
  return total;
}

/** The volumes below <podsDir>/<uid>/volumes/<plugin>/<name>, measured. */
export function measurePodVolumes(podsDir: string, uid: string): VolumeUsage[] {
  const base = join(podsDir, uid, "volumes");
  const out: VolumeUsage[] = [];
  let plugins: string[];
  try {
    plugins = readdirSync(base);
  } catch {
    return out;
  }
  const podDev = lstatSync(join(podsDir, uid)).dev;
  for (const plugin of plugins) {
    // CSI volumes are measured by their driver (or not at all, as upstream), never walked: the driver's mount may be large or remote.
    if (plugin === CSI_PLUGIN_DIR) continue;
    let names: string[];
    try {
      names = readdirSync(join(base, plugin));
    } catch {
      continue;
    }
    for (const name of names) {
      const path = join(base, plugin, name);
      try {
        const onDisk = lstatSync(path).dev === podDev; // a tmpfs (Memory emptyDir, secret) is its own device
        out.push({ name, path, usage: treeUsage(path), ephemeral: onDisk && (plugin === "kubernetes.io~empty-dir" || plugin === "kubernetes.io~configmap") });
      } catch {
        // torn down meanwhile
      }
    }
  }
  return out;
}

/** Per-pod results kept for `periodMs`; pods not asked about for two periods are forgotten. */
export class VolumeUsageCache {
  private readonly cache = new Map<string, { atMs: number; volumes: VolumeUsage[] }>();

  constructor(
    private readonly podsDir: string,
    private readonly periodMs: number,
  ) {}

  volumesOf(uid: string, nowMs: number, claimed: readonly ClaimedVolumePath[] = []): VolumeUsage[] {
    const hit = this.cache.get(uid);
    if (hit && nowMs - hit.atMs < this.periodMs && hit.volumes.filter((v) => v.pvcRef).length === claimed.length) return hit.volumes;
    const volumes = measurePodVolumes(this.podsDir, uid);
    for (const c of claimed) {
      try {
        const fs = statFs(c.path);
        const measured = {
          capacityBytes: fs.capacityBytes,
          availableBytes: fs.availableBytes,
          usedBytes: fs.usedBytes,
          inodes: fs.inodes,
          inodesFree: fs.inodesFree,
          inodesUsed: fs.inodes - fs.inodesFree,
        };
        volumes.push({ name: c.name, path: c.path, usage: { bytes: measured.usedBytes, inodes: measured.inodesUsed }, ephemeral: false, pvcRef: c.pvcRef, measured });
      } catch {
        // gone meanwhile
      }
    }
    this.cache.set(uid, { atMs: nowMs, volumes });
    for (const [k, v] of this.cache) if (nowMs - v.atMs > 2 * this.periodMs) this.cache.delete(k);
    return volumes;
  }
}

/**
 * Per-pod answers of the volume plugins that measure their volumes
 * themselves (CSI NodeGetVolumeStats), asked in the background at most once
 * per `periodMs` (upstream's volume stats calculator runs per pod every
 * volumeStatsAggPeriod, apart from the summary): a stats pass takes the last
 * answer and never waits for a driver, which may take its whole deadline.
 * A failed call keeps the previous answer; pods not asked about for two
 * periods are forgotten.
 */
export class DriverVolumeCache {
  private readonly cache = new Map<string, { askedAtMs: number; seenAtMs: number; volumes: DriverVolume[]; inFlight: Promise<void> | undefined }>();

  constructor(
    private readonly periodMs: number,
    private readonly source: Pick<PodVolumeStats, "driverVolumeStats">,
  ) {}

  /** The pod's last answer ([] before the first one arrives); asks again, without waiting, once the last ask is a period old. */
  volumesOf(uid: string, nowMs: number): DriverVolume[] {
    let entry = this.cache.get(uid);
    if (!entry) this.cache.set(uid, (entry = { askedAtMs: Number.NEGATIVE_INFINITY, seenAtMs: nowMs, volumes: [], inFlight: undefined }));
    entry.seenAtMs = nowMs;
    if (!entry.inFlight && nowMs - entry.askedAtMs >= this.periodMs) {
      const e = entry;
      e.askedAtMs = nowMs;
      e.inFlight = this.source
        .driverVolumeStats(uid)
        .then(
          (volumes) => {
            e.volumes = volumes;
          },
          () => undefined,
        )
        .finally(() => {
          e.inFlight = undefined;
        });
    }
    for (const [k, v] of this.cache) if (nowMs - v.seenAtMs > 2 * this.periodMs && !v.inFlight) this.cache.delete(k);
    return entry.volumes;
  }

  /** Resolves once every call in flight has answered. */
  async settled(): Promise<void> {
    await Promise.all([...this.cache.values()].map((e) => e.inFlight));
  }
}

export type StatFsFn = (path: string) => FsInfo | undefined;
