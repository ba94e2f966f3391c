// A recording proxy in front of the API server, for tests that check what
// an agent sends on the wire (content types, body sizes), which the API
// server itself does not report per request. The agent talks plain HTTP to
// the proxy (a kubeconfig rewritten by `kubeconfig`); the proxy forwards each
// request over HTTPS with the credentials of the kubeconfig it was given, so
// the API server still sees the agent's identity. Watches stream through.
import { readFileSync, writeFileSync } from "node:fs";
import { loadCredentials } from "../../src/api/rest.ts";

export interface RecordedRequest {
  method: string;
  path: string;
  contentType: string;
  accept: string;
  requestBytes: number;
  status: number;
  answerType: string;
}

export interface ApiProxy {
  url: string;
  requests: RecordedRequest[];
  /** Writes a copy of `kubeconfig` whose server is the proxy; returns its path. */
  kubeconfig(out: string): string;
  stop(): void;
}

export async function startApiProxy(kubeconfig: string): Promise<ApiProxy> {
  const creds = await loadCredentials(kubeconfig);
  const tls = { ...(creds.ca ? { ca: creds.ca } : {}), ...(creds.cert ? { cert: creds.cert } : {}), ...(creds.key ? { key: creds.key } : {}) };
  const requests: RecordedRequest[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0, // watches stay open for minutes
    async fetch(req) {
      const u = new URL(req.url);
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : new Uint8Array(await req.arrayBuffer());
      const headers: Record<string, string> = {};
      for (const h of ["content-type", "accept", "user-agent"]) {
        const v = req.headers.get(h);
        if (v) headers[h] = v;
      }
      const res = await fetch(creds.server + u.pathname + u.search, { method: req.method, headers, ...(body ? { body } : {}), tls } as RequestInit);
      requests.push({
        method: req.method,
        path: u.pathname,
        contentType: req.headers.get("content-type") ?? "",
        accept: req.headers.get("accept") ?? "",
        requestBytes: body?.length ?? 0,
        status: res.status,
        answerType: res.headers.get("content-type") ?? "",
      });
      const out = new Headers();
      const type = res.headers.get("content-type");
      if (type) out.set("content-type", type);
      return new Response(res.body, { status: res.status, headers: out });
    },
  });
  const url = `http://127.0.0.1:${server.port}`;
  return {
    url,
    requests,
    kubeconfig(out) {
      writeFileSync(out, readFileSync(kubeconfig, "utf8").replace(/server: \S+/, `server: ${url}`));
      return out;
    },
    stop: () => void server.stop(true),
  };
}
