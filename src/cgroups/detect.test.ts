import { afterEach, expect, test } from "bun:test";
import { join } from "node:path";
import { detectCgroupLayout, hierarchyDir, parseMountinfo } from "./detect.ts";
import { isCgroupError } from "./errors.ts";
import { fakeCgroupTree, type FakeCgroupTree } from "./fake-fs.ts";
import { nodeCgroupFs } from "./fs.ts";

// This machine's /proc/self/mountinfo (Debian 12, hybrid), trimmed.
const HYBRID = `
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;

test("parseMountinfo: this host's hybrid layout", () => {
  const { v1, unified } = parseMountinfo(HYBRID);
  expect(v1.map((h) => h.controllers.join(","))).toEqual(["cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "name=systemd"]);
  expect(v1.find((h) => h.controllers.includes("memory"))?.mountPoint).toBe("/sys/fs/cgroup/memory");
  expect(unified).toEqual({ controllers: [], mountPoint: "/sys/fs/cgroup/unified", root: "/" });
});

test("parseMountinfo: co-mounted controllers, options that are not controllers, a second mount of one hierarchy, escaped spaces", () => {
  const text = [
    "25 20 0:22 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct",
    "26 20 0:23 / /sys/fs/cgroup/net_cls,net_prio rw shared:10 - cgroup cgroup rw,net_cls,net_prio,clone_children",
    "27 20 0:24 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,release_agent=/lib/systemd/agent,name=systemd",
    "90 80 0:22 / /var/lib/some\\040where/cpu rw - cgroup cgroup rw,cpuacct,cpu",
    "91 80 0:22 /kubepods /mnt/c rw - cgroup cgroup rw,cpuacct,cpu",
  ].join("\n");
  const { v1, unified } = parseMountinfo(text);
  expect(unified).toBeUndefined();
  expect(v1).toEqual([
    { controllers: ["cpuacct", "cpu"], mountPoint: "/mnt/c", root: "/kubepods" },
    { controllers: ["net_cls", "net_prio"], mountPoint: "/sys/fs/cgroup/net_cls,net_prio", root: "/" },
    { controllers: ["name=systemd"], mountPoint: "/sys/fs/cgroup/systemd", root: "/" },
  ]);
});

test("hierarchyDir: paths below a mount's root", () => {
  expect(hierarchyDir({ controllers: ["cpu"], mountPoint: "/m", root: "/" }, "/kubepods/pod1")).toBe("/m/kubepods/pod1");
  expect(hierarchyDir({ controllers: ["cpu"], mountPoint: "/m", root: "/outer" }, "/outer/kubepods")).toBe("/m/kubepods");
  expect(hierarchyDir({ controllers: ["cpu"], mountPoint: "/m", root: "/outer" }, "/outer")).toBe("/m");
  expect(hierarchyDir({ controllers: ["cpu"], mountPoint: "/m", root: "/outer" }, "/elsewhere")).toBe("/m/elsewhere");
});

let tree: FakeCgroupTree | undefined;
afterEach(() => tree?.cleanup());

test("detect: v2 when cgroup.controllers is at the mount root", () => {
  tree = fakeCgroupTree("v2");
  const layout = detectCgroupLayout(tree.root, tree.fs);
  expect(layout).toEqual({ version: "v2", unified: { controllers: [], mountPoint: join(tree.root, "sys/fs/cgroup"), root: "/" } });
});

test("detect: v1 from mountinfo, mount points below fsRoot", () => {
  tree = fakeCgroupTree("v1");
  const layout = detectCgroupLayout(tree.root, tree.fs);
  if (layout.version !== "v1") throw new Error("expected v1");
  expect(layout.hierarchies).toHaveLength(9);
  expect(layout.hierarchies.find((h) => h.controllers.includes("cpuset"))?.mountPoint).toBe(join(tree.root, "sys/fs/cgroup/cpuset"));
  expect(layout.unified?.mountPoint).toBe(join(tree.root, "sys/fs/cgroup/unified"));
});

test("detect: nothing mounted is a NotFound error naming the file", () => {
  expect(() => detectCgroupLayout("/nonexistent-root", nodeCgroupFs)).toThrow(/mountinfo/);
  try {
    detectCgroupLayout("/nonexistent-root", nodeCgroupFs);
  } catch (e) {
    expect(isCgroupError(e, "NotFound")).toBe(true);
  }
});

test("detect: this machine", () => {
  const layout = detectCgroupLayout("/", nodeCgroupFs);
  // Whatever the host is, the answer is consistent with the kernel's files.
  if (layout.version === "v2") expect(nodeCgroupFs.existsSync("/sys/fs/cgroup/cgroup.controllers")).toBe(true);
  else expect(layout.hierarchies.some((h) => h.controllers.includes("memory"))).toBe(true);
});
