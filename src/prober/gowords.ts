/**
 * Upstream's probe messages are Go's error strings (pkg/probe/* return
 * err.Error() as the output, the event shows it). A user reads them in
 * `kubectl describe`, and runbooks match them, so the probes render the
 * errors of node's sockets and grpc-js in Go's words.
 */
import { GrpcCode } from "../cri/errors.ts";
import { errorMessage } from "../util/errors.ts";

/** Go's time.Duration.String for whole seconds: 1s, 1m0s, 1h0m30s. */
export function goDuration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}

/** grpc-go's codes.Code.String names, by number. */
const GO_CODE_NAMES: Record<number, string> = {
  [GrpcCode.OK]: "OK",
  [GrpcCode.CANCELLED]: "Canceled",
  [GrpcCode.UNKNOWN]: "Unknown",
  [GrpcCode.INVALID_ARGUMENT]: "InvalidArgument",
  [GrpcCode.DEADLINE_EXCEEDED]: "DeadlineExceeded",
  [GrpcCode.NOT_FOUND]: "NotFound",
  [GrpcCode.ALREADY_EXISTS]: "AlreadyExists",
  [GrpcCode.PERMISSION_DENIED]: "PermissionDenied",
  [GrpcCode.RESOURCE_EXHAUSTED]: "ResourceExhausted",
  [GrpcCode.FAILED_PRECONDITION]: "FailedPrecondition",
  [GrpcCode.ABORTED]: "Aborted",
  [GrpcCode.OUT_OF_RANGE]: "OutOfRange",
  [GrpcCode.UNIMPLEMENTED]: "Unimplemented",
  [GrpcCode.INTERNAL]: "Internal",
  [GrpcCode.UNAVAILABLE]: "Unavailable",
  [GrpcCode.DATA_LOSS]: "DataLoss",
  [GrpcCode.UNAUTHENTICATED]: "Unauthenticated",
};

/** A grpc-go status error's text: `rpc error: code = NotFound desc = ...`. */
export const goStatusError = (code: number, desc: string): string => `rpc error: code = ${GO_CODE_NAMES[code] ?? `Code(${code})`} desc = ${desc}`;

/** Go's syscall.Errno strings for the errors a connect gives. */
const ERRNO_TEXT: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  EHOSTUNREACH: "no route to host",
  ENETUNREACH: "network is unreachable",
  ETIMEDOUT: "connection timed out",
  ECONNRESET: "connection reset by peer",
  EADDRNOTAVAIL: "cannot assign requested address",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
};

/**
 * A socket error in Go's net words: `dial tcp 10.0.0.5:8080: connect:
 * connection refused` for a failed connect, `dial tcp: lookup NAME: no such
 * host` for a name that does not resolve (Go adds `on <server>:53`, which
 * node does not tell), `EOF` for a connection closed before an answer.
 * Undefined for other errors: the caller keeps node's words.
 */
export function goNetError(err: unknown, addr: string): string | undefined {
  const e = err as { code?: unknown; syscall?: unknown; hostname?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : undefined;
  if (code && e?.syscall === "connect" && ERRNO_TEXT[code]) return `dial tcp ${addr}: connect: ${ERRNO_TEXT[code]}`;
  if (code === "ENOTFOUND") {
    const host = typeof e?.hostname === "string" ? e.hostname : addr.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
    return `dial tcp: lookup ${host}: no such host`;
  }
  if (errorMessage(err) === "socket hang up") return "EOF";
  return undefined;
}
