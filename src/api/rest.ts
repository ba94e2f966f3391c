/**
 * A small REST and watch client for the API server over Bun's fetch.
 * Credentials come from the kubeconfig through @kubernetes/client-node's
 * KubeConfig (certificates, tokens, files); requests go through Bun's fetch
 * with its `tls` options because client-node's own transport is node-fetch
 * agents, and raw JSON keeps API objects as the API server wrote them.
 * Every call takes a token from the client-side rate limit first.
 */
import { readFileSync } from "node:fs";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import { ApiError, apiErrorFrom } from "./errors.ts";
import { TokenBucket } from "./ratelimit.ts";

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

export interface RestClient {
  readonly server: string;
  request<T>(verb: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, opts?: RequestOptions): Promise<T>;
  /** Streams watch events until the server ends the watch or `signal` aborts; each event is passed to `onEvent`. */
  watch(path: string, query: RequestOptions["query"], onEvent: (event: WatchEvent) => void, signal: AbortSignal): Promise<void>;
}

export interface Credentials {
  server: string;
  ca?: string;
  cert?: string;
  key?: string;
  headers: Record<string, string>;
  insecureSkipVerify: boolean;
  /** A client certificate that changes while running (rotation); wins over cert/key for each new request. */
  clientCertificate?: () => { cert: string; key: string };
}

/** Reads a kubeconfig with client-node's loader (certificates, tokens and files, as kubectl does). */
export async function loadCredentials(kubeconfigPath: string): Promise<Credentials> {
  const { KubeConfig } = await import("@kubernetes/client-node/dist/config.js");
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error(`kubeconfig ${kubeconfigPath}: no current cluster`);
  const opts: { ca?: Buffer | string; cert?: Buffer | string; key?: Buffer | string; headers?: Record<string, string> } = {};
  await kc.applyToHTTPSOptions(opts as never);
  const text = (v: Buffer | string | undefined) => (v === undefined ? undefined : v.toString());
  return {
    server: cluster.server.replace(/\/$/, ""),
    ...(opts.ca ? { ca: text(opts.ca) } : cluster.caFile ? { ca: readFileSync(cluster.caFile, "utf8") } : {}),
    ...(opts.cert ? { cert: text(opts.cert) } : {}),
    ...(opts.key ? { key: text(opts.key) } : {}),
    headers: { ...(opts.headers ?? {}) },
    insecureSkipVerify: cluster.skipTLSVerify ?? false,
  };
}

export function createRestClient(opts: { credentials: Credentials; qps: number; burst: number; clock: Clock; userAgent: string; timeoutMs?: number }): RestClient {
  const { credentials } = opts;
  const limiter = new TokenBucket({ qps: opts.qps, burst: opts.burst, clock: opts.clock });
  const staticTls = {
    ...(credentials.ca ? { ca: credentials.ca } : {}),
    ...(credentials.cert ? { cert: credentials.cert } : {}),
    ...(credentials.key ? { key: credentials.key } : {}),
    rejectUnauthorized: !credentials.insecureSkipVerify,
  };
  const tls = () => (credentials.clientCertificate ? { ...staticTls, ...credentials.clientCertificate() } : staticTls);
  const url = (path: string, query: RequestOptions["query"]) => {
    const u = new URL(credentials.server + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u;
  };
  const send = async (verb: string, path: string, o: RequestOptions, accept: string) => {
    await limiter.take();
    const timeout = AbortSignal.timeout(o.timeoutMs ?? opts.timeoutMs ?? 30_000);
    const signal = o.signal ? AbortSignal.any([o.signal, timeout]) : timeout;
    try {
      return await fetch(url(path, o.query), {
        method: verb,
        headers: {
          ...credentials.headers,
          Accept: accept,
          "User-Agent": opts.userAgent,
          ...(o.body !== undefined ? { "Content-Type": o.contentType ?? "application/json" } : {}),
        },
        ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
        signal,
        tls: tls(),
      } as RequestInit);
    } catch (err) {
      throw new ApiError(timeout.aborted ? "Timeout" : "Unreachable", 0, verb, path, errorMessage(err));
    }
  };
  return {
    server: credentials.server,
    async request<T>(verb: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, o: RequestOptions = {}): Promise<T> {
      const res = await send(verb, path, o, "application/json");
      const text = await res.text();
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = { message: text.slice(0, 200) };
      }
      if (!res.ok) throw apiErrorFrom(res.status, body, verb, path);
      return body as T;
    },
    async watch(path, query, onEvent, signal) {
      const res = await send("GET", path, { query: { ...query, watch: true }, signal, timeoutMs: 60 * 60_000 }, "application/json");
      if (!res.ok) throw apiErrorFrom(res.status, await res.json().catch(() => undefined), "WATCH", path);
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
  };
}
