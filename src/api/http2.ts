/**
 * HTTP/2 to the API server, as upstream's Go client speaks it: one TLS
 * connection per API server carries every request and watch as streams, its
 * headers HPACK-compressed (a lease renewal's ~390 bytes of HTTP/1.1 headers
 * become a few table indexes).
 *
 * - The connection is dialled with ALPN `h2, http/1.1`; a server that picks
 *   HTTP/1.1 (or no ALPN) gets the fallback transport from then on, logged once.
 * - A session that fails, is closed or sends GOAWAY takes no new streams; the
 *   next request dials a new one. A stream the server refused (GOAWAY, or
 *   REFUSED_STREAM: never processed) is sent once more on a new session.
 * - Health as client-go's: when nothing was read for `readIdleMs` (30 s) a
 *   PING goes out, and no answer within `pingTimeoutMs` (15 s) ends the
 *   session, so a dead connection fails its watches instead of hanging them;
 *   a session with no stream for `idleCloseMs` (90 s) is closed.
 * - The TLS material is read for each request: when the client certificate
 *   changed (rotation), the session is retired (no new streams; its open
 *   watches run to their end) and new requests go on a session with the new
 *   certificate.
 */
import http2, { type ClientHttp2Session, type ClientHttp2Stream, constants, type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http2";
import { isIP } from "node:net";
import tls from "node:tls";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { type HttpTransport, type TlsMaterial, TransportError, type TransportRequest } from "./transport.ts";

export interface Http2TransportOptions {
  /** https://host[:port] */
  server: string;
  tls: () => TlsMaterial;
  logger: Logger;
  clock: Clock;
  /** Where requests go when the server does not speak h2. */
  fallback: HttpTransport;
  /** TCP connect and TLS handshake, as Go's TLSHandshakeTimeout. */
  connectTimeoutMs?: number;
  readIdleMs?: number;
  pingTimeoutMs?: number;
  idleCloseMs?: number;
}

interface Session {
  readonly h2: ClientHttp2Session;
  streams: number;
  lastRead: number;
  idleSince: number;
  stopTimer: () => void;
}

interface Current {
  readonly cert: string | undefined;
  readonly dial: Promise<Session | "http1">;
  session?: Session;
}

/** A request the server never processed (refused or the session went away first): safe to send again. */
class Unsent extends Error {}

const NULL_BODY = new Set([101, 204, 205, 304]);

/**
 * Flow-control windows as Go's HTTP/2 client (upstream's): 4 MiB a stream,
 * 1 GiB the connection. With node's defaults (64 KiB each) the API server
 * may send only 64 KiB on all streams together before this side's window
 * updates reach it, so a list or a burst of watch events waits on round
 * trips (the API server closes a watch whose events back up).
 */
export const STREAM_WINDOW_BYTES = 4 << 20;
export const CONNECTION_WINDOW_BYTES = 1 << 30;

export class Http2Transport implements HttpTransport {
  private mode: "h2" | "http1" = "h2";
  private current: Current | undefined;
  private closed = false;
  /** Whether a session was opened yet (logged once). */
  private spoke = false;
  private readonly origin: URL;
  private readonly connectTimeoutMs: number;
  private readonly readIdleMs: number;
  private readonly pingTimeoutMs: number;
  private readonly idleCloseMs: number;

  constructor(private readonly opts: Http2TransportOptions) {
    this.origin = new URL(opts.server);
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
    this.readIdleMs = opts.readIdleMs ?? 30_000;
    this.pingTimeoutMs = opts.pingTimeoutMs ?? 15_000;
    this.idleCloseMs = opts.idleCloseMs ?? 90_000;
  }

  /** "h2" until the server turned out not to speak it. */
  get protocol(): "h2" | "http1" {
    return this.mode;
  }

  async send(req: TransportRequest): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      if (this.mode === "http1") return this.opts.fallback.send(req);
      if (this.closed) throw new TransportError("Stopped", this.opts.server, "the transport is closed");
      const session = await this.session(req.signal);
      if (session === "http1") continue;
      try {
        return await this.request(session, req);
      } catch (err) {
        if (!(err instanceof Unsent)) throw err;
        if (attempt > 0) throw new TransportError("Closed", this.opts.server, `the request was refused twice: ${err.message}`);
      }
    }
  }

  close(): void {
    this.closed = true;
    const current = this.current;
    this.current = undefined;
    void current?.dial.then(
      (s) => s !== "http1" && s.h2.close(),
      () => {},
    );
    this.opts.fallback.close();
  }

  /** The session for the TLS material in force now; a new one when the client certificate changed. */
  private async session(signal: AbortSignal): Promise<Session | "http1"> {
    const material = this.opts.tls();
    if (this.current && this.current.cert !== material.cert) {
      this.opts.logger.info("the client certificate changed; new API requests go on a new HTTP/2 connection", { server: this.opts.server });
      this.retire(this.current);
    }
    if (!this.current) {
      const current: Current = { cert: material.cert, dial: this.dial(material) };
      this.current = current;
      current.dial.then(
        (s) => {
          if (s !== "http1") current.session = s;
        },
        () => {
          if (this.current === current) this.current = undefined;
        },
      );
    }
    return abortable(this.current.dial, signal);
  }

  /** No new streams on `current`'s session; open ones run to their end. */
  private retire(current: Current): void {
    if (this.current === current) this.current = undefined;
    void current.dial.then(
      (s) => s !== "http1" && !s.h2.closed && s.h2.close(),
      () => {},
    );
  }

  private dial(material: TlsMaterial): Promise<Session | "http1"> {
    const { server, logger, clock } = this.opts;
    const host = this.origin.hostname.replace(/^\[(.*)\]$/, "$1");
    const port = Number(this.origin.port || 443);
    return new Promise((resolve, reject) => {
      const socket = tls.connect({
        host,
        port,
        ...(isIP(host) ? {} : { servername: host }),
        ...(material.ca ? { ca: material.ca } : {}),
        ...(material.cert ? { cert: material.cert } : {}),
        ...(material.key ? { key: material.key } : {}),
        rejectUnauthorized: material.rejectUnauthorized,
        ALPNProtocols: ["h2", "http/1.1"],
      });
      const cancelTimer = clock.setTimer(this.connectTimeoutMs, () =>
        socket.destroy(new TransportError("Timeout", server, `no TLS connection within ${this.connectTimeoutMs} ms`)),
      );
      const onError = (err: Error) => {
        cancelTimer();
        reject(err instanceof TransportError ? err : dialError(server, err));
      };
      socket.once("error", onError);
      socket.once("secureConnect", () => {
        cancelTimer();
        socket.off("error", onError);
        if (socket.alpnProtocol !== "h2") {
          socket.destroy();
          if (this.mode === "h2") logger.warn("the API server does not offer HTTP/2; using HTTP/1.1", { server, alpn: socket.alpnProtocol || "none" });
          this.mode = "http1";
          resolve("http1");
          return;
        }
        if (!this.spoke) logger.info("speaking HTTP/2 to the API server", { server });
        this.spoke = true;
        const h2 = http2.connect(this.origin, { createConnection: () => socket, settings: { initialWindowSize: STREAM_WINDOW_BYTES, enablePush: false } });
        h2.once("connect", () => h2.setLocalWindowSize(CONNECTION_WINDOW_BYTES));
        resolve(this.track(h2));
      });
    });
  }

  /** Session bookkeeping: dropped as current when it ends or is told to go away; PINGs when idle. */
  private track(h2: ClientHttp2Session): Session {
    const { clock, logger, server } = this.opts;
    const now = clock.now();
    const s: Session = { h2, streams: 0, lastRead: now, idleSince: now, stopTimer: () => {} };
    const drop = () => {
      if (this.current?.session === s) this.current = undefined;
    };
    h2.on("goaway", (code: number) => {
      drop();
      logger.v(2).info("the API server sent GOAWAY; new requests go on a new HTTP/2 connection", { server, code });
    });
    h2.on("error", (err: Error) => {
      drop();
      logger.v(2).info("the HTTP/2 connection to the API server failed", { server, err: errorMessage(err) });
    });
    h2.on("close", () => {
      drop();
      s.stopTimer();
    });
    const period = Math.min(this.readIdleMs, this.idleCloseMs) / 2;
    const tick = () => {
      if (h2.closed || h2.destroyed) return;
      const at = clock.now();
      if (s.streams === 0 && at - s.idleSince >= this.idleCloseMs) {
        drop();
        h2.close();
        return;
      }
      if (at - s.lastRead >= this.readIdleMs) {
        const cancel = clock.setTimer(this.pingTimeoutMs, () => {
          drop();
          h2.destroy(new TransportError("Timeout", server, `no PING answer within ${this.pingTimeoutMs} ms`));
        });
        h2.ping((err) => {
          cancel();
          if (!err) s.lastRead = clock.now();
        });
      }
      s.stopTimer = clock.setTimer(period, tick);
    };
    s.stopTimer = clock.setTimer(period, tick);
    return s;
  }

  private request(s: Session, req: TransportRequest): Promise<Response> {
    const { clock, server } = this.opts;
    return new Promise((resolve, reject) => {
      if (req.signal.aborted) return reject(req.signal.reason);
      const headers: OutgoingHttpHeaders = { ":method": req.method, ":path": req.url.pathname + req.url.search };
      for (const [k, v] of Object.entries(req.headers)) headers[k.toLowerCase()] = v;
      let stream: ClientHttp2Stream;
      try {
        // endStream false always: node:http2 (and Bun's) otherwise closes the request side at once for the
        // methods it deems bodiless (GET, HEAD and DELETE), and a DELETE's DeleteOptions body was dropped.
        stream = s.h2.request(headers, { endStream: false });
      } catch (err) {
        // The session closed or went away after it was picked.
        if (this.current?.session === s) this.current = undefined;
        return reject(new Unsent(errorMessage(err)));
      }
      s.streams++;
      let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
      let settled = false;
      let done = false;
      let failure: Error | undefined;
      let answerLength: string | undefined;
      let received = 0;
      const finish = (err: Error | undefined) => {
        if (!settled) {
          settled = true;
          reject(err ?? new TransportError("Closed", server, "the stream closed before an answer"));
        } else if (!done) {
          done = true;
          if (err) controller?.error(err);
          else controller?.close();
        }
      };
      const onAbort = () => {
        failure = req.signal.reason as Error;
        finish(failure);
        if (!stream.closed) stream.close(constants.NGHTTP2_CANCEL);
      };
      req.signal.addEventListener("abort", onAbort, { once: true });
      stream.on("response", (h: IncomingHttpHeaders) => {
        s.lastRead = clock.now();
        if (settled) return;
        settled = true;
        const status = Number(h[":status"]);
        answerLength = typeof h["content-length"] === "string" ? h["content-length"] : undefined;
        const answer = new Headers();
        for (const [k, v] of Object.entries(h)) {
          if (k.startsWith(":") || v === undefined) continue;
          for (const one of Array.isArray(v) ? v : [String(v)]) answer.append(k, one);
        }
        const body = NULL_BODY.has(status)
          ? null
          : new ReadableStream<Uint8Array>({
              start: (c) => {
                controller = c;
              },
              pull: () => {
                stream.resume();
              },
              cancel: () => {
                done = true;
                if (!stream.closed) stream.close(constants.NGHTTP2_CANCEL);
              },
            });
        if (!body) done = true;
        resolve(new Response(body, { status, headers: answer }));
      });
      stream.on("data", (chunk: Buffer) => {
        s.lastRead = clock.now();
        received += chunk.byteLength;
        if (done || !controller) return;
        controller.enqueue(new Uint8Array(chunk));
        if ((controller.desiredSize ?? 1) <= 0) stream.pause();
      });
      // Bun ends a stream whose connection was cut as if it were complete; its reset code and session tell the two apart.
      stream.on("end", () => {
        const length = Number(answerLength);
        if (stream.rstCode || s.h2.destroyed) finish(new TransportError("Closed", server, `the connection ended before the answer did (code ${stream.rstCode ?? 0})`));
        else if (answerLength !== undefined && received !== length) finish(new TransportError("Protocol", server, `the answer ended after ${received} of its ${length} bytes`));
        else finish(undefined);
      });
      stream.on("error", (err: Error) => {
        failure ??= streamError(server, stream, err);
      });
      stream.on("close", () => {
        s.streams--;
        if (s.streams === 0) s.idleSince = clock.now();
        req.signal.removeEventListener("abort", onAbort);
        if (!settled && stream.rstCode === constants.NGHTTP2_REFUSED_STREAM) failure = new Unsent(`stream refused (${stream.rstCode})`);
        else if (!settled && failure && (failure as { code?: string }).code === "ERR_HTTP2_GOAWAY_SESSION") failure = new Unsent(failure.message);
        finish(failure ?? (done ? undefined : new TransportError("Closed", server, `the stream closed before the end of the answer (code ${stream.rstCode ?? 0})`)));
      });
      // Ended here, not with request()'s endStream: Bun 1.4.5 then also ends the readable side before the answer.
      if (req.body === undefined) stream.end();
      else stream.end(typeof req.body === "string" ? req.body : Buffer.from(req.body.buffer, req.body.byteOffset, req.body.byteLength));
    });
  }
}

function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (err) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

const CONNECT_CODES = /^(ECONN|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|EAI_|ETIMEDOUT|EPIPE|EADDR)/;

function dialError(server: string, err: Error): TransportError {
  const code = (err as { code?: string }).code ?? "";
  return new TransportError(CONNECT_CODES.test(code) ? "Connect" : "Tls", server, errorMessage(err), code || undefined);
}

function streamError(server: string, stream: ClientHttp2Stream, err: Error): Error {
  const code = (err as { code?: string }).code;
  if (code === "ERR_HTTP2_GOAWAY_SESSION") return err;
  return new TransportError("Protocol", server, `${errorMessage(err)} (stream code ${stream.rstCode ?? 0})`, code);
}
