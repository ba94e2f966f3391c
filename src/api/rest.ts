/**
 * A small REST and watch client for the API server.
 * Credentials come from the kubeconfig (kubeconfig.ts, on client-node's
 * kubeconfig entry parsers); requests go through the agent's own transport
 * (transport.ts: HTTP/2 to an https server as upstream's client, HTTP/1.1
 * over Bun's fetch otherwise) because client-node's own transport is
 * node-fetch agents, and raw JSON keeps API objects as the API server wrote them.
 * Every call takes a token from the client-side rate limit first.
 */
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { ApiError, apiErrorFrom } from "./errors.ts";
import { Http2Transport } from "./http2.ts";
import type { Credentials } from "./kubeconfig.ts";
import { decodeStatus, PROTOBUF, ProtobufError, unwrap } from "./protobuf.ts";
import { TokenBucket } from "./ratelimit.ts";
import { fetchTransport, type HttpTransport, type TlsMaterial, TransportError } from "./transport.ts";

export interface WatchEvent<T = Record<string, unknown>> {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: T;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  /** Per-request deadline; defaults to the client's. */
  timeoutMs?: number;
}

export interface RestClient extends Disposable {
  readonly server: string;
  request<T>(verb: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, opts?: RequestOptions): Promise<T>;
  /**
   * One request whose body is already encoded (the API server's protobuf),
   * answered as raw bytes and their content type. An answer that is not 2xx
   * is thrown as ApiError, its Status read from protobuf or JSON; 415 and 406
   * say the server takes or gives no such encoding.
   */
  requestBytes(
    verb: "GET" | "POST" | "PUT" | "PATCH" | "DELETE",
    path: string,
    opts: { body?: Uint8Array; contentType: string; accept: string; signal?: AbortSignal; timeoutMs?: number },
  ): Promise<{ contentType: string; bytes: Uint8Array }>;
  /** Streams watch events until the server ends the watch or `signal` aborts; each event is passed to `onEvent`. */
  watch(path: string, query: RequestOptions["query"], onEvent: (event: WatchEvent) => void, signal: AbortSignal): Promise<void>;
  /** Ends the client's connections. */
  close(): void;
  /** The same as close: the agent's disposal stack ends the connections as a named part. */
  [Symbol.dispose](): void;
}

/** A client made by createRestClient: others can share its connection with their own rate limit. */
export interface SharedRestClient extends RestClient {
  /**
   * A client on this one's connection and credentials with its own rate
   * limit (qps 0: none), as upstream's kubelet makes its event client
   * (eventRecordQPS / eventBurst) from the same config as its main one:
   * a burst of events then takes none of the budget of status patches and
   * token requests. `timeoutMs` replaces the client's default request
   * timeout (upstream's heartbeat client has a shorter one). Closing either
   * ends the shared connection.
   */
  withLimits(limit: { qps: number; burst: number; timeoutMs?: number }): RestClient;
}

export { type Credentials, KubeconfigError, loadCredentials } from "./kubeconfig.ts";

/**
 * The transport for `server`: HTTP/2 for https (HTTP/1.1 where the server
 * does not offer h2), HTTP/1.1 for plain http, as upstream's client (no h2c).
 */
export function transportFor(server: string, tls: () => TlsMaterial, deps: { logger: Logger; clock: Clock }): HttpTransport {
  const fallback = fetchTransport(tls);
  if (!server.startsWith("https:")) return fallback;
  return new Http2Transport({ server, tls, logger: deps.logger, clock: deps.clock, fallback });
}

export function createRestClient(opts: {
  credentials: Credentials;
  qps: number;
  burst: number;
  clock: Clock;
  logger: Logger;
  userAgent: string;
  timeoutMs?: number;
  /** Instead of `transportFor` the server (unit tests). */
  transport?: HttpTransport;
}): SharedRestClient {
  const { credentials } = opts;
  const staticTls: TlsMaterial = {
    ...(credentials.ca ? { ca: credentials.ca } : {}),
    ...(credentials.cert ? { cert: credentials.cert } : {}),
    ...(credentials.key ? { key: credentials.key } : {}),
    rejectUnauthorized: !credentials.insecureSkipVerify,
  };
  const tls = (): TlsMaterial => (credentials.clientCertificate ? { ...staticTls, ...credentials.clientCertificate.pem() } : staticTls);
  const transport = opts.transport ?? transportFor(credentials.server, tls, { logger: opts.logger, clock: opts.clock });
  const url = (path: string, query: RequestOptions["query"]) => {
    const u = new URL(credentials.server + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u;
  };
  const limited = (limiter: TokenBucket, clientTimeoutMs = opts.timeoutMs ?? 30_000): SharedRestClient => {
    type Body = { data: string | Uint8Array; type: string } | undefined;
    /**
     * One request, sent again while the server answers 429 or 5xx with a
     * Retry-After (client-go's rest client: up to 10 retries, each after
     * the seconds the server asked for and a token of its own): the API
     * server's priority and fairness rejects so when it is saturated, and
     * the request was not served. A GET whose connection ended under it
     * is sent again a second later (a read is safe to repeat), also when
     * it ended while `read` took the answer's body (client-go reads it
     * within its retry loop). The client's timeout counts from the first
     * send and covers the retries, as client-go's request timeout. Every
     * failure is an ApiError naming the request.
     */
    const send = async <T>(
      verb: string,
      path: string,
      o: RequestOptions,
      accept: string,
      body: Body,
      read: (res: Response) => Promise<T>,
    ): Promise<{ res: Response; answer: T }> => {
      const aborted = (err: unknown, waiting: string) =>
        new ApiError(timeout?.aborted ? "Timeout" : "Unreachable", 0, verb, path, `${timeout?.aborted ? "timed out" : "canceled"} while waiting ${waiting}: ${errorMessage(err)}`);
      let timeout: AbortSignal | undefined;
      let signal = o.signal;
      for (let attempt = 1; ; attempt++) {
        const queued = performance.now();
        try {
          await limiter.take(signal);
        } catch (err) {
          // The caller gave up while throttled: as an abort during the request, nothing sent.
          throw aborted(err, "for the client rate limit");
        }
        if (!timeout) {
          timeout = AbortSignal.timeout(o.timeoutMs ?? clientTimeoutMs);
          signal = o.signal ? AbortSignal.any([o.signal, timeout]) : timeout;
        }
        const sent = performance.now();
        let res: Response;
        let waitS: number | undefined;
        try {
          res = await transport.send({
            method: verb,
            url: url(path, o.query),
            headers: {
              ...credentials.headers,
              Accept: accept,
              "User-Agent": opts.userAgent,
              ...(body ? { "Content-Type": body.type } : {}),
            },
            ...(body ? { body: body.data } : {}),
            signal: signal ?? timeout,
          });
          // As client-go's round tripper at -v=6, with the time the request waited for the rate limit (kubeAPIQPS).
          opts.logger.v(6).info("API request", { verb, path, status: res.status, throttledMs: Math.round(sent - queued), ms: Math.round(performance.now() - sent) });
          waitS = attempt <= MAX_RETRIES ? retryAfterSeconds(res) : undefined;
          if (waitS === undefined) return { res, answer: await read(res) };
        } catch (err) {
          if (verb === "GET" && attempt <= MAX_RETRIES && connectionLost(err) && !signal?.aborted) {
            // client-go sends a GET again a second after its connection was reset or ended (a read is safe to repeat).
            opts.logger.v(4).info("the connection ended under a GET; sending it again in 1 s", { path, attempt, err: errorMessage(err) });
            try {
              await opts.clock.sleep(1000, signal);
            } catch (abort) {
              throw aborted(abort, "1 s to send again after the connection ended");
            }
            continue;
          }
          throw new ApiError(timeout.aborted ? "Timeout" : "Unreachable", 0, verb, path, errorMessage(err));
        }
        opts.logger.v(4).info("Got a Retry-After response", { verb, path, status: res.status, retryAfterSeconds: waitS, attempt });
        await res.body?.cancel().catch(() => {});
        try {
          await opts.clock.sleep(waitS * 1000, signal);
        } catch (err) {
          throw aborted(err, `${waitS} s to retry after ${res.status}`);
        }
      }
    };
    return {
      server: credentials.server,
      close: () => transport.close(),
      [Symbol.dispose]: () => transport.close(),
      async request<T>(verb: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, o: RequestOptions = {}): Promise<T> {
        const encoded = o.body !== undefined ? { data: JSON.stringify(o.body), type: o.contentType ?? "application/json" } : undefined;
        const { res, answer: text } = await send(verb, path, o, "application/json", encoded, (r) => r.text());
        let body: unknown;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          // A success that is not JSON (a proxy's page, a cut answer) is no object to hand on.
          if (res.ok) throw new ApiError("InternalError", res.status, verb, path, `the answer is not JSON: ${text.slice(0, 200)}`);
          body = { message: text.slice(0, 200) };
        }
        if (!res.ok) throw apiErrorFrom(res.status, body, verb, path);
        return body as T;
      },
      async requestBytes(verb, path, o) {
        const { res, answer: bytes } = await send(
          verb,
          path,
          o,
          o.accept,
          o.body ? { data: o.body, type: o.contentType } : undefined,
          async (r) => new Uint8Array(await r.arrayBuffer()),
        );
        const contentType = res.headers.get("content-type") ?? "";
        if (!res.ok) throw apiErrorFrom(res.status, statusOf(contentType, bytes), verb, path);
        return { contentType, bytes };
      },
      async watch(path, query, onEvent, signal) {
        // The server ends the watch after its timeoutSeconds (up to an hour for configMaps and secrets): the client's deadline is a minute later.
        const serverEnds = typeof query?.timeoutSeconds === "number" ? query.timeoutSeconds : 3600;
        // The stream is read as it comes, below: only a failed watch's answer is read within send.
        const { res, answer: refusal } = await send(
          "GET",
          path,
          { query: { ...query, watch: true }, signal, timeoutMs: (serverEnds + 60) * 1000 },
          "application/json",
          undefined,
          (r) => (r.ok ? Promise.resolve(undefined) : r.json().catch(() => undefined)),
        );
        if (!res.ok) throw apiErrorFrom(res.status, refusal, "WATCH", path);
        if (!res.body) return;
        const decoder = new TextDecoder();
        let buffer = "";
        try {
          for await (const chunk of res.body) {
            buffer += decoder.decode(chunk, { stream: true });
            let nl: number;
            while ((nl = buffer.indexOf("\n")) >= 0) {
              const line = buffer.slice(0, nl).trim();
              buffer = buffer.slice(nl + 1);
              if (line) onEvent(JSON.parse(line) as WatchEvent);
            }
          }
        } catch (err) {
          if (signal.aborted) return;
          throw new ApiError("Unreachable", 0, "WATCH", path, errorMessage(err));
        }
      },
      withLimits: ({ timeoutMs, ...limit }) => limited(new TokenBucket({ ...limit, clock: opts.clock }), timeoutMs),
    };
  };
  return limited(new TokenBucket({ qps: opts.qps, burst: opts.burst, clock: opts.clock }));
}

/** client-go's rest client's maxRetries: answers with a Retry-After, and GETs whose connection ended, are sent again up to this many times. */
export const MAX_RETRIES = 10;

/** client-go's retryable errors for a GET (net.IsConnectionReset, IsProbableEOF, IsHTTP2ConnectionLost): the connection ended under it, not refused. */
const connectionLost = (err: unknown): boolean => err instanceof TransportError && (err.kind === "Closed" || err.code === "ECONNRESET" || err.code === "EPIPE");

/** The whole seconds a 429 or 5xx answer asks the client to wait before sending again; undefined: no retry (client-go's checkWait). */
function retryAfterSeconds(res: Response): number | undefined {
  if (res.status !== 429 && res.status < 500) return undefined;
  const header = res.headers.get("retry-after")?.trim();
  if (!header || !/^\d+$/.test(header)) return undefined;
  return Number(header);
}

/** The Status of an error answer in either encoding; undefined when it is neither (a proxy's page). */
function statusOf(contentType: string, bytes: Uint8Array): unknown {
  try {
    if (contentType.startsWith(PROTOBUF)) {
      const { kind, raw } = unwrap(bytes);
      return kind === "Status" ? decodeStatus(raw) : undefined;
    }
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch (err) {
    if (err instanceof ProtobufError || err instanceof SyntaxError) return { message: new TextDecoder().decode(bytes.subarray(0, 200)) };
    throw err;
  }
}
