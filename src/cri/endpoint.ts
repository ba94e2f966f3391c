/**
 * CRI endpoint parsing, accepting what the kubelet accepts on Linux
 * (`--container-runtime-endpoint`): `unix:///path/to.sock`, or a bare
 * absolute path, which the kubelet still takes with a deprecation warning
 * (pkg/kubelet/util/util_unix.go falls back to the unix scheme).
 */

export interface CriEndpoint {
  /** Absolute filesystem path of the socket. */
  path: string;
  /** The target string grpc-js dials: `unix:///abs/path`. */
  target: string;
  /** True when given as a bare path (the kubelet warns about this form). */
  deprecatedForm: boolean;
}

/** sun_path is 108 bytes on Linux, including the terminating NUL. */
export const MAX_UNIX_SOCKET_PATH = 107;

export class EndpointError extends Error {
  override readonly name = "EndpointError";
}

/** Parses a runtime endpoint; throws EndpointError saying what form is expected. */
export function parseEndpoint(endpoint: string): CriEndpoint {
  const raw = endpoint.trim();
  if (raw === "") throw new EndpointError("CRI endpoint is empty; expected unix:///path/to/runtime.sock");
  let path: string;
  let deprecatedForm = false;
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(raw)?.[1];
  if (scheme === undefined) {
    path = raw;
    deprecatedForm = true;
  } else if (scheme.toLowerCase() === "unix") {
    const rest = raw.slice(scheme.length + 1);
    // unix:///abs and unix:/abs both name /abs; unix://host/abs names a host, which a socket has not.
    if (rest.startsWith("//") && !rest.startsWith("///")) {
      throw new EndpointError(`CRI endpoint ${JSON.stringify(endpoint)} has a host part; expected unix:///absolute/path`);
    }
    path = "/" + rest.replace(/^\/+/, "");
  } else {
    throw new EndpointError(`CRI endpoint ${JSON.stringify(endpoint)} uses protocol ${JSON.stringify(scheme)}; only unix sockets are supported on Linux`);
  }
  if (!path.startsWith("/")) {
    throw new EndpointError(`CRI endpoint ${JSON.stringify(endpoint)} is not an absolute path`);
  }
  path = path.replace(/\/{2,}/g, "/");
  if (path === "/" || path.endsWith("/")) {
    throw new EndpointError(`CRI endpoint ${JSON.stringify(endpoint)} names a directory, not a socket`);
  }
  if (Buffer.byteLength(path) > MAX_UNIX_SOCKET_PATH) {
    throw new EndpointError(`CRI endpoint ${JSON.stringify(endpoint)} is ${Buffer.byteLength(path)} bytes; unix socket paths are limited to ${MAX_UNIX_SOCKET_PATH}`);
  }
  return { path, target: `unix://${path}`, deprecatedForm };
}
