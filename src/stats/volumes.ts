/**
 * Volume usage for the Summary's `pod.volume` list and the pod's
 * ephemeral-storage (upstream's volume stats calculator: MetricsDu of each
 * volume directory, recomputed every volumeStatsAggPeriod, not every
 * pass, because a `du` of a large emptyDir is expensive). Eviction reads it
 * to enforce emptyDir `sizeLimit`.
 */
import { lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { DiskUsage, FsInfo } from "./fs.ts";

export interface VolumeUsage {
  name: string;
  /** Where it lives, for statfs (capacity: nodefs or its own tmpfs). */
  path: string;
  usage: DiskUsage;
  /** Counted in the pod's ephemeral-storage (upstream isVolumeEphemeral: emptyDir on disk, configMap). */
  ephemeral: boolean;
  /** The claim of a volume backed by a PersistentVolumeClaim. */
  pvcRef?: { name: string; namespace: string };
}

/** A volume outside the pod's directory (a PersistentVolume's path), reported by its claim. */
export interface ClaimedVolumePath {
  name: string;
  path: string;
  pvcRef: { name: string; namespace: string };
}

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
        volumes.push({ name: c.name, path: c.path, usage: treeUsage(c.path), ephemeral: false, pvcRef: c.pvcRef });
      } catch {
        // gone meanwhile
      }
    }
    this.cache.set(uid, { atMs: nowMs, volumes });
    for (const [k, v] of this.cache) if (nowMs - v.atMs > 2 * this.periodMs) this.cache.delete(k);
    return volumes;
  }
}

export type StatFsFn = (path: string) => FsInfo | undefined;
