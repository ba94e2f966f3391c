/**
 * Which cgroup layout the host has, as upstream decides it
 * (libcontainer IsCgroup2UnifiedMode, GetCgroupMounts):
 * - v2 (unified): /sys/fs/cgroup is cgroup2, so cgroup.controllers exists
 *   at the mount root;
 * - v1: one mount per hierarchy (cpu,cpuacct / memory / name=systemd ...),
 *   read from /proc/self/mountinfo; a "hybrid" host also has a cgroup2
 *   mount without controllers (/sys/fs/cgroup/unified), kept because runc
 *   creates container cgroups there too.
 * Every path is below `fsRoot`, so tests can use a directory tree.
 */
import { join } from "node:path";
import { CgroupError } from "./errors.ts";
import type { CgroupFs } from "./fs.ts";

/** Controllers a v1 mount can carry (the kernel's list), plus named hierarchies. */
const V1_CONTROLLERS = new Set(["cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "net_prio", "blkio", "perf_event", "hugetlb", "pids", "rdma", "misc"]);

export interface Hierarchy {
  /** Controllers of a v1 hierarchy ("cpu", "cpuacct", "name=systemd"); [] for a cgroup2 mount. */
  controllers: string[];
  /** Where it is mounted, below fsRoot. */
  mountPoint: string;
  /** The cgroup path the mount shows at its top (mountinfo field 4), usually "/". */
  root: string;
}

export type CgroupLayout = { version: "v2"; unified: Hierarchy } | { version: "v1"; hierarchies: Hierarchy[] /** hybrid hosts */; unified?: Hierarchy };

const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));

/**
 * The cgroup mounts in a mountinfo text. A hierarchy mounted twice is
 * listed once, at its shortest mount point (upstream's choice, issue 95488).
 */
export function parseMountinfo(text: string): { v1: Hierarchy[]; unified?: Hierarchy } {
  const byKey = new Map<string, Hierarchy>();
  let unified: Hierarchy | undefined;
  for (const line of text.split("\n")) {
    const sep = line.indexOf(" - ");
    if (sep < 0) continue;
    const fields = line.slice(0, sep).split(" ");
    const [fstype, , superOptions = ""] = line.slice(sep + 3).split(" ");
    const root = unescape(fields[3] ?? "/");
    const mountPoint = unescape(fields[4] ?? "");
    if (fstype === "cgroup2") {
      if (!unified || mountPoint.length < unified.mountPoint.length) unified = { controllers: [], mountPoint, root };
    } else if (fstype === "cgroup") {
      const controllers = superOptions.split(",").filter((o) => V1_CONTROLLERS.has(o) || o.startsWith("name="));
      if (controllers.length === 0) continue;
      const key = [...controllers].sort().join(",");
      const seen = byKey.get(key);
      if (!seen || mountPoint.length < seen.mountPoint.length) byKey.set(key, { controllers, mountPoint, root });
    }
  }
  return { v1: [...byKey.values()], ...(unified ? { unified } : {}) };
}

export function detectCgroupLayout(fsRoot: string, fs: CgroupFs): CgroupLayout {
  const cgroupMount = join(fsRoot, "sys/fs/cgroup");
  if (fs.existsSync(join(cgroupMount, "cgroup.controllers"))) {
    return { version: "v2", unified: { controllers: [], mountPoint: cgroupMount, root: "/" } };
  }
  const mountinfoPath = join(fsRoot, "proc/self/mountinfo");
  let text: string;
  try {
    text = fs.readFileSync(mountinfoPath);
  } catch (e) {
    throw new CgroupError("NotFound", "detect", mountinfoPath, "no cgroup2 at /sys/fs/cgroup and no mountinfo to find v1 hierarchies", { cause: e });
  }
  const { v1, unified } = parseMountinfo(text);
  if (v1.length === 0) throw new CgroupError("Unsupported", "detect", mountinfoPath, "no cgroup v1 hierarchy and no cgroup2 at /sys/fs/cgroup");
  const rebase = (h: Hierarchy): Hierarchy => ({ ...h, mountPoint: join(fsRoot, h.mountPoint) });
  return { version: "v1", hierarchies: v1.map(rebase), ...(unified ? { unified: rebase(unified) } : {}) };
}

/**
 * The directory of cgroup `path` (cgroupfs form, absolute) in hierarchy `h`.
 * A mount whose root is not "/" (inside a cgroup namespace or a bind mount)
 * shows paths below that root only.
 */
export function hierarchyDir(h: Hierarchy, path: string): string {
  let rel = path;
  if (h.root !== "/" && (path === h.root || path.startsWith(h.root + "/"))) rel = path.slice(h.root.length) || "/";
  return rel === "/" ? h.mountPoint : join(h.mountPoint, rel);
}
