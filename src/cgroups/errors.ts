/**
 * Typed errors of the cgroup writer. `kind` is what a caller acts on:
 * Busy (a cgroup still has processes or children: retry later), NotFound
 * (a hierarchy, file or controller is missing), Unsupported (the host
 * cannot do what was asked, e.g. a required controller is not available),
 * Invalid (the kernel refused a value), Io (anything else).
 */
export type CgroupErrorKind = "Busy" | "NotFound" | "Unsupported" | "Invalid" | "Io";

export class CgroupError extends Error {
  override readonly name = "CgroupError";
  constructor(
    readonly kind: CgroupErrorKind,
    /** What was attempted: "mkdir", "write", "rmdir", "enable", "detect" ... */
    readonly op: string,
    readonly path: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`cgroup ${op} ${path}: ${message}`, options);
  }
}

export function isCgroupError(e: unknown, kind?: CgroupErrorKind): e is CgroupError {
  return e instanceof CgroupError && (kind === undefined || e.kind === kind);
}

const KIND_BY_CODE: Record<string, CgroupErrorKind> = {
  EBUSY: "Busy",
  ENOTEMPTY: "Busy",
  ENOENT: "NotFound",
  EINVAL: "Invalid",
  ERANGE: "Invalid",
  EOPNOTSUPP: "Unsupported",
  ENOTSUP: "Unsupported",
};

/** Wraps a Node fs error (errno code) into a CgroupError. */
export function fromErrno(op: string, path: string, e: unknown): CgroupError {
  if (e instanceof CgroupError) return e;
  const code = (e as { code?: string }).code ?? "";
  const msg = e instanceof Error ? e.message : String(e);
  return new CgroupError(KIND_BY_CODE[code] ?? "Io", op, path, code ? `${code} (${msg})` : msg, { cause: e });
}
