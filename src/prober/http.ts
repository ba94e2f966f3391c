/**
 * The httpGet probe, after upstream pkg/probe/http: GET without keep-alive,
 * TLS not verified for HTTPS, User-Agent `kube-probe/<major.minor>` and
 * Accept `*\/*` unless the probe sets them (an empty Accept sends none), a Host header sets the request's
 * host. Redirects are followed (at most 10) only while they stay on the
 * same host name; a redirect elsewhere ends the probe with that 3xx answer,
 * which upstream counts as success with a warning. 200-399 is success;
 * the body is read up to 10 KiB and the failure message never includes it
 * (issue 99425). The timeout covers the whole exchange, redirects included.
 */
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { errorMessage } from "../util/errors.ts";
import { awakeDeadline } from "./deadline.ts";
import { goNetError } from "./gowords.ts";
import { joinHostPort, MAX_PROBE_OUTPUT, probeUserAgent, type ProbeOutcome } from "./types.ts";

const MAX_REDIRECTS = 10;

export interface HttpProbeOptions {
  scheme: "HTTP" | "HTTPS";
  host: string;
  port: number;
  path: string;
  headers: { name: string; value: string }[];
  /** None: no limit (a postStart hook's, as upstream's http.Client without a timeout). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function buildHeaders(list: HttpProbeOptions["headers"]): Record<string, string | string[]> {
  const out: Record<string, string[]> = {};
  const canonical = new Map<string, string>();
  for (const { name, value } of list) {
    const key = canonical.get(name.toLowerCase()) ?? name;
    canonical.set(name.toLowerCase(), key);
    (out[key] ??= []).push(value);
  }
  if (!canonical.has("user-agent")) out["User-Agent"] = [probeUserAgent()];
  const accept = canonical.get("accept");
  if (accept === undefined) out["Accept"] = ["*/*"];
  // Upstream request.go:79-81: an Accept header set empty means none at all.
  else if (out[accept]![0] === "") delete out[accept];
  out["Connection"] = ["close"];
  // Repeated names go as repeated values; a single value as a string (Bun's node:http drops a one-element Host array).
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.length === 1 ? v[0]! : v]));
}

function getOnce(url: URL, headers: Record<string, string | string[]>, signal: AbortSignal): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port,
        path: url.pathname + url.search,
        method: "GET",
        headers,
        agent: false,
        rejectUnauthorized: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") });
        res.on("data", (chunk: Buffer) => {
          if (size >= MAX_PROBE_OUTPUT) return;
          chunks.push(chunk.subarray(0, MAX_PROBE_OUTPUT - size));
          size += Math.min(chunk.length, MAX_PROBE_OUTPUT - size);
          // Upstream truncates a long body without failing the probe.
          if (size >= MAX_PROBE_OUTPUT) {
            done();
            res.destroy();
          }
        });
        res.on("end", done);
        res.on("error", reject);
      },
    );
    const onAbort = () => req.destroy(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    req.on("close", () => signal.removeEventListener("abort", onAbort));
    req.on("error", reject);
    req.end();
  });
}

export async function httpProbe(opts: HttpProbeOptions): Promise<ProbeOutcome> {
  const base = `${opts.scheme.toLowerCase()}://${joinHostPort(opts.host, opts.port)}`;
  let url: URL;
  try {
    url = new URL(opts.path.startsWith("/") ? opts.path : `/${opts.path}`, base);
  } catch (err) {
    return { result: "unknown", output: `invalid probe URL: ${errorMessage(err)}` };
  }
  const first = url;
  const headers = buildHeaders(opts.headers);
  const timeout = new AbortController();
  const cancelTimeout =
    opts.timeoutMs === undefined
      ? () => {}
      : awakeDeadline(opts.timeoutMs, () => timeout.abort(new Error("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")));
  const signal = opts.signal ? AbortSignal.any([timeout.signal, opts.signal]) : timeout.signal;
  try {
    let answer: Answer;
    for (let hops = 0; ; hops++) {
      try {
        answer = await getOnce(url, headers, signal);
      } catch (err) {
        const { hostname, port } = url;
        const addr = joinHostPort(hostname.replace(/^\[|\]$/g, ""), Number(port || (url.protocol === "https:" ? 443 : 80)));
        return { result: "failure", output: `Get ${JSON.stringify(url.href)}: ${goNetError(err, addr) ?? errorMessage(err)}` };
      }
      const location = answer.headers.location;
      if (answer.status < 300 || answer.status >= 400 || !location) break;
      const next = new URL(location, url);
      // Upstream's redirect checker: only the same host name is followed.
      if (next.hostname !== first.hostname) break;
      if (hops + 1 >= MAX_REDIRECTS) return { result: "failure", output: `Get ${JSON.stringify(next.href)}: stopped after ${MAX_REDIRECTS} redirects` };
      url = next;
    }
    if (answer.status >= 200 && answer.status < 400) {
      if (answer.status >= 300) return { result: "success", warning: true, output: `Probe terminated redirects, Response body: ${answer.body}` };
      return { result: "success", output: answer.body };
    }
    return { result: "failure", output: `HTTP probe failed with statuscode: ${answer.status}` };
  } finally {
    cancelTimeout();
  }
}
