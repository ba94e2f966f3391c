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

export function nodeLogsApp(root: string): Hono<KubeletEnv> {
  const app = new Hono<KubeletEnv>();
  app.get("/logs", (c) => c.redirect("/logs/", 301));
  app.get("/logs/*", (c) => {
    const rest = c.req.path.slice("/logs/".length);
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
