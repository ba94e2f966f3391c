import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { statFs } from "./fs.ts";
import { DriverVolumeCache, measurePodVolumes, treeUsage, VolumeUsageCache, type DriverVolume } from "./volumes.ts";

let pods: string;
beforeEach(() => {
  pods = mkdtempSync(join(tmpdir(), "volstats-"));
  const v = (plugin: string, name: string) => {
    const dir = join(pods, "u1/volumes", plugin, name);
    mkdirSync(dir, { recursive: true });
    return dir;
  };
  writeFileSync(join(v("kubernetes.io~empty-dir", "scratch"), "big"), Buffer.alloc(64 * 1024, 1));
  mkdirSync(join(pods, "u1/volumes/kubernetes.io~empty-dir/scratch/sub"));
  writeFileSync(join(pods, "u1/volumes/kubernetes.io~empty-dir/scratch/sub/small"), "x");
  symlinkSync("/usr", join(pods, "u1/volumes/kubernetes.io~empty-dir/scratch/link"));
  writeFileSync(join(v("kubernetes.io~downward-api", "info"), "name"), "p");
});
afterEach(() => rmSync(pods, { recursive: true, force: true }));

describe("volume usage", () => {
  test("treeUsage counts files below without following symlinks", () => {
    const u = treeUsage(join(pods, "u1/volumes/kubernetes.io~empty-dir/scratch"));
    expect(u.bytes).toBeGreaterThanOrEqual(64 * 1024);
    expect(u.bytes).toBeLessThan(1024 * 1024); // /usr was not walked
    expect(u.inodes).toBe(5); // the root, big, sub, sub/small, link
  });

  test("measurePodVolumes names each volume; emptyDir on disk counts as ephemeral storage, downwardAPI does not; CSI volumes are not walked", () => {
    mkdirSync(join(pods, "u1/volumes/kubernetes.io~csi/data/mount"), { recursive: true });
    writeFileSync(join(pods, "u1/volumes/kubernetes.io~csi/data/mount/f"), "x");
    const vols = measurePodVolumes(pods, "u1").sort((a, b) => a.name.localeCompare(b.name));
    expect(vols.map((v) => [v.name, v.ephemeral])).toEqual([
      ["info", false],
      ["scratch", true],
    ]);
    expect(measurePodVolumes(pods, "absent")).toEqual([]);
  });

  test("the cache measures again only after the period", () => {
    const cache = new VolumeUsageCache(pods, 60_000);
    const first = cache.volumesOf("u1", 0);
    writeFileSync(join(pods, "u1/volumes/kubernetes.io~empty-dir/scratch/more"), Buffer.alloc(64 * 1024, 1));
    expect(cache.volumesOf("u1", 59_000)).toBe(first);
    const later = cache.volumesOf("u1", 60_000).find((v) => v.name === "scratch")!;
    expect(later.usage.bytes).toBeGreaterThan(first.find((v) => v.name === "scratch")!.usage.bytes);
  });
  test("a volume backed by a (local) claim reports the file system of the PV's path, with its claim", () => {
    const pv = join(pods, "pv-data");
    mkdirSync(pv);
    writeFileSync(join(pv, "f"), Buffer.alloc(8192, 1));
    const cache = new VolumeUsageCache(pods, 60_000);
    const vols = cache.volumesOf("u1", 0, [{ name: "data", path: pv, pvcRef: { name: "c", namespace: "ns" } }]);
    const data = vols.find((v) => v.name === "data")!;
    expect(data).toMatchObject({ path: pv, ephemeral: false, pvcRef: { name: "c", namespace: "ns" } });
    const fs = statFs(pv);
    expect(data.measured).toMatchObject({ capacityBytes: fs.capacityBytes, inodes: fs.inodes });
    expect(data.measured!.usedBytes).toBeGreaterThan(0);
    expect(data.measured!.inodesUsed).toBe(data.measured!.inodes - data.measured!.inodesFree);
  });
});

describe("volumes measured by their driver", () => {
  const vol = (usedBytes: number): DriverVolume => ({ name: "data", capacityBytes: 10, availableBytes: 10 - usedBytes, usedBytes, inodes: 0, inodesFree: 0, inodesUsed: 0 });

  test("asked in the background once per period: a pass gets the last answer at once; a failed answer keeps the previous one", async () => {
    let calls = 0;
    let fail = false;
    let release: () => void = () => {};
    const cache = new DriverVolumeCache(60_000, {
      driverVolumeStats: async () => {
        calls++;
        if (calls === 3) await new Promise<void>((r) => (release = r)); // a slow driver
        if (fail) throw new Error("driver gone");
        return [vol(calls)];
      },
    });
    expect(cache.volumesOf("u1", 0)).toEqual([]); // nothing yet; not waited for
    await cache.settled();
    expect(cache.volumesOf("u1", 59_999)).toEqual([vol(1)]);
    expect(calls).toBe(1);
    expect(cache.volumesOf("u1", 60_000)).toEqual([vol(1)]); // asks again, answers the last one
    await cache.settled();
    expect(cache.volumesOf("u1", 60_001)).toEqual([vol(2)]);
    expect(cache.volumesOf("u1", 120_000)).toEqual([vol(2)]); // the slow call is in flight
    expect(cache.volumesOf("u1", 180_000)).toEqual([vol(2)]); // not asked twice meanwhile
    expect(calls).toBe(3);
    fail = true;
    release();
    await cache.settled();
    expect(cache.volumesOf("u1", 180_001)).toEqual([vol(2)]);
  });
});
