/**
 * subPath mounts that cannot reach outside their volume (the class of
 * CVE-2017-1002101 and CVE-2021-25741), after upstream's
 * pkg/volume/util/subpath/subpath_linux.go:
 * 1. missing directories of the subPath are made inside the volume, never
 *    through a symlink that leaves it (SafeMakeDir);
 * 2. the subPath with its symlinks resolved must lie within the volume;
 * 3. that resolved path is opened component by component without
 *    following symlinks (O_PATH|O_NOFOLLOW below the parent's descriptor,
 *    through /proc/self/fd, the openat of a runtime without openat), so a
 *    swap between the check and the mount cannot redirect it;
 * 4. the open descriptor (/proc/<pid>/fd/<n>) is bind-mounted on
 *    volume-subpaths/<volume>/<container>/<index>, which the container mounts.
 * Unlike upstream, an existing bind mount is not reused: every container
 * start checks again, so a subPath a container replaced by a symlink is
 * refused on restart.
 */
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, realpathSync, statSync, writeFileSync } from "node:fs";
import { posix } from "node:path";
import type { Mounter } from "./mount.ts";

const O_PATH = 0o10000000;

export class SubPathError extends Error {
  override readonly name = "SubPathError";
}

export const within = (path: string, base: string): boolean => path === base || path.startsWith(base.endsWith("/") ? base : `${base}/`);

/** Makes the missing directories of `subPath` below `base`, refusing any existing component that resolves outside it. */
export function safeMakeDir(base: string, subPath: string, mode: number): void {
  let current = base;
  const segments = subPath.split("/").filter((s) => s && s !== ".");
  for (const seg of segments) {
    if (seg === "..") throw new SubPathError(`subpath ${JSON.stringify(subPath)} must not contain '..'`);
    const next = posix.join(current, seg);
    let st;
    try {
      st = lstatSync(next);
    } catch {
      mkdirSync(next, { mode });
      current = next;
      continue;
    }
    if (st.isSymbolicLink()) {
      const resolved = realpathSync(next);
      if (!within(resolved, base)) throw new SubPathError(`path ${next} is outside of allowed base ${base}`);
      current = resolved;
    } else current = next;
    if (!statSync(current).isDirectory()) return; // a file: the rest cannot be made, and the open below refuses it
  }
}

/** Opens `path` (below `base`) one component at a time without following any symlink; returns an O_PATH descriptor. */
export function safeOpen(path: string, base: string): number {
  const rel = posix.relative(base, path);
  let fd = openSync(base, O_PATH | constants.O_NOFOLLOW | constants.O_DIRECTORY);
  try {
    for (const seg of rel ? rel.split("/") : []) {
      const child = openSync(`/proc/self/fd/${fd}/${seg}`, O_PATH | constants.O_NOFOLLOW);
      closeSync(fd);
      fd = child;
      if (fstatSync(fd).isSymbolicLink()) throw new SubPathError(`open ${path}: symlink component ${seg} is not allowed`);
    }
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

export interface SubPathMount {
  volumePath: string;
  subPath: string;
  /** The bind target: volume-subpaths/<volume>/<container>/<index>. */
  target: string;
  mounter: Mounter;
  /** The agent's pid, for the /proc/<pid>/fd/<n> mount source. */
  pid: number;
}

/** Checks and bind-mounts one subPath; returns the host path the container mounts. */
export async function prepareSubPath(o: SubPathMount): Promise<string> {
  const base = realpathSync(o.volumePath);
  safeMakeDir(base, o.subPath, statSync(base).mode & 0o7777);
  const resolved = realpathSync(posix.join(base, o.subPath));
  if (!within(resolved, base)) throw new SubPathError(`subpath ${JSON.stringify(resolved)} not within volume path ${JSON.stringify(base)}`);
  for (const stale of await o.mounter.mountsUnder(o.target)) await o.mounter.unmount(stale);
  const fd = safeOpen(resolved, base);
  try {
    if (fstatSync(fd).isDirectory()) mkdirSync(o.target, { recursive: true, mode: 0o750 });
    else {
      mkdirSync(posix.dirname(o.target), { recursive: true, mode: 0o750 });
      try {
        lstatSync(o.target);
      } catch {
        writeFileSync(o.target, "", { mode: 0o640 });
      }
    }
    await o.mounter.bind(`/proc/${o.pid}/fd/${fd}`, o.target);
  } finally {
    closeSync(fd);
  }
  return o.target;
}
