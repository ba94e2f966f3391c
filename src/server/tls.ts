/**
 * The TLS listener for the authenticated kubelet API (10250).
 *
 * Bun.serve cannot show the client certificate to a handler, and a
 * `node:https` server on Bun returns nothing from getPeerCertificate()
 * (shared/NOTES.md). What works: a `node:tls` server whose connection
 * handler hands each TLS socket to a plain `node:http` server, with Hono on
 * it through @hono/node-server's request listener. The handler then reads
 * the verified peer certificate at
 * `c.env.incoming.socket.getPeerCertificate()` (see authn.ts).
 *
 * `requestCert` is on and `rejectUnauthorized` off, as upstream's
 * `tls.RequestClientCert`-style setup: anonymous and bearer-token requests
 * still reach authentication, and a presented certificate counts only when
 * it verified against `clientCA` (`socket.authorized`).
 *
 * Streaming (exec, attach, portForward) needs the raw connection: the http
 * server's `upgrade` event hands over the socket, so a `101` and a
 * byte-for-byte pass-through to the runtime's streaming server can be done
 * there (NOTES measured that this works). Pass `upgrade` to handle it;
 * without it, upgrade requests are refused with 400.
 */
import type { Duplex } from "node:stream";
import { createServer as createHttpServer, type IncomingMessage } from "node:http";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import type { Hono } from "hono";
import type { Logger } from "../util/log.ts";
import { errorMessage } from "../util/errors.ts";
import { realClock, type Clock } from "../util/clock.ts";
import { DEFAULT_CONNECTION_LIMITS, enforceConnectionLimits, type ConnectionLimits } from "./limits.ts";

/** What Hono handlers see as `c.env` when served by serveTls. */
export interface TlsBindings {
  incoming: IncomingMessage & { socket: TLSSocket };
}

export interface ServeTlsOptions {
  // Hono's generic parameters vary by app; any app's fetch is served.
  app: Pick<Hono<any, any, any>, "fetch">;
  host: string;
  /** 0 picks a free port; read it from the handle. */
  port: number;
  /** PEM server certificate (chain) and key. */
  cert: string;
  key: string;
  /** node:tls's minVersion and ciphers, from tlsMinVersion and tlsCipherSuites (tls-options.ts). */
  minVersion?: "TLSv1" | "TLSv1.1" | "TLSv1.2" | "TLSv1.3";
  ciphers?: string;
  /** PEM bundle that client certificates must verify against (authentication.x509.clientCAFile). */
  clientCA?: string;
  logger: Logger;
  /** Connection timers and the header size limit (limits.ts); defaults when absent. */
  limits?: Partial<ConnectionLimits>;
  clock?: Clock;
  /**
   * No certificate to serve with yet (serverTLSBootstrap before the CSR is
   * issued): listen, but drop every connection before its handshake until
   * setCertificate is called, as upstream fails handshakes then. `cert` and
   * `key` are a placeholder never presented.
   */
  holdUntilCertificate?: boolean;
  /** Raw `upgrade` requests (exec/attach/portForward streaming), after the TLS handshake. */
  upgrade?: (req: IncomingMessage & { socket: TLSSocket }, socket: Duplex, head: Buffer) => void;
}

export interface TlsServerHandle extends AsyncDisposable {
  readonly port: number;
  readonly host: string;
  /** Serves new connections with another certificate (a rotated serving certificate); open ones keep theirs. */
  setCertificate(cert: string, key: string): void;
  close(): Promise<void>;
}

export async function serveTls(opts: ServeTlsOptions): Promise<TlsServerHandle> {
  const log = opts.logger.with({ component: "kubeletServer" });
  // overrideGlobalObjects off: by default @hono/node-server swaps the global Response for its
  // own class, which Bun.serve (healthz, the read-only port) then refuses.
  const listener = getRequestListener(opts.app.fetch as Parameters<typeof getRequestListener>[0], { overrideGlobalObjects: false });
  const limits = { ...DEFAULT_CONNECTION_LIMITS, ...opts.limits };
  const http = createHttpServer({ maxHeaderSize: limits.maxHeaderSize }, listener);
  http.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (opts.upgrade) {
      try {
        opts.upgrade(req as IncomingMessage & { socket: TLSSocket }, socket, head);
        return;
      } catch (err) {
        log.error("upgrade handler failed", { err: errorMessage(err) });
      }
    }
    socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  });
  // As Node answers without a listener: 431 for an oversized head, 400 for anything unparsable.
  http.on("clientError", (err: Error & { code?: string }, socket: Duplex) => {
    log.v(4).info("http client error", { err: err.message });
    if (socket.writable) {
      socket.end(
        err.code === "HPE_HEADER_OVERFLOW" ? "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n" : "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n",
      );
    }
    socket.destroy();
  });

  const sockets = new Set<TLSSocket>();
  // Everything of the secure context but the certificate, which setCertificate replaces.
  const context = {
    ...(opts.clientCA ? { ca: opts.clientCA } : {}),
    ...(opts.minVersion ? { minVersion: opts.minVersion } : {}),
    ...(opts.ciphers ? { ciphers: opts.ciphers } : {}),
  };
  const tls = createTlsServer(
    {
      cert: opts.cert,
      key: opts.key,
      ...context,
      requestCert: true,
      rejectUnauthorized: false,
      ALPNProtocols: ["http/1.1"],
    },
    (socket: TLSSocket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", (err) => log.v(4).info("tls socket error", { err: err.message }));
      http.emit("connection", socket);
    },
  );
  let holding = opts.holdUntilCertificate ?? false;
  // First of the connection listeners: before the handshake and the limit timers.
  tls.prependListener("connection", (raw: Duplex) => {
    if (holding) raw.destroy();
  });
  enforceConnectionLimits({ tls, http, limits, clock: opts.clock ?? realClock });
  tls.on("tlsClientError", (err: Error) => log.v(4).info("tls handshake failed", { err: err.message }));

  await new Promise<void>((resolve, reject) => {
    tls.once("error", reject);
    tls.listen(opts.port, opts.host, () => {
      tls.off("error", reject);
      resolve();
    });
  });
  const port = (tls.address() as AddressInfo).port;
  log.info("serving the kubelet API", { address: `${opts.host}:${port}` });

  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= new Promise<void>((resolve) => {
      tls.close(() => resolve());
      for (const s of sockets) s.destroy();
      sockets.clear();
      http.close();
    }));
  const setCertificate = (cert: string, key: string) => {
    tls.setSecureContext({ cert, key, ...context });
    holding = false;
    log.info("serving with a new certificate");
  };
  return { port, host: opts.host, setCertificate, close, [Symbol.asyncDispose]: close };
}
