/**
 * setrlimit(RLIMIT_NOFILE) for the agent itself, through libc (bun:ffi), as
 * upstream's rlimit.SetNumFiles at start: soft and hard limit both set to
 * maxOpenFiles. Raising the hard limit needs CAP_SYS_RESOURCE; the error
 * names errno so the operator sees why.
 */
import { dlopen, FFIType, ptr, read } from "bun:ffi";

const RLIMIT_NOFILE = 7;
const ERRNO_NAMES: Record<number, string> = { 1: "EPERM (raising the hard limit needs CAP_SYS_RESOURCE)", 22: "EINVAL (above fs.nr_open, or soft above hard)" };

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
