/**
 * A fake cgroupfs on a temporary directory, for unit tests of the writers.
 * It keeps the kernel rules the writers depend on:
 * - mkdir makes the interface files (v2: only of the controllers the parent
 *   enabled in cgroup.subtree_control; v1: of the hierarchy's controllers,
 *   cpuset.cpus/mems empty);
 * - writing a file that does not exist fails ENOENT, a bad value EINVAL;
 * - v2: "+ctrl" in cgroup.subtree_control needs ctrl in cgroup.controllers
 *   and no processes in a non-root cgroup (EBUSY); children see the change;
 * - rmdir fails EBUSY while a cgroup has child cgroups or processes;
 * - a pid written to cgroup.procs leaves the hierarchy's other cgroups
 *   (v2: EBUSY in a non-root cgroup with controllers in subtree_control;
 *   v1: ENOSPC in a cpuset cgroup with empty cpus or mems).
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative } from "node:path";
import { nodeCgroupFs, type CgroupFs } from "./fs.ts";

const V2_ROOT_CONTROLLERS = ["cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"];
/** This host's v1 layout (Debian 12 hybrid): name → controllers. */
const V1_DEFAULT: Record<string, string[]> = {
  cpu: ["cpu"],
  cpuacct: ["cpuacct"],
  cpuset: ["cpuset"],
  memory: ["memory"],
  devices: ["devices"],
  freezer: ["freezer"],
  blkio: ["blkio"],
  pids: ["pids"],
  systemd: ["name=systemd"],
};

const V1_FILES: Record<string, Record<string, string>> = {
  cpu: { "cpu.shares": "1024", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1" },
  cpuset: { "cpuset.cpus": "", "cpuset.mems": "" },
  memory: { "memory.limit_in_bytes": "9223372036854771712" },
  pids: { "pids.max": "max" },
  // A kernel before 5.7: no reservation (.rsvd) files.
  hugetlb: { "hugetlb.2MB.limit_in_bytes": "9223372036854771712", "hugetlb.1GB.limit_in_bytes": "9223372036854771712" },
};
const V2_FILES: Record<string, Record<string, string>> = {
  cpu: { "cpu.weight": "100", "cpu.max": "max 100000" },
  memory: { "memory.max": "max", "memory.min": "0", "memory.low": "0" },
  pids: { "pids.max": "max" },
  cpuset: { "cpuset.cpus": "", "cpuset.mems": "" },
  io: { "io.weight": "default 100" },
  hugetlb: { "hugetlb.2MB.max": "max", "hugetlb.2MB.rsvd.max": "max", "hugetlb.1GB.max": "max", "hugetlb.1GB.rsvd.max": "max" },
};

const errno = (code: string, path: string, what: string) => Object.assign(new Error(`${code}: ${what}, '${path}'`), { code });
const isInt = (s: string, min = 0) => /^-?\d+$/.test(s) && Number(s) >= min;
const words = (s: string) => s.split(/\s+/).filter(Boolean);

/** Value checks the kernel makes (enough to catch a writer bug). */
const VALID: Record<string, (v: string) => boolean> = {
  "cpu.shares": (v) => isInt(v, 2),
  "cpu.cfs_quota_us": (v) => v === "-1" || isInt(v, 1000),
  "cpu.cfs_period_us": (v) => isInt(v, 1000) && Number(v) <= 1_000_000,
  "memory.limit_in_bytes": (v) => v === "-1" || isInt(v),
  "pids.max": (v) => v === "max" || isInt(v),
  "cpu.weight": (v) => isInt(v, 1) && Number(v) <= 10000,
  "cpu.max": (v) => /^(max|\d+)( \d+)?$/.test(v) && (v.split(" ")[1] === undefined || (Number(v.split(" ")[1]) >= 1000 && Number(v.split(" ")[1]) <= 1_000_000)),
  "memory.max": (v) => v === "max" || isInt(v),
  "memory.min": (v) => v === "max" || isInt(v),
  "memory.low": (v) => v === "max" || isInt(v),
  "hugetlb.2MB.limit_in_bytes": (v) => isInt(v),
  "hugetlb.1GB.limit_in_bytes": (v) => isInt(v),
  "hugetlb.2MB.max": (v) => v === "max" || isInt(v),
  "hugetlb.2MB.rsvd.max": (v) => v === "max" || isInt(v),
  "hugetlb.1GB.max": (v) => v === "max" || isInt(v),
  "hugetlb.1GB.rsvd.max": (v) => v === "max" || isInt(v),
};

export interface FakeCgroupTree {
  /** Pass as fsRoot. */
  root: string;
  fs: CgroupFs;
  /** The directory of cgroup `path` in hierarchy `name` (v1: "cpu", "memory"...; v2: ignored). */
  dir(path: string, name?: string): string;
  read(path: string, file: string, name?: string): string;
  /** Puts a process into a cgroup: rmdir then fails EBUSY. */
  addProcess(path: string, pid: number, name?: string): void;
  cleanup(): void;
}

export function fakeCgroupTree(
  layout: "v1" | "v2",
  opts: { hierarchies?: Record<string, string[]>; hybrid?: boolean; v2Controllers?: string[]; cpus?: string; mems?: string } = {},
): FakeCgroupTree {
  const root = mkdtempSync(join(tmpdir(), "fake-cgroupfs-"));
  const mount = join(root, "sys/fs/cgroup");
  const hierarchies = opts.hierarchies ?? V1_DEFAULT;
  const controllersOf = new Map<string, string[]>(); // v1 hierarchy mount dir → controllers

  const put = (dir: string, files: Record<string, string>) => {
    for (const [f, v] of Object.entries(files)) writeFileSync(join(dir, f), v ? `${v}\n` : "");
  };

  if (layout === "v2") {
    mkdirSync(mount, { recursive: true });
    put(mount, { "cgroup.controllers": (opts.v2Controllers ?? V2_ROOT_CONTROLLERS).join(" "), "cgroup.subtree_control": "", "cgroup.procs": "1" });
  } else {
    const lines: string[] = [];
    let id = 30;
    mkdirSync(mount, { recursive: true });
    lines.push(`${id++} 23 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755`);
    for (const [name, controllers] of Object.entries(hierarchies)) {
      const dir = join(mount, name);
      mkdirSync(dir);
      controllersOf.set(dir, controllers);
      put(dir, { "cgroup.procs": "1" });
      for (const c of controllers) put(dir, V1_FILES[c] ?? {});
      if (controllers.includes("cpuset")) put(dir, { "cpuset.cpus": opts.cpus ?? "0-1", "cpuset.mems": opts.mems ?? "0" });
      lines.push(`${id++} 30 0:${id} / /sys/fs/cgroup/${name} rw,nosuid,nodev,noexec,relatime shared:${id} - cgroup cgroup rw,${controllers.join(",")}`);
    }
    if (opts.hybrid ?? true) {
      const dir = join(mount, "unified");
      mkdirSync(dir);
      controllersOf.set(dir, []);
      put(dir, { "cgroup.controllers": "", "cgroup.subtree_control": "", "cgroup.procs": "1" });
      lines.push(`${id++} 30 0:${id} / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:${id} - cgroup2 cgroup2 rw,nsdelegate`);
    }
    mkdirSync(join(root, "proc/self"), { recursive: true });
    writeFileSync(join(root, "proc/self/mountinfo"), lines.join("\n") + "\n");
  }

  /** v1: the hierarchy mount a path lies in. */
  const hierarchyOf = (p: string) => [...controllersOf.keys()].find((m) => p === m || p.startsWith(m + "/"));
  const readTrim = (p: string) => (existsSync(p) ? readFileSync(p, "utf8").trim() : "");
  const childDirs = (d: string) =>
    readdirSync(d, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);

  /** v2: make `dir`'s interface files match its cgroup.controllers. */
  const syncV2Files = (dir: string, before: string[], after: string[]) => {
    for (const c of after) if (!before.includes(c)) put(dir, V2_FILES[c] ?? {});
    for (const c of before) if (!after.includes(c)) for (const f of Object.keys(V2_FILES[c] ?? {})) rmSync(join(dir, f), { force: true });
  };

  const fs: CgroupFs = {
    ...nodeCgroupFs,
    async mkdir(p) {
      if (existsSync(p)) return false;
      if (!existsSync(dirname(p))) throw errno("ENOENT", p, "mkdir");
      mkdirSync(p);
      if (layout === "v2") {
        const controllers = words(readTrim(join(dirname(p), "cgroup.subtree_control")));
        put(p, { "cgroup.controllers": controllers.join(" "), "cgroup.subtree_control": "", "cgroup.procs": "" });
        syncV2Files(p, [], controllers);
      } else {
        const h = hierarchyOf(p);
        put(p, { "cgroup.procs": "" });
        for (const c of (h && controllersOf.get(h)) ?? []) put(p, V1_FILES[c] ?? {});
        if (h && controllersOf.get(h)?.length === 0) put(p, { "cgroup.controllers": "", "cgroup.subtree_control": "" });
      }
      return true;
    },
    async writeFile(p, data) {
      const dir = dirname(p);
      const file = basename(p);
      if (!existsSync(p)) throw errno("ENOENT", p, "open");
      const value = data.trim();
      if (layout === "v2" && file === "cgroup.subtree_control") {
        const available = words(readTrim(join(dir, "cgroup.controllers")));
        const enabled = new Set(words(readTrim(p)));
        for (const tok of words(value)) {
          const c = tok.slice(1);
          if (!/^[+-]/.test(tok)) throw errno("EINVAL", p, "write");
          if (tok[0] === "+" && !available.includes(c)) throw errno("ENOENT", p, "write");
          if (tok[0] === "+" && dir !== mount && readTrim(join(dir, "cgroup.procs")) !== "") throw errno("EBUSY", p, "write");
          if (tok[0] === "+") enabled.add(c);
          else enabled.delete(c);
        }
        const list = available.filter((c) => enabled.has(c));
        writeFileSync(p, list.length ? list.join(" ") + "\n" : "");
        for (const child of childDirs(dir)) {
          const cdir = join(dir, child);
          const before = words(readTrim(join(cdir, "cgroup.controllers")));
          writeFileSync(join(cdir, "cgroup.controllers"), list.join(" ") + "\n");
          syncV2Files(cdir, before, list);
        }
        return;
      }
      if (file === "cgroup.procs") {
        // A process moves: it leaves every other cgroup of the hierarchy.
        if (!isInt(value, 1)) throw errno("EINVAL", p, `write ${JSON.stringify(value)}`);
        if (layout === "v2" && dir !== mount && readTrim(join(dir, "cgroup.subtree_control")) !== "") throw errno("EBUSY", p, "write");
        if (layout === "v1" && existsSync(join(dir, "cpuset.cpus")) && (readTrim(join(dir, "cpuset.cpus")) === "" || readTrim(join(dir, "cpuset.mems")) === ""))
          throw errno("ENOSPC", p, "write");
        const top = layout === "v2" ? mount : (hierarchyOf(dir) ?? dir);
        const walk = (d: string) => {
          const f = join(d, "cgroup.procs");
          if (existsSync(f)) {
            const pids = words(readTrim(f)).filter((x) => x !== value);
            writeFileSync(f, pids.length ? pids.join("\n") + "\n" : "");
          }
          for (const c of childDirs(d)) walk(join(d, c));
        };
        walk(top);
        const now = readTrim(p);
        writeFileSync(p, (now ? now + "\n" : "") + value + "\n");
        return;
      }
      const valid = VALID[file];
      if (valid && !valid(value)) throw errno("EINVAL", p, `write ${JSON.stringify(value)}`);
      writeFileSync(p, value + "\n");
    },
    async rmdir(p) {
      if (!existsSync(p)) throw errno("ENOENT", p, "rmdir");
      if (childDirs(p).length > 0 || readTrim(join(p, "cgroup.procs")) !== "") throw errno("EBUSY", p, "rmdir");
      rmSync(p, { recursive: true });
    },
  };

  const dirOf = (path: string, name?: string) => (layout === "v2" ? join(mount, path) : join(mount, name ?? "memory", path));
  return {
    root,
    fs,
    dir: dirOf,
    read: (path, file, name) => readTrim(join(dirOf(path, name), file)),
    addProcess(path, pid, name) {
      const f = join(dirOf(path, name), "cgroup.procs");
      const now = readTrim(f);
      writeFileSync(f, (now ? now + "\n" : "") + pid + "\n");
    },
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** Every directory below `root`, relative, sorted (for asserting what exists). */
export function listTree(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      out.push(relative(root, join(d, e.name)));
      walk(join(d, e.name));
    }
  };
  walk(root);
  return out.sort();
}
