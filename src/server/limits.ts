/**
 * Limits on 10250, so that one slow or hostile client cannot tie up the
 * agent: upstream's kubelet sets MaxHeaderBytes (1 MiB) and long read/write
 * timeouts on its http.Server; this agent is stricter, because its budget of
 * memory and file descriptors is small.
 *
 * Bun's node:http server does not enforce `headersTimeout`,
 * `requestTimeout` or the TLS `handshakeTimeout` (measured on Bun 1.4.5:
 * a client that stops mid-header keeps its connection forever), so the
 * connection timers are kept here, per socket, on the injected clock:
 *   - handshake: a TCP connection must finish TLS within `handshakeMs`;
 *   - headers: a connection must deliver a request's headers within
 *     `headersMs` of connecting, and within `idleMs` of its previous
 *     response (keep-alive);
 *   - body: a request's body must arrive within `requestMs` of its headers
 *     (a handler that never reads a body it was sent is held to that too).
 * An expired timer destroys the connection. Upgraded connections (exec,
 * attach, portForward) leave these timers at the upgrade and follow
 * streamingConnectionIdleTimeout instead (stream-proxy.ts).
 *
 * `maxHeaderSize` is enforced by the HTTP parser (431); `handlerTimeout` and
 * the body size limit are Hono middleware on the app (kubelet-api.ts).
 */
import type { IncomingMessage, Server as HttpServer, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Server as TlsServer } from "node:tls";
import type { MiddlewareHandler } from "hono";
import type { Clock } from "../util/clock.ts";
import { formatDuration } from "../config/duration.ts";
import { HttpError } from "./errors.ts";

export interface ConnectionLimits {
  handshakeMs: number;
  headersMs: number;
  requestMs: number;
  idleMs: number;
  /** Largest request head (request line + headers) in bytes. */
  maxHeaderSize: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  handshakeMs: 10_000,
  headersMs: 30_000,
  requestMs: 60_000,
  // upstream's IdleTimeout: matches http.DefaultTransport's keep-alive
  idleMs: 90_000,
  maxHeaderSize: 64 * 1024,
};

/** Largest request body the non-streaming endpoints read (none needs more). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** A non-streaming handler that has not answered by then gets a 504. */
export const HANDLER_TIMEOUT_MS = 2 * 60_000;

/** Arms the per-connection timers on a TLS server that hands sockets to `http` (tls.ts). */
export function enforceConnectionLimits(opts: { tls: TlsServer; http: HttpServer; limits: ConnectionLimits; clock: Clock }): void {
  const { limits, clock } = opts;
  const timers = new WeakMap<object, () => void>();
  const arm = (socket: Duplex, ms: number) => {
    timers.get(socket)?.();
    timers.set(
      socket,
      clock.setTimer(ms, () => socket.destroy()),
    );
  };
  const disarm = (socket: object) => {
    timers.get(socket)?.();
    timers.delete(socket);
  };

  opts.tls.on("connection", (raw: Socket) => {
    arm(raw, limits.handshakeMs);
    raw.once("close", () => disarm(raw));
  });
  opts.tls.on("secureConnection", (socket: Socket & { _parent?: Socket }) => {
    // Bun hands the same object to `connection` and `secureConnection`; Node wraps the raw socket (_parent).
    if (socket._parent) disarm(socket._parent);
    arm(socket, limits.headersMs);
    socket.once("close", () => disarm(socket));
  });
  opts.http.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    // A connection destroyed mid-body (by a timer here, or the client) makes the request emit "aborted" errors; they are not the agent's failure.
    req.on("error", () => {});
    const hasBody = req.headers["transfer-encoding"] !== undefined || (req.headers["content-length"] ?? "0") !== "0";
    if (!hasBody || req.complete) disarm(socket);
    else {
      // Until the body is in (or the answer is complete, for a handler that never reads it).
      arm(socket, limits.requestMs);
      req.once("end", () => disarm(socket));
    }
    res.once("finish", () => {
      if (!socket.destroyed) arm(socket, limits.idleMs);
    });
  });
  opts.http.on("upgrade", (req: IncomingMessage) => disarm(req.socket));
}

/** Hono middleware: a handler that has not produced its response within `ms` is an HttpError 504 (its work is left to finish). */
export function handlerTimeout(opts: { ms: number; clock: Clock }): MiddlewareHandler<any> {
  const message = `Timeout: request did not complete within ${formatDuration(opts.ms)}`;
  return async (_c, next) => {
    let cancel: (() => void) | undefined;
    const expired = new Promise<"timeout">((resolve) => {
      cancel = opts.clock.setTimer(opts.ms, () => resolve("timeout"));
    });
    const done = next().then(() => "done" as const);
    const winner = await Promise.race([done, expired]);
    cancel?.();
    if (winner === "timeout") {
      done.catch(() => {}); // the late handler's failure has nobody to answer
      throw new HttpError(504, message);
    }
  };
}
