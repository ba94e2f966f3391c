/**
 * setrlimit(RLIMIT_NOFILE) for the agent itself, through libc (bun:ffi), as
 * upstream's rlimit.SetNumFiles at start: soft and hard limit both set to
 * maxOpenFiles. Raising the hard limit needs CAP_SYS_RESOURCE; the error
 * names errno so the operator sees why.
 *
 * bun:ffi needs the JIT, and the agent runs without it (memory/jit.ts: it
 * re-executes itself with BUN_JSC_useJIT=0). So main sets the limit in the
 * process that still has the JIT, just before that execve (limits survive
 * it, and Bun's own start-up raise of the soft limit to the hard changes
 * nothing when both are equal), and hands a failure over in
 * OPEN_FILE_LIMIT_ERROR; the process after the execve checks its limit
 * (applyOpenFileLimit).
 */
import { dlopen, FFIType, ptr, read } from "bun:ffi";

const RLIMIT_NOFILE = 7;
const ERRNO_NAMES: Record<number, string> = { 1: "EPERM (raising the hard limit needs CAP_SYS_RESOURCE)", 22: "EINVAL (above fs.nr_open, or soft above hard)" };

/** The environment variable carrying a failure of setOpenFileLimit across the agent's execve without the JIT. */
export const OPEN_FILE_LIMIT_ERROR = "BUNLET_OPEN_FILE_LIMIT_ERROR";

const SYMBOLS = {
  setrlimit: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
  __errno_location: { args: [], returns: FFIType.ptr },
} as const;
/** glibc, then musl (the -musl builds). */
const LIBC_NAMES = ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`];

function openLibc() {
  const errors: string[] = [];
  for (const name of LIBC_NAMES) {
    try {
      return dlopen(name, SYMBOLS);
    } catch (err) {
      errors.push(`${name}: ${(err as Error).message}`);
    }
  }
  throw new Error(`cannot load the C library for setrlimit (${errors.join("; ")})`);
}

/** setrlimit(RLIMIT_NOFILE, {limit, limit}); needs the JIT (bun:ffi). Throws why it could not. */
export function setOpenFileLimit(limit: number): void {
  const libc = openLibc();
  try {
    const rlimit = new BigUint64Array([BigInt(limit), BigInt(limit)]);
    if (libc.symbols.setrlimit(RLIMIT_NOFILE, ptr(rlimit)) !== 0) {
      const errnoPtr = libc.symbols.__errno_location();
      const errno = errnoPtr ? read.i32(errnoPtr, 0) : 0;
      throw new Error(`setrlimit(RLIMIT_NOFILE, ${limit}) failed: ${ERRNO_NAMES[errno] ?? `errno ${errno}`}`);
    }
  } finally {
    libc.close();
  }
}

/** Soft and hard "Max open files" of a /proc/PID/limits text ("unlimited" is Infinity). */
export function parseOpenFileLimit(limits: string): { soft: number; hard: number } {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)\s/m.exec(limits);
  if (!m) throw new Error("no Max open files line in the process limits");
  const n = (s: string | undefined) => (s === "unlimited" || s === undefined ? Number.POSITIVE_INFINITY : Number(s));
  return { soft: n(m[1]), hard: n(m[2]) };
}

export interface OpenFileLimitDeps {
  /** Whether this process has the JIT (bun:ffi works). */
  jit: boolean;
  /** setOpenFileLimit. */
  set(limit: number): void;
  /** OPEN_FILE_LIMIT_ERROR as the process before the execve left it, if it failed. */
  inheritedError: string | undefined;
  /** This process's /proc/self/limits. */
  limits(): string;
}

/**
 * maxOpenFiles for the agent process: set it when the JIT is there;
 * without it, check what the process before the execve set. Throws why the
 * limit is not maxOpenFiles.
 */
export function applyOpenFileLimit(limit: number, deps: OpenFileLimitDeps): void {
  if (deps.jit) {
    deps.set(limit);
    return;
  }
  if (deps.inheritedError) throw new Error(deps.inheritedError);
  const { soft, hard } = parseOpenFileLimit(deps.limits());
  if (soft === limit && hard === limit) return;
  throw new Error(`setrlimit goes through bun:ffi, which needs the JIT, and the JIT was turned off outside the agent (BUN_JSC_useJIT); the limit stays soft ${soft}, hard ${hard}`);
}
