/**
 * fsGroup ownership (upstream pkg/volume/volume_linux.go SetVolumeOwnership):
 * every file and directory of the volume gets the group fsGroup, group
 * read (and write unless the volume is read-only) permission, directories
 * the setgid bit and group execute, so files made later inherit the group.
 * Symlinks get the group but keep their mode, and are never followed.
 * fsGroupChangePolicy OnRootMismatch skips the walk when the volume's root
 * already has the group and the bits.
 */
import { chmodSync, lchownSync, lstatSync, readdirSync, type Stats } from "node:fs";
import { posix } from "node:path";

const RW_MASK = 0o660;
const RO_MASK = 0o440;
const EXEC_MASK = 0o110;
const SETGID = 0o2000;

export type FsGroupChangePolicy = "Always" | "OnRootMismatch";

function wantMode(st: Stats, readOnly: boolean): number {
  let mode = st.mode & 0o7777;
  mode |= readOnly ? RO_MASK : RW_MASK;
  if (st.isDirectory()) mode |= SETGID | EXEC_MASK;
  return mode;
}

function rootMatches(dir: string, fsGroup: number, readOnly: boolean): boolean {
  const st = lstatSync(dir);
  return st.gid === fsGroup && (st.mode & 0o7777) === wantMode(st, readOnly);
}

export function setVolumeOwnership(dir: string, fsGroup: number, opts: { readOnly: boolean; policy?: FsGroupChangePolicy | undefined }): void {
  if (opts.policy === "OnRootMismatch" && rootMatches(dir, fsGroup, opts.readOnly)) return;
  const walk = (path: string) => {
    const st = lstatSync(path);
    lchownSync(path, st.uid, fsGroup);
    if (st.isSymbolicLink()) return;
    chmodSync(path, wantMode(st, opts.readOnly));
    if (st.isDirectory()) for (const name of readdirSync(path)) walk(posix.join(path, name));
  };
  walk(dir);
}
