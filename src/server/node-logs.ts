/**
 * `/logs/`: the node's log directory (/var/log), as upstream serves it with
 * Go's http.FileServer when enableSystemLogHandler and
 * enableDebuggingHandlers are on (authorized as nodes/log): a directory is
 * an HTML listing of links, a file is its bytes. Nothing outside the
 * directory is reachable: no `..`, and a symlink that resolves outside it
 * is answered as not found.
 */
import { createReadStream, realpathSync, statSync, readdirSync } from "node:fs";
import { posix } from "node:path";
import { Readable } from "node:stream";
import { Hono } from "hono";
import type { KubeletEnv } from "./authn.ts";
import { NODE_LOG_QUERY_TIMEOUT_MS, nodeLogQueryOutput, NodeLogQueryError, parseNodeLogQuery, validateNodeLogQuery, type Journal } from "./node-log-query.ts";

const escapeHtml = (s: string) => s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;").replaceAll("'", "&#39;");

/** The file or directory a request names, or undefined when it is outside `root` or absent. */
export function resolveNodeLogPath(root: string, requested: string): string | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(requested);
  } catch {
    return undefined;
  }
  if (decoded.includes("\0") || decoded.split("/").includes("..")) return undefined;
  const realRoot = realpathSync(root);
  let real: string;
  try {
    real = realpathSync(posix.join(realRoot, decoded));
  } catch {
    return undefined;
  }
  return real === realRoot || real.startsWith(`${realRoot}/`) ? real : undefined;
}

export interface NodeLogQueryOptions {
  /** journalctl, or a fake in tests. */
  journal: Journal;
  /** Default NODE_LOG_QUERY_TIMEOUT_MS (30 s, upstream's deadline). */
  timeoutMs?: number;
}

/**
 * `query`: NodeLogQuery on (enableSystemLogQuery with the NodeLogQuery
 * feature gate): a request with query parameters is a log query
 * (node-log-query.ts), one without is served from the directory.
 */
export function nodeLogsApp(root: string, query?: NodeLogQueryOptions): Hono<KubeletEnv> {
  const app = new Hono<KubeletEnv>();
  app.get("/logs", (c) => c.redirect("/logs/", 301));
  app.get("/logs/*", (c) => {
    const rest = c.req.path.slice("/logs/".length);
    if (query) {
      const params = new URL(c.req.url).searchParams;
      try {
        const q = params.size > 0 ? parseNodeLogQuery(params) : undefined;
        if (q) {
          if (rest !== "") throw new NodeLogQueryError(406, ["path not allowed in query mode"]);
          validateNodeLogQuery(q, root);
          const signal = AbortSignal.any([c.req.raw.signal, AbortSignal.timeout(query.timeoutMs ?? NODE_LOG_QUERY_TIMEOUT_MS)]);
          const out = nodeLogQueryOutput(q, root, query.journal, signal);
          const body = new ReadableStream<Uint8Array>({
            async pull(ctrl) {
              try {
                const { value, done } = await (out as AsyncGenerator<Uint8Array>).next();
                if (done) ctrl.close();
                else ctrl.enqueue(value);
              } catch (err) {
                // Cut at the deadline or by the client: what was written stays the answer.
                if (signal.aborted) ctrl.close();
                else ctrl.error(err);
              }
            },
            cancel: () => void (out as AsyncGenerator<Uint8Array>).return(undefined),
          });
          return c.body(body, 200, { "content-type": "text/plain; charset=utf-8" });
        }
      } catch (err) {
        if (err instanceof NodeLogQueryError) return c.text(`${err.message}\n`, err.status);
        throw err;
      }
    }
    const path = resolveNodeLogPath(root, rest);
    if (!path) return c.text("404 page not found\n", 404);
    const st = statSync(path);
    if (st.isDirectory()) {
      if (rest !== "" && !rest.endsWith("/")) return c.redirect(`/logs/${rest}/`, 301);
      const entries = readdirSync(path, { withFileTypes: true })
        .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
        .sort();
      const body = `<pre>\n${entries.map((n) => `<a href="${escapeHtml(encodeURI(n))}">${escapeHtml(n)}</a>`).join("\n")}\n</pre>\n`;
      return c.body(body, 200, { "content-type": "text/html; charset=utf-8" });
    }
    if (!st.isFile()) return c.text("404 page not found\n", 404);
    const stream = Readable.toWeb(createReadStream(path)) as ReadableStream<Uint8Array>;
    return c.body(stream, 200, { "content-type": "text/plain; charset=utf-8", "content-length": String(st.size) });
  });
  return app;
}
