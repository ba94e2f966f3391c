/**
 * How the REST client's requests reach the API server: one request in, a
 * web `Response` out (its body a stream, for watches). Two transports:
 * `fetchTransport`, HTTP/1.1 over Bun's fetch, and `Http2Transport`
 * (http2.ts), one multiplexed HTTP/2 session per API server as upstream's Go
 * client keeps, falling back to the first where the server offers no h2.
 * `FakeTransport` (fake-transport.ts) answers from a handler in unit tests.
 */

export interface TransportRequest {
  method: string;
  url: URL;
  /** Header names as sent; the HTTP/2 transport lowercases them. */
  headers: Record<string, string>;
  body?: string | Uint8Array;
  signal: AbortSignal;
}

/** TLS material for a new connection; read again for each one (the client certificate rotates). */
export interface TlsMaterial {
  ca?: string;
  cert?: string;
  key?: string;
  rejectUnauthorized: boolean;
}

export interface HttpTransport {
  /** Resolves with the answer once its status and headers arrived; rejects with the signal's reason when it aborts first, or a TransportError. */
  send(req: TransportRequest): Promise<Response>;
  /** Ends the transport's connections (in-flight requests may fail). */
  close(): void;
}

/** Closed: the connection ended under a request (a GET is sent again); Stopped: this client was closed. */
export type TransportErrorKind = "Connect" | "Tls" | "Protocol" | "Closed" | "Stopped" | "Timeout";

/** A request that never got an answer: the server, what failed and why. */
export class TransportError extends Error {
  override readonly name = "TransportError";
  constructor(
    readonly kind: TransportErrorKind,
    readonly server: string,
    detail: string,
    readonly code?: string,
  ) {
    super(`${server}: ${kind}: ${detail}`);
  }
}

/** HTTP/1.1 through Bun's fetch (its own keep-alive pool), with the TLS material read per request. */
export function fetchTransport(tls: () => TlsMaterial): HttpTransport {
  return {
    send: (req) =>
      fetch(req.url, {
        method: req.method,
        headers: req.headers,
        ...(req.body !== undefined ? { body: req.body } : {}),
        signal: req.signal,
        tls: tls(),
      } as RequestInit),
    close() {},
  };
}
