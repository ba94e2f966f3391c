/**
 * Upstream's AtomicWriter (pkg/volume/util/atomic_writer.go): a volume's
 * files are written into a fresh timestamped directory
 * (`..2026_01_02_15_04_05.123456789`), then the `..data` symlink is swapped
 * to it with one rename, and the user-visible names are symlinks through
 * `..data`. A reader of the volume sees either the whole old set or the
 * whole new set, never a mix. Nothing is written when the content and modes
 * are unchanged, so a periodic resync costs only reads.
 */
import {
  chmodSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { posix } from "node:path";
import type { Clock } from "../util/clock.ts";

export interface FileProjection {
  content: Uint8Array;
  /** Permission bits, e.g. 0o644. */
  mode: number;
  /** The owner to give the file (upstream FileProjection.FsUser); the group is left alone. */
  fsUser?: number;
}

/** Relative path (validated as a local descending path) to its content. */
export type Payload = Map<string, FileProjection>;

export const DATA_DIR = "..data";
const DATA_TMP = "..data_tmp";
/** Our timestamped directories; nothing else is ever followed or removed. */
const TS_DIR = /^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$/;

export class AtomicWriteError extends Error {
  override readonly name = "AtomicWriteError";
}

export interface AtomicWriterOptions {
  clock: Clock;
  /** Suffix digits of the timestamped directory (MkdirTemp's random part upstream); injected for tests. */
  random?: () => number;
  /** Runs on the new timestamped directory before it becomes visible (fsGroup ownership). */
  setPerms?: (dir: string) => void;
}

function tsDirName(now: number, random: number): string {
  const d = new Date(now);
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return `..${d.getUTCFullYear()}_${p(d.getUTCMonth() + 1)}_${p(d.getUTCDate())}_${p(d.getUTCHours())}_${p(d.getUTCMinutes())}_${p(d.getUTCSeconds())}.${random}`;
}

function validatePath(path: string): void {
  if (!path || path.startsWith("/") || path.startsWith("..") || path.split("/").includes("..") || path.split("/").includes("")) {
    throw new AtomicWriteError(`invalid path ${JSON.stringify(path)}: must be a relative path without '..' elements`);
  }
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && Buffer.compare(a, b) === 0;

/** Whether `dir` (the current timestamped directory) holds exactly `payload`. */
/** `compareModes`: false when setPerms changes the modes written (fsGroup), so that they are not a change each resync. */
function holds(dir: string, payload: Payload, compareModes: boolean): boolean {
  const present = listFiles(dir);
  if (present.length !== payload.size) return false;
  for (const [path, file] of payload) {
    const full = posix.join(dir, path);
    try {
      const st = lstatSync(full);
      if (!st.isFile() || (compareModes && (st.mode & 0o777) !== file.mode) || !sameBytes(readFileSync(full), file.content)) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/** Regular files below `dir`, relative, without following symlinks. */
function listFiles(dir: string, prefix = ""): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(posix.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...listFiles(dir, rel));
    else out.push(rel);
  }
  return out;
}

const topLevel = (path: string) => path.split("/")[0]!;

/**
 * Writes `payload` into `targetDir` atomically. Returns whether anything
 * changed. Idempotent; safe to call on every sync.
 */
export function writeAtomically(targetDir: string, payload: Payload, opts: AtomicWriterOptions): boolean {
  for (const path of payload.keys()) validatePath(path);
  mkdirSync(targetDir, { recursive: true });
  const dataLink = posix.join(targetDir, DATA_DIR);
  let oldTsName: string | undefined;
  try {
    oldTsName = readlinkSync(dataLink);
    // Only a timestamped directory of ours; anything else is treated as absent, never followed or removed.
    if (!TS_DIR.test(oldTsName)) oldTsName = undefined;
  } catch {
    oldTsName = undefined;
  }
  const oldTsDir = oldTsName ? posix.join(targetDir, oldTsName) : undefined;
  const oldPaths = oldTsDir && existsSync(oldTsDir) ? new Set(listFiles(oldTsDir).map(topLevel)) : new Set<string>();
  const newTop = new Set([...payload.keys()].map(topLevel));

  let changed = false;
  if (!oldTsDir || !existsSync(oldTsDir) || !holds(oldTsDir, payload, !opts.setPerms)) {
    const name = tsDirName(opts.clock.now(), opts.random?.() ?? Math.floor(Math.random() * 1e9));
    const tsDir = posix.join(targetDir, name);
    mkdirSync(tsDir, { mode: 0o755 });
    chmodSync(tsDir, 0o755);
    for (const [path, file] of payload) {
      const full = posix.join(tsDir, path);
      mkdirSync(posix.dirname(full), { recursive: true, mode: 0o755 });
      writeFileSync(full, file.content, { mode: file.mode });
      chmodSync(full, file.mode); // past the umask
      if (file.fsUser !== undefined) lchownSync(full, file.fsUser, -1);
    }
    opts.setPerms?.(tsDir);
    const tmpLink = posix.join(targetDir, DATA_TMP);
    rmSync(tmpLink, { force: true });
    symlinkSync(name, tmpLink);
    renameSync(tmpLink, dataLink);
    changed = true;
  }
  // User-visible names: <name> -> ..data/<name>, made once and kept while the payload has them.
  for (const name of newTop) {
    const link = posix.join(targetDir, name);
    let exists = false;
    try {
      exists = lstatSync(link).isSymbolicLink();
    } catch {
      exists = false;
    }
    if (!exists) {
      rmSync(link, { force: true, recursive: false });
      symlinkSync(posix.join(DATA_DIR, name), link);
      changed = true;
    }
  }
  for (const name of oldPaths) {
    if (newTop.has(name)) continue;
    try {
      unlinkSync(posix.join(targetDir, name)); // a symlink: never follow it
      changed = true;
    } catch {
      // already gone
    }
  }
  // The previous directory, and any left by a write that was interrupted before its swap.
  const current = readlinkSync(dataLink);
  for (const entry of readdirSync(targetDir)) {
    if (entry !== current && TS_DIR.test(entry) && lstatSync(posix.join(targetDir, entry)).isDirectory()) rmSync(posix.join(targetDir, entry), { recursive: true, force: true });
  }
  return changed;
}
