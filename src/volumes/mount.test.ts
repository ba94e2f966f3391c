import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMounter, FakeMounter, mountOf, parseMountInfo, parseMountInfoLines } from "./mount.ts";

describe("mount points", () => {
  test("parseMountInfo reads the mount point field and unescapes octal", () => {
    const text = [
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
      "90 22 0:50 / /var/lib/kubelet/pods/u/volumes/kubernetes.io~secret/my\\040secret rw,relatime - tmpfs tmpfs rw,size=1024k",
    ].join("\n");
    expect(parseMountInfo(text)).toEqual(["/", "/var/lib/kubelet/pods/u/volumes/kubernetes.io~secret/my secret"]);
  });

  test("mountOf finds the topmost mount holding a path and its propagation", () => {
    const mounts = parseMountInfoLines(
      ["27 1 254:0 / / rw,relatime - ext4 /dev/vda rw", "40 27 254:0 /var/lib/kubelet /var/lib/kubelet rw shared:5 - ext4 /dev/vda rw"].join("\n"),
    );
    expect(mountOf(mounts, "/var/lib/kubelet/pods/u")).toEqual({ mountPoint: "/var/lib/kubelet", propagation: ["shared:5"] });
    expect(mountOf(mounts, "/var/lib/kubeletx")).toEqual({ mountPoint: "/", propagation: [] });
  });

  test("mountsUnder lists deepest first and does not match a sibling prefix", async () => {
    const m = new FakeMounter();
    await m.mountTmpfs("/r/pods/u", undefined);
    await m.bind("/src", "/r/pods/u/volume-subpaths/v/c/0");
    await m.mountTmpfs("/r/pods/u2", 1);
    expect(await m.mountsUnder("/r/pods/u")).toEqual(["/r/pods/u/volume-subpaths/v/c/0", "/r/pods/u"]);
  });
});

describe("createMounter().isDeviceMountPoint (device numbers, as upstream IsLikelyNotMountPoint)", () => {
  test("/proc is a mount point; a directory made in a temporary directory is not; a missing path is not", async () => {
    const mounter = createMounter();
    const dir = mkdtempSync(join(tmpdir(), "mountpoint-"));
    try {
      mkdirSync(join(dir, "child"));
      expect(await mounter.isDeviceMountPoint("/proc")).toBe(true);
      expect(await mounter.isDeviceMountPoint(join(dir, "child"))).toBe(false);
      expect(await mounter.isDeviceMountPoint(join(dir, "missing"))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
