/**
 * Filesystem numbers: statfs for capacity, and what the files of a log
 * directory use. Upstream gets the first from cAdvisor and the second from
 * `du` (volume.MetricsDu) on each file of the pod and container log
 * directories.
 */
import { lstatSync, readdirSync, statfsSync } from "node:fs";
import { join } from "node:path";
import type { FsStats } from "./types.ts";

export interface FsInfo {
  capacityBytes: number;
  /** Free to unprivileged users (bavail), what upstream calls available. */
  availableBytes: number;
  /** blocks - bfree: includes the root-reserved blocks in use. */
  usedBytes: number;
  inodes: number;
  inodesFree: number;
}

/** statfs of the filesystem holding `path`; throws when the path does not exist. */
export function statFs(path: string): FsInfo {
  const s = statfsSync(path);
  const bsize = Number(s.bsize);
  return {
    capacityBytes: Number(s.blocks) * bsize,
    availableBytes: Number(s.bavail) * bsize,
    usedBytes: (Number(s.blocks) - Number(s.bfree)) * bsize,
    inodes: Number(s.files),
    inodesFree: Number(s.ffree),
  };
}

/**
 * The Summary FsStats of a filesystem; `used` replaces the filesystem-wide
 * usage by a part's (a container's logs, a writable layer) while capacity,
 * available and inodes stay the filesystem's, as upstream does.
 */
export function toFsStats(time: string, info: FsInfo | undefined, used?: { bytes?: number; inodes?: number }): FsStats {
  const out: FsStats = { time };
  if (info) {
    out.availableBytes = info.availableBytes;
    out.capacityBytes = info.capacityBytes;
    out.inodesFree = info.inodesFree;
    out.inodes = info.inodes;
  }
  if (used) {
    if (used.bytes !== undefined) out.usedBytes = used.bytes;
    if (used.inodes !== undefined) out.inodesUsed = used.inodes;
  } else if (info) {
    out.usedBytes = info.usedBytes;
    out.inodesUsed = info.inodes - info.inodesFree;
  }
  return out;
}

export interface DiskUsage {
  /** Allocated bytes (st_blocks * 512), what `du -B1` counts. */
  bytes: number;
  inodes: number;
}

export const addUsage = (a: DiskUsage, b: DiskUsage): DiskUsage => ({ bytes: a.bytes + b.bytes, inodes: a.inodes + b.inodes });

const missing = (e: unknown) => {
  const code = (e as NodeJS.ErrnoException).code;
  return code === "ENOENT" || code === "ENOTDIR";
};

/**
 * What the files directly in `dir` use on disk; subdirectories are skipped,
 * symlinks not followed. This is upstream's log accounting
 * (hostStatsProvider.fileMetricsByDir: `du` of each file, directories left
 * out): for a container, `<pod log dir>/<container>/`; for the pod itself,
 * the pod log directory, whose container subdirectories are counted with
 * their containers. Undefined when `dir` does not exist; a file that
 * vanishes mid-walk (rotation) is skipped.
 */
export function filesUsage(dir: string): DiskUsage | undefined {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (e) {
    if (missing(e)) return undefined;
    throw e;
  }
  const total = { bytes: 0, inodes: 0 };
  for (const entry of entries) {
    if (entry.isDirectory()) continue;
    try {
      total.bytes += lstatSync(join(dir, entry.name)).blocks * 512;
      total.inodes += 1;
    } catch (e) {
      if (!missing(e)) throw e;
    }
  }
  return total;
}
