/**
 * Mounting, behind a small interface so the volume logic is tested with a
 * fake: tmpfs for memory-backed volumes (emptyDir Memory, secrets,
 * projected) and bind mounts for subPaths. The real one runs mount(8) and
 * umount(8) (the agent runs as root, as the kubelet does) and reads
 * /proc/self/mountinfo.
 */
import { execFile } from "node:child_process";
import { readFile, stat, statfs } from "node:fs/promises";
import { posix } from "node:path";

export interface Mounter {
  /** Mounts a tmpfs on the directory `target`; `sizeBytes` caps it (undefined: the kernel's default). */
  mountTmpfs(target: string, sizeBytes: number | undefined): Promise<void>;
  /** Mounts a hugetlbfs on `target` with `-o pagesize=<pageSize>` ("2Mi"), as upstream's emptyDir (source "nodev"). */
  mountHugetlbfs(target: string, pageSize: string): Promise<void>;
  /** The page size in bytes of the hugetlbfs mounted on `dir` (statfs: HUGETLBFS_MAGIC, f_bsize); undefined when `dir` is no hugetlbfs. */
  hugetlbfsPageSize(dir: string): Promise<number | undefined>;
  /** Bind-mounts `source` (a file, a directory or a /proc/<pid>/fd/<n> link) on `target`. */
  bind(source: string, target: string): Promise<void>;
  /** Unmounts `target`; a path that is not a mount point is an error. */
  unmount(target: string): Promise<void>;
  /** Mount points at or below `prefix`, deepest first (the order to unmount them in). */
  mountsUnder(prefix: string): Promise<string[]>;
  /**
   * Whether `dir` is on another device than its parent (upstream
   * IsLikelyNotMountPoint): two stat calls where mountsUnder parses all of
   * mountinfo, hundreds of lines with many pods. Blind to a bind mount from
   * the same filesystem; right for a tmpfs. False when `dir` does not exist.
   */
  isDeviceMountPoint(dir: string): Promise<boolean>;
  /**
   * Upstream MakeRShared: unless the mount holding `path` already propagates
   * (shared), bind-mounts `path` on itself and makes it rshared, so mounts
   * made below it reach containers (HostToContainer, Bidirectional).
   * Returns whether it changed anything.
   */
  makeRShared(path: string): Promise<boolean>;
}

export class MountError extends Error {
  override readonly name = "MountError";
  constructor(
    readonly operation: string,
    readonly target: string,
    detail: string,
  ) {
    super(`${operation} ${target}: ${detail}`);
  }
}

/** linux/magic.h: the f_type statfs reports for a hugetlbfs. */
const HUGETLBFS_MAGIC = 0x958458f6;

const run = (file: string, args: string[]): Promise<void> =>
  new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 30_000 }, (err, _stdout, stderr) => (err ? reject(new Error(String(stderr).trim() || err.message)) : resolve()));
  });

/** /proc/self/mountinfo escapes space, tab, newline and backslash as octal. */
const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

export interface MountInfo {
  mountPoint: string;
  /** Optional fields: "shared:N", "master:N", ... */
  propagation: string[];
}

export function parseMountInfoLines(text: string): MountInfo[] {
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const fields = line.split(" ");
      const dash = fields.indexOf("-");
      return { mountPoint: unescape(fields[4] ?? ""), propagation: fields.slice(6, dash < 0 ? undefined : dash) };
    })
    .filter((m) => m.mountPoint);
}

export function parseMountInfo(text: string): string[] {
  return parseMountInfoLines(text).map((m) => m.mountPoint);
}

/** The mount that holds `path` (the last, i.e. topmost, of the longest mount point prefix). */
export function mountOf(mounts: MountInfo[], path: string): MountInfo | undefined {
  let best: MountInfo | undefined;
  for (const m of mounts) if (under(path, m.mountPoint) && (!best || m.mountPoint.length >= best.mountPoint.length)) best = m;
  return best;
}

function under(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(prefix.endsWith("/") ? prefix : `${prefix}/`);
}
const deepestFirst = (paths: string[]) => [...new Set(paths)].sort((a, b) => b.split("/").length - a.split("/").length || b.localeCompare(a));

export function createMounter(): Mounter {
  return {
    async mountTmpfs(target, sizeBytes) {
      const options = sizeBytes !== undefined && sizeBytes > 0 ? ["-o", `size=${Math.floor(sizeBytes)}`] : [];
      await run("mount", ["-t", "tmpfs", ...options, "tmpfs", target]).catch((err) => Promise.reject(new MountError("mount tmpfs", target, String(err.message))));
    },
    async mountHugetlbfs(target, pageSize) {
      await run("mount", ["-t", "hugetlbfs", "-o", `pagesize=${pageSize}`, "nodev", target]).catch((err) =>
        Promise.reject(new MountError("mount hugetlbfs", target, String(err.message))),
      );
    },
    async hugetlbfsPageSize(dir) {
      try {
        const s = await statfs(dir);
        return Number(s.type) === HUGETLBFS_MAGIC ? Number(s.bsize) : undefined;
      } catch {
        return undefined;
      }
    },
    async bind(source, target) {
      await run("mount", ["--no-canonicalize", "--bind", source, target]).catch((err) => Promise.reject(new MountError("bind mount", target, String(err.message))));
    },
    async unmount(target) {
      await run("umount", [target]).catch((err) => Promise.reject(new MountError("unmount", target, String(err.message))));
    },
    async mountsUnder(prefix) {
      const clean = posix.normalize(prefix);
      return deepestFirst(parseMountInfo(await readFile("/proc/self/mountinfo", "utf8")).filter((m) => under(m, clean)));
    },
    async isDeviceMountPoint(dir) {
      const clean = posix.normalize(dir);
      try {
        const [self, parent] = await Promise.all([stat(clean), stat(posix.dirname(clean))]);
        return self.dev !== parent.dev;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
        throw err;
      }
    },
    async makeRShared(path) {
      const clean = posix.normalize(path);
      const mounts = parseMountInfoLines(await readFile("/proc/self/mountinfo", "utf8"));
      if (mountOf(mounts, clean)?.propagation.some((p) => p.startsWith("shared:"))) return false;
      if (!mounts.some((m) => m.mountPoint === clean)) {
        await run("mount", ["--bind", clean, clean]).catch((err) => Promise.reject(new MountError("bind mount", clean, String(err.message))));
      }
      await run("mount", ["--make-rshared", clean]).catch((err) => Promise.reject(new MountError("make rshared", clean, String(err.message))));
      return true;
    },
  };
}

/** Mount points kept in memory; records tmpfs sizes, hugetlbfs page sizes and bind sources for assertions. */
export class FakeMounter implements Mounter {
  readonly mounts = new Map<
    string,
    { kind: "tmpfs"; sizeBytes: number | undefined } | { kind: "hugetlbfs"; pageSize: string; pageSizeBytes: number } | { kind: "bind"; source: string }
  >();
  readonly calls: string[] = [];
  failNext: Error | undefined;

  private enter(call: string) {
    this.calls.push(call);
    const err = this.failNext;
    this.failNext = undefined;
    if (err) throw err;
  }
  async mountTmpfs(target: string, sizeBytes: number | undefined) {
    this.enter(`tmpfs ${target}`);
    this.mounts.set(target, { kind: "tmpfs", sizeBytes });
  }
  async mountHugetlbfs(target: string, pageSize: string) {
    this.enter(`hugetlbfs ${target} pagesize=${pageSize}`);
    const m = /^(\d+)(Ki|Mi|Gi)$/.exec(pageSize);
    const pageSizeBytes = m ? Number(m[1]) * { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 }[m[2] as "Ki" | "Mi" | "Gi"] : Number(pageSize);
    this.mounts.set(target, { kind: "hugetlbfs", pageSize, pageSizeBytes });
  }
  async hugetlbfsPageSize(dir: string) {
    const m = this.mounts.get(posix.normalize(dir));
    return m?.kind === "hugetlbfs" ? m.pageSizeBytes : undefined;
  }
  async bind(source: string, target: string) {
    this.enter(`bind ${source} ${target}`);
    this.mounts.set(target, { kind: "bind", source });
  }
  async unmount(target: string) {
    this.enter(`unmount ${target}`);
    if (!this.mounts.delete(target)) throw new MountError("unmount", target, "not mounted");
  }
  async mountsUnder(prefix: string) {
    return deepestFirst([...this.mounts.keys()].filter((m) => under(m, posix.normalize(prefix))));
  }
  async isDeviceMountPoint(dir: string) {
    const kind = this.mounts.get(posix.normalize(dir))?.kind;
    return kind === "tmpfs" || kind === "hugetlbfs";
  }
  readonly shared = new Set<string>();
  async makeRShared(path: string) {
    this.enter(`rshared ${path}`);
    if (this.shared.has(path)) return false;
    this.shared.add(path);
    return true;
  }
}
