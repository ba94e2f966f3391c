import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { measurePodVolumes, treeUsage, VolumeUsageCache } from "./volumes.ts";

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

  test("measurePodVolumes names each volume; emptyDir on disk counts as ephemeral storage, downwardAPI does not", () => {
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
  test("a volume backed by a claim is measured at the PV's path and reported with its claim", () => {
    const pv = join(pods, "pv-data");
    mkdirSync(pv);
    writeFileSync(join(pv, "f"), Buffer.alloc(8192, 1));
    const cache = new VolumeUsageCache(pods, 60_000);
    const vols = cache.volumesOf("u1", 0, [{ name: "data", path: pv, pvcRef: { name: "c", namespace: "ns" } }]);
    const data = vols.find((v) => v.name === "data")!;
    expect(data).toMatchObject({ path: pv, ephemeral: false, pvcRef: { name: "c", namespace: "ns" } });
    expect(data.usage.bytes).toBeGreaterThanOrEqual(8192);
  });
});
