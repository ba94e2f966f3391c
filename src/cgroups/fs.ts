/**
 * The file operations the cgroup writer needs, behind an interface so unit
 * tests can run it on a temporary directory that behaves like cgroupfs
 * (fake-fs.ts). Errors are Node fs errors (with `code`); the writer wraps them.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readFile, readdir, rmdir, writeFile } from "node:fs/promises";

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

export const nodeCgroupFs: CgroupFs = {
  existsSync: (p) => existsSync(p),
  readFileSync: (p) => readFileSync(p, "utf8"),
  readFile: (p) => readFile(p, "utf8"),
  writeFile: (p, data) => writeFile(p, data, { flag: "w" }),
  async mkdir(p) {
    try {
      await mkdir(p);
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
