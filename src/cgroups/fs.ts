/**
 * The file operations the cgroup writer needs, behind an interface so unit
 * tests can run it on a temporary directory that behaves like cgroupfs
 * (fake-fs.ts). Errors are Node fs errors (with `code`); the writer wraps them.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { readdir, rmdir } from "node:fs/promises";

export interface CgroupFs {
  /** Synchronous: detection runs in the constructor. */
  existsSync(path: string): boolean;
  readFileSync(path: string): string;
  readFile(path: string): Promise<string>;
  /** Writes the whole value in one write(2), as cgroupfs requires. */
  writeFile(path: string, data: string): Promise<void>;
  /** Creates one directory; false when it existed already. */
  mkdir(path: string): Promise<boolean>;
  /** Removes one (cgroup) directory. */
  rmdir(path: string): Promise<void>;
  /** Names of the subdirectories (child cgroups); [] when `path` does not exist. */
  listDirs(path: string): Promise<string[]>;
}

/**
 * Reads, writes and mkdirs are made synchronously, as upstream's are: they
 * are kernel work in memory (microseconds), while each one through the fs
 * thread pool cost the caller a turn of the event loop. In a burst of 110
 * pod starts a turn is tens of ms, and a pod's cgroup (about ten of them)
 * took 0.1-1 s while the pod held one of the start gate's 8 slots.
 * rmdir and listing stay asynchronous: they are housekeeping's, off the
 * start path, and an rmdir can wait for the kernel to let go of the cgroup.
 */
export const nodeCgroupFs: CgroupFs = {
  existsSync: (p) => existsSync(p),
  readFileSync: (p) => readFileSync(p, "utf8"),
  readFile: async (p) => readFileSync(p, "utf8"),
  writeFile: async (p, data) => writeFileSync(p, data, { flag: "w" }),
  async mkdir(p) {
    try {
      mkdirSync(p);
      return true;
    } catch (e) {
      if ((e as { code?: string }).code === "EEXIST") return false;
      throw e;
    }
  },
  rmdir: (p) => rmdir(p),
  async listDirs(p) {
    try {
      return (await readdir(p, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
    } catch (e) {
      if ((e as { code?: string }).code === "ENOENT") return [];
      throw e;
    }
  },
};
