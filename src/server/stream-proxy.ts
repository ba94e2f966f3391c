/**
 * The upgrade path of 10250: exec, attach and portForward connections
 * (SPDY/3.1 from the API server and kubectl, WebSocket from newer
 * clients) are authenticated, authorized, resolved to the runtime's
 * streaming URL and then proxied byte for byte, like upstream's
 * UpgradeAwareHandler in proxyStream: the client's request line and
 * headers (Upgrade, Connection, Sec-WebSocket-*, X-Stream-Protocol-Version,
 * ...) go to the runtime, and whatever it answers (the `101 Switching
 * Protocols` with the negotiated protocol, or an error) comes back
 * unchanged, followed by the stream itself.
 *
 * Nothing reaches the runtime before authentication (401) and
 * authorization (403, upstream's message) pass. A stream with no bytes in
 * either direction for `idleTimeoutMs` (streamingConnectionIdleTimeout) is
 * closed.
 */
import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { STATUS_CODES } from "node:http";
import type { Clock } from "../util/clock.ts";
import { realClock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { errorMessage } from "../util/errors.ts";
import type { Authenticate, PeerSocket, UserInfo } from "./authn.ts";
import type { AccessDecision } from "./authz.ts";
import { HttpError } from "./errors.ts";
import { allowedMethods, parseStreamingPath, type StreamingResolver } from "./streaming.ts";

/** Writes a plain-text HTTP answer on a raw socket and closes it. */
export function writeRawResponse(socket: Duplex, status: number, body: string, extraHeaders: Record<string, string> = {}): void {
  const bytes = Buffer.from(body, "utf8");
  const headers = {
    "Content-Type": "text/plain; charset=utf-8",
    "X-Content-Type-Options": "nosniff",
    ...extraHeaders,
    "Content-Length": String(bytes.length),
    Connection: "close",
  };
  const head =
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}\r\n` +
    Object.entries(headers)
      .map(([k, val]) => `${k}: ${val}\r\n`)
      .join("") +
    "\r\n";
  socket.end(Buffer.concat([Buffer.from(head, "latin1"), bytes]));
}

// Never forwarded to the runtime: the client's credentials are for the agent, and Host names the runtime.
const DROPPED_HEADERS = new Set(["host", "authorization", "proxy-authorization", "x-forwarded-for"]);

/** The request line and headers for the runtime's streaming server: the client's, minus credentials, with Host and X-Forwarded-For set. */
export function backendRequestHead(req: Pick<IncomingMessage, "method" | "url" | "rawHeaders">, target: URL, clientAddress: string | undefined): string {
  const original = new URL(req.url ?? "/", "http://agent");
  // The runtime's URL carries the request in its token; the client's query still matters for WebSocket port forwarding (?port=).
  const path = target.pathname + (target.search || original.search);
  const lines = [`${req.method ?? "GET"} ${path} HTTP/1.1`, `Host: ${target.host}`];
  let forwardedFor: string | undefined;
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!;
    const value = req.rawHeaders[i + 1]!;
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) continue;
    const lower = name.toLowerCase();
    if (lower === "x-forwarded-for") forwardedFor = forwardedFor ? `${forwardedFor}, ${value}` : value;
    if (DROPPED_HEADERS.has(lower)) continue;
    lines.push(`${name}: ${value}`);
  }
  if (clientAddress) forwardedFor = forwardedFor ? `${forwardedFor}, ${clientAddress}` : clientAddress;
  if (forwardedFor) lines.push(`X-Forwarded-For: ${forwardedFor}`);
  return lines.join("\r\n") + "\r\n\r\n";
}

export interface ProxyStreamOptions {
  client: Duplex;
  /** Bytes the HTTP parser read past the client's headers. */
  head: Buffer;
  req: Pick<IncomingMessage, "method" | "url" | "rawHeaders">;
  clientAddress?: string;
  /** The runtime's streaming URL (http, or https for a runtime with TLS streaming). */
  target: URL;
  /** 0: no idle limit. */
  idleTimeoutMs: number;
  clock: Clock;
  logger: Logger;
  /** Called once both connections are closed. */
  onClose?: () => void;
}

/** Connects to the runtime and pipes both ways until either side closes, an error, or the idle timeout. */
export function proxyStream(opts: ProxyStreamOptions): void {
  const { client, target } = opts;
  const port = Number(target.port || (target.protocol === "https:" ? 443 : 80));
  const host = target.hostname.replace(/^\[|\]$/g, "");
  // The runtime's streaming server listens on the node (containerd: 127.0.0.1) with a self-made certificate when TLS is on.
  const backend: Socket = target.protocol === "https:" ? tlsConnect({ host, port, rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] }) : netConnect({ host, port });
  let answered = false;
  let lastActivity = opts.clock.now();
  let cancelIdle: (() => void) | undefined;
  let closed = 0;
  const touch = () => {
    lastActivity = opts.clock.now();
  };
  const armIdle = (ms: number) => {
    cancelIdle = opts.clock.setTimer(ms, () => {
      const idle = opts.clock.now() - lastActivity;
      if (idle < opts.idleTimeoutMs) return armIdle(opts.idleTimeoutMs - idle);
      opts.logger.v(2).info("closing idle stream", { url: target.pathname, idleMs: idle });
      backend.destroy();
      client.destroy();
    });
  };
  if (opts.idleTimeoutMs > 0) armIdle(opts.idleTimeoutMs);
  const onClosed = () => {
    if (++closed < 2) return;
    cancelIdle?.();
    opts.onClose?.();
  };

  backend.once(target.protocol === "https:" ? "secureConnect" : "connect", () => {
    // The client may have gone while the runtime was being dialled.
    if (client.destroyed) return void backend.destroy();
    backend.write(backendRequestHead(opts.req, target, opts.clientAddress));
    if (opts.head.length) backend.write(opts.head);
    // Listening to the client only now: until the pipe exists, its bytes wait in the socket.
    client.on("data", touch);
    client.pipe(backend);
    backend.pipe(client);
  });
  backend.on("data", () => {
    answered = true;
    touch();
  });
  backend.on("error", (err) => {
    opts.logger.v(2).info("runtime streaming connection failed", { url: target.pathname, err: err.message });
    // Before the runtime said anything, the client still gets an HTTP answer (upstream: 500 from the proxy's responder).
    if (!answered) {
      answered = true;
      writeRawResponse(client, 500, `error dialing backend: ${err.message}`);
    } else client.destroy();
  });
  client.on("error", (err) => {
    opts.logger.v(4).info("streaming client connection failed", { err: err.message });
    backend.destroy();
  });
  // One side gone for good: finish the other gracefully (pipe already ended it on a clean end).
  backend.on("close", () => {
    if (!client.writableEnded) client.end();
    onClosed();
  });
  client.on("close", () => {
    if (!backend.destroyed) backend.end();
    onClosed();
  });
}

export interface StreamingUpgradeOptions {
  authenticate: Authenticate;
  checkAccess: (user: UserInfo, method: string, path: string) => Promise<AccessDecision>;
  resolver: StreamingResolver;
  /** streamingConnectionIdleTimeout in ms; 0 for none. */
  idleTimeoutMs: number;
  clock?: Clock;
  logger: Logger;
}

export type UpgradeHandler = (req: IncomingMessage & { socket: PeerSocket & Duplex & { remoteAddress?: string } }, socket: Duplex, head: Buffer) => void;

/** serveTls's `upgrade` hook: authn → authz → route → runtime URL → proxy; every failure is an HTTP answer on the socket. */
export function streamingUpgrade(opts: StreamingUpgradeOptions): UpgradeHandler {
  const log = opts.logger.with({ component: "kubeletStreaming" });
  const clock = opts.clock ?? realClock;
  return (req, socket, head) => {
    socket.on("error", (err) => log.v(4).info("streaming socket error", { err: err.message }));
    const run = async () => {
      const url = new URL(req.url ?? "/", "http://agent");
      const method = (req.method ?? "GET").toUpperCase();
      let user: UserInfo | undefined;
      try {
        user = await opts.authenticate({ socket: req.socket, authorization: req.headers.authorization });
      } catch (err) {
        log.v(2).info("unable to authenticate the request", { err: errorMessage(err), path: url.pathname });
      }
      if (!user) return writeRawResponse(socket, 401, "Unauthorized");
      const decision = await opts.checkAccess(user, method, url.pathname);
      if (!decision.allowed) return writeRawResponse(socket, decision.status, decision.message);

      const target = parseStreamingPath(url.pathname);
      if (!target || target.kind === "run") return writeRawResponse(socket, 404, "404 page not found");
      if (!allowedMethods(target.kind).includes(method)) {
        return writeRawResponse(socket, 405, "Method Not Allowed", { Allow: allowedMethods(target.kind).join(", ") });
      }
      const streamUrl = new URL(await opts.resolver.streamUrl(target, url.searchParams));
      log.v(3).info("proxying stream", { kind: target.kind, pod: `${target.namespace}/${target.pod}`, container: target.container ?? "", user: user.username });
      proxyStream({
        client: socket,
        head,
        req,
        ...(req.socket.remoteAddress ? { clientAddress: req.socket.remoteAddress } : {}),
        target: streamUrl,
        idleTimeoutMs: opts.idleTimeoutMs,
        clock,
        logger: log,
      });
    };
    run().catch((err) => {
      if (err instanceof HttpError) return writeRawResponse(socket, err.status, err.message);
      log.error("streaming request failed", { path: req.url, err: errorMessage(err) });
      writeRawResponse(socket, 500, errorMessage(err));
    });
  };
}
