import { expect, test } from "bun:test";
import { podDirs } from "./dirs.ts";

test("pod directories follow upstream's layout", () => {
  const d = podDirs("/var/lib/kubelet");
  expect(d.pod("u1")).toBe("/var/lib/kubelet/pods/u1");
  expect(d.volume("u1", "kubernetes.io/empty-dir", "cache")).toBe("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/cache");
  expect(d.subPath("u1", "cfg", "app", 2)).toBe("/var/lib/kubelet/pods/u1/volume-subpaths/cfg/app/2");
  expect(d.container("u1", "app")).toBe("/var/lib/kubelet/pods/u1/containers/app");
  expect(d.etcHosts("u1")).toBe("/var/lib/kubelet/pods/u1/etc-hosts");
});
