/**
 * What the v1 and v2 writers have in common: a way to make a cgroup exist,
 * to apply a ResourceConfig to it, and to name its directories.
 */
import { dirname } from "node:path";
import { fromErrno } from "./errors.ts";
import type { CgroupFs } from "./fs.ts";
import type { ResourceConfig } from "./resources.ts";
import type { Logger } from "../util/log.ts";

export interface CgroupBackend {
  readonly version: "v1" | "v2";
  /** Creates the cgroup `path` (absolute cgroupfs form) and any missing
   *  ancestor, ready for runc to create container cgroups below it. Idempotent. */
  ensure(path: string): Promise<void>;
  /** Writes the fields present in `config`. */
  apply(path: string, config: ResourceConfig): Promise<void>;
  /** Every directory that represents `path` (v1: one per hierarchy). */
  dirs(path: string): string[];
  /** What must happen before the directories of an empty cgroup are removed:
   *  the systemd driver stops the slice unit that owns it (refusing while it
   *  has processes); the cgroupfs writers own their directories and have none. */
  release?(path: string): Promise<void>;
}

/** Ancestors of an absolute cgroup path, root first, the path itself last: "/a/b" → ["/", "/a", "/a/b"]. */
export function pathChain(path: string): string[] {
  const chain: string[] = [];
  for (let p = path; ; p = dirname(p)) {
    chain.unshift(p);
    if (p === "/") return chain;
  }
}

/** The file operations with errors wrapped and every write logged at -v=5. */
export function fileOps(fs: CgroupFs, logger: Logger) {
  return {
    async read(path: string): Promise<string> {
      try {
        return (await fs.readFile(path)).trim();
      } catch (e) {
        throw fromErrno("read", path, e);
      }
    },
    async write(path: string, value: string): Promise<void> {
      try {
        await fs.writeFile(path, value);
        logger.v(5).info("cgroup write", { path, value });
      } catch (e) {
        throw fromErrno(`write ${JSON.stringify(value)}`, path, e);
      }
    },
    async mkdir(path: string): Promise<boolean> {
      try {
        return await fs.mkdir(path);
      } catch (e) {
        throw fromErrno("mkdir", path, e);
      }
    },
  };
}
