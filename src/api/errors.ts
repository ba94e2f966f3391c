/**
 * API errors at the boundary, typed by the Status `reason` the API server
 * sends (NotFound, AlreadyExists, Conflict, Gone, Forbidden, ...), with the
 * verb and path that failed.
 */
export type ApiReason =
  | "NotFound"
  | "AlreadyExists"
  | "Conflict"
  | "Gone"
  | "Expired"
  | "Forbidden"
  | "Unauthorized"
  | "Invalid"
  | "BadRequest"
  | "TooManyRequests"
  | "Timeout"
  | "ServerTimeout"
  | "InternalError"
  | "ServiceUnavailable"
  | "Unreachable"
  | "Unknown";

export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly reason: ApiReason,
    readonly status: number,
    readonly verb: string,
    readonly path: string,
    detail: string,
    /** The Status's details.causes types (e.g. NamespaceTerminating), as client-go's HasStatusCause reads them. */
    readonly causes: readonly string[] = [],
  ) {
    super(`${verb} ${path}: ${reason} (${status}): ${detail}`);
  }
}

const byStatus: Record<number, ApiReason> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  409: "Conflict",
  410: "Gone",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

export function apiErrorFrom(status: number, body: unknown, verb: string, path: string): ApiError {
  const s = (body ?? {}) as { reason?: string; message?: string; details?: { causes?: { reason?: unknown }[] } };
  const reason = (s.reason && s.reason !== "" ? s.reason : (byStatus[status] ?? "Unknown")) as ApiReason;
  const causes = Array.isArray(s.details?.causes) ? s.details.causes.flatMap((c) => (typeof c?.reason === "string" ? [c.reason] : [])) : [];
  return new ApiError(reason, status, verb, path, s.message ?? `HTTP ${status}`, causes);
}

/** client-go's errors.HasStatusCause. */
export const hasStatusCause = (err: unknown, cause: string): boolean => err instanceof ApiError && err.causes.includes(cause);

export const isApiReason = (err: unknown, reason: ApiReason): boolean => err instanceof ApiError && err.reason === reason;
