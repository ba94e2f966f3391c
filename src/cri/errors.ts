/**
 * Typed CRI errors. Every failure that leaves the CRI subsystem is a
 * CriError: callers branch on `kind`, never on message text. The gRPC status
 * to kind mapping lives here and nowhere else.
 */

/** gRPC status codes (grpc/doc/statuscodes.md), by number. */
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type GrpcCodeName = keyof typeof GrpcCode;

export type CriErrorKind =
  | "NotFound"
  | "Unavailable"
  | "DeadlineExceeded"
  | "InvalidArgument"
  | "AlreadyExists"
  | "ResourceExhausted"
  | "FailedPrecondition"
  | "Unimplemented"
  | "Canceled"
  | "Unknown";

/** The kind for a gRPC status code. Codes the agent never branches on are "Unknown" (the code is kept). */
export function kindForCode(code: number): CriErrorKind {
  switch (code) {
    case GrpcCode.NOT_FOUND:
      return "NotFound";
    case GrpcCode.UNAVAILABLE:
      return "Unavailable";
    case GrpcCode.DEADLINE_EXCEEDED:
      return "DeadlineExceeded";
    case GrpcCode.INVALID_ARGUMENT:
      return "InvalidArgument";
    case GrpcCode.ALREADY_EXISTS:
      return "AlreadyExists";
    case GrpcCode.RESOURCE_EXHAUSTED:
      return "ResourceExhausted";
    case GrpcCode.FAILED_PRECONDITION:
      return "FailedPrecondition";
    case GrpcCode.UNIMPLEMENTED:
      return "Unimplemented";
    case GrpcCode.CANCELLED:
      return "Canceled";
    default:
      return "Unknown";
  }
}

/** The canonical gRPC code for a kind; used by the fake so both implementations report the same `code`. */
export function codeForKind(kind: CriErrorKind): number {
  switch (kind) {
    case "NotFound":
      return GrpcCode.NOT_FOUND;
    case "Unavailable":
      return GrpcCode.UNAVAILABLE;
    case "DeadlineExceeded":
      return GrpcCode.DEADLINE_EXCEEDED;
    case "InvalidArgument":
      return GrpcCode.INVALID_ARGUMENT;
    case "AlreadyExists":
      return GrpcCode.ALREADY_EXISTS;
    case "ResourceExhausted":
      return GrpcCode.RESOURCE_EXHAUSTED;
    case "FailedPrecondition":
      return GrpcCode.FAILED_PRECONDITION;
    case "Unimplemented":
      return GrpcCode.UNIMPLEMENTED;
    case "Canceled":
      return GrpcCode.CANCELLED;
    case "Unknown":
      return GrpcCode.UNKNOWN;
  }
}

export interface CriErrorInit {
  kind: CriErrorKind;
  /** CRI method name as on the wire, e.g. "ContainerStatus". */
  method: string;
  /** gRPC status code; defaults to the kind's canonical code. */
  code?: number;
  /** The sandbox, container or image the call was about, if any. */
  target?: string;
  /** The runtime's own words. */
  detail: string;
  cause?: unknown;
}

export class CriError extends Error {
  override readonly name = "CriError";
  readonly kind: CriErrorKind;
  readonly method: string;
  readonly code: number;
  readonly target: string | undefined;
  readonly detail: string;

  constructor(init: CriErrorInit) {
    const where = init.target ? `${init.method} ${init.target}` : init.method;
    super(`CRI ${where}: ${init.kind}: ${init.detail}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.kind = init.kind;
    this.method = init.method;
    this.code = init.code ?? codeForKind(init.kind);
    this.target = init.target;
    this.detail = init.detail;
  }
}

export function isCriError(err: unknown, kind?: CriErrorKind): err is CriError {
  return err instanceof CriError && (kind === undefined || err.kind === kind);
}

/** True for a CriError of kind NotFound: the object is already gone (success for removals). */
export function isNotFound(err: unknown): boolean {
  return isCriError(err, "NotFound");
}

/** True when the runtime could not be reached; the caller should retry later. */
export function isUnavailable(err: unknown): boolean {
  return isCriError(err, "Unavailable");
}

export const CONTAINERD_NOT_INITIALIZED = "server is not initialized yet";

/**
 * Converts anything a gRPC call threw into a CriError. Understands
 * protobuf-ts RpcError (`code` is the status name, e.g. "NOT_FOUND") and
 * grpc-js ServiceError (`code` is the number, `details` the text).
 */
export function toCriError(err: unknown, method: string, target?: string): CriError {
  if (err instanceof CriError) return err;
  let code: number = GrpcCode.UNKNOWN;
  let detail = err instanceof Error ? err.message : String(err);
  if (typeof err === "object" && err !== null) {
    const e = err as { code?: unknown; details?: unknown };
    if (typeof e.code === "number" && e.code >= 0 && e.code <= 16) code = e.code;
    else if (typeof e.code === "string" && e.code in GrpcCode) code = GrpcCode[e.code as GrpcCodeName];
    if (typeof e.details === "string" && e.details) detail = e.details;
  }
  let kind = kindForCode(code);
  // containerd's CRI plugin answers this, with no status code, for a moment
  // after it starts while it restores its state: the runtime is not there yet.
  if (kind === "Unknown" && detail === CONTAINERD_NOT_INITIALIZED) kind = "Unavailable";
  const init: CriErrorInit = { kind, method, code, detail, cause: err };
  if (target !== undefined) init.target = target;
  return new CriError(init);
}

/** grpc-go's codes.Code String() names, by number. */
const GO_CODE_NAMES = [
  "OK",
  "Canceled",
  "Unknown",
  "InvalidArgument",
  "DeadlineExceeded",
  "NotFound",
  "AlreadyExists",
  "PermissionDenied",
  "ResourceExhausted",
  "FailedPrecondition",
  "Aborted",
  "OutOfRange",
  "Unimplemented",
  "Internal",
  "Unavailable",
  "DataLoss",
  "Unauthenticated",
] as const;

/**
 * The runtime's own words, as upstream's kubelet takes them with
 * grpcstatus.FromError(err).Message() for events and container statuses
 * (kuberuntime_container.go:218-296): no method, no code.
 */
export function runtimeMessage(err: unknown): string {
  if (err instanceof CriError) return err.detail;
  return err instanceof Error ? err.message : String(err);
}

/**
 * A CRI error as grpc-go prints it ("rpc error: code = NotFound desc = ..."),
 * which upstream's kubelet shows where it prints the error itself. With
 * `stripUnknown`, an Unknown one is its message alone, as the CRI client's
 * PullImage returns it (cri-client pkg/remote_image.go:195-203).
 */
export function goRpcError(err: unknown, stripUnknown = false): string {
  if (!(err instanceof CriError)) return err instanceof Error ? err.message : String(err);
  if (stripUnknown && err.code === GrpcCode.UNKNOWN) return err.detail;
  return `rpc error: code = ${GO_CODE_NAMES[err.code] ?? `Code(${err.code})`} desc = ${err.detail}`;
}
