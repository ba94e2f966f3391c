/**
 * The httpGet probe, after upstream pkg/probe/http: GET without keep-alive,
 * TLS not verified for HTTPS, User-Agent `kube-probe/<major.minor>` and
 * Accept `*\/*` unless the probe sets them (an empty Accept sends none), a Host header sets the request's
 * host. Redirects are followed (at most 10) only while they stay on the
 * same host name; a redirect elsewhere ends the probe with that 3xx answer,
 * which upstream counts as success with a warning. 200-399 is success;
 * the body is read up to 10 KiB and the failure message never includes it
 * (issue 99425); a body whose read fails (the timeout during it, the peer
 * closing early) makes the probe error. The timeout covers the whole
 * exchange, redirects included.
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
  /** The default User-Agent's `kube-<fragment>/<version>`: `probe` (probes), `lifecycle` (hooks). */
  userAgentFragment?: "probe" | "lifecycle";
}

/** One GET with its same-host redirects: the last answer, or the transport's error in Go's words. */
export type HttpExchange = { kind: "answer"; answer: Answer } | { kind: "error"; output: string; code?: string };

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** The body's read failed after the headers came (in Go's words): upstream's probe errors then; a hook ignores it. */
  bodyError?: string;
}

/** Go's http.Client when its timeout ends the read of a body (net/http client.go cancelTimerBody). */
export const BODY_TIMEOUT = "context deadline exceeded (Client.Timeout or context cancellation while reading body)";

function buildHeaders(list: HttpProbeOptions["headers"], fragment: "probe" | "lifecycle"): Record<string, string | string[]> {
  const out: Record<string, string[]> = {};
  const canonical = new Map<string, string>();
  for (const { name, value } of list) {
    const key = canonical.get(name.toLowerCase()) ?? name;
    canonical.set(name.toLowerCase(), key);
    (out[key] ??= []).push(value);
  }
  if (!canonical.has("user-agent")) out["User-Agent"] = [probeUserAgent(fragment)];
  const accept = canonical.get("accept");
  if (accept === undefined) out["Accept"] = ["*/*"];
  // Upstream request.go:79-81: an Accept header set empty means none at all.
  else if (out[accept]![0] === "") delete out[accept];
  out["Connection"] = ["close"];
  // Repeated names go as repeated values; a single value as a string (Bun's node:http drops a one-element Host array).
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.length === 1 ? v[0]! : v]));
}

/** One GET; a failure once the headers came resolves with what was read and `bodyError` (the error as thrown; worded by the caller). */
function getOnce(url: URL, headers: Record<string, string | string[]>, signal: AbortSignal): Promise<Answer & { bodyFailure?: unknown }> {
  return new Promise((resolve, reject) => {
    let answered: ((failure: unknown) => void) | undefined;
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
        answered = (failure) => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8"), bodyFailure: failure });
        res.on("end", done);
        res.on("error", (err) => answered!(err));
        // A body cut short (the peer closed mid-body) is Go's io.ErrUnexpectedEOF.
        res.on("aborted", () => answered!(new Error("unexpected EOF")));
      },
    );
    const onAbort = () => {
      const reason = signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason));
      // After the headers the abort ends the body's read; its reason is the read's error.
      answered?.(reason);
      req.destroy(reason);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    req.on("close", () => signal.removeEventListener("abort", onAbort));
    req.on("error", reject);
    req.end();
  });
}

/**
 * The GET and its redirects, as upstream's http.Client with its redirect
 * checker: redirects are followed (at most 10) while they stay on the same
 * host name; one elsewhere ends the exchange with that 3xx answer.
 */
export async function httpExchange(opts: HttpProbeOptions): Promise<HttpExchange> {
  const base = `${opts.scheme.toLowerCase()}://${joinHostPort(opts.host, opts.port)}`;
  let url: URL;
  try {
    url = new URL(opts.path.startsWith("/") ? opts.path : `/${opts.path}`, base);
  } catch (err) {
    return { kind: "error", code: "InvalidURL", output: `invalid probe URL: ${errorMessage(err)}` };
  }
  const first = url;
  const headers = buildHeaders(opts.headers, opts.userAgentFragment ?? "probe");
  const timeout = new AbortController();
  const cancelTimeout =
    opts.timeoutMs === undefined
      ? () => {}
      : awakeDeadline(opts.timeoutMs, () => timeout.abort(new Error("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")));
  const signal = opts.signal ? AbortSignal.any([timeout.signal, opts.signal]) : timeout.signal;
  try {
    for (let hops = 0; ; hops++) {
      let answer: Answer;
      try {
        const { bodyFailure, ...read } = await getOnce(url, headers, signal);
        answer = read;
        if (bodyFailure !== undefined) answer.bodyError = timeout.signal.aborted ? BODY_TIMEOUT : errorMessage(bodyFailure);
      } catch (err) {
        const { hostname, port } = url;
        const addr = joinHostPort(hostname.replace(/^\[|\]$/g, ""), Number(port || (url.protocol === "https:" ? 443 : 80)));
        const code = (err as { code?: unknown }).code;
        return { kind: "error", output: `Get ${JSON.stringify(url.href)}: ${goNetError(err, addr) ?? errorMessage(err)}`, ...(typeof code === "string" ? { code } : {}) };
      }
      const location = answer.headers.location;
      if (answer.status < 300 || answer.status >= 400 || !location) return { kind: "answer", answer };
      const next = new URL(location, url);
      // Upstream's redirect checker: only the same host name is followed.
      if (next.hostname !== first.hostname) return { kind: "answer", answer };
      if (hops + 1 >= MAX_REDIRECTS) return { kind: "error", output: `Get ${JSON.stringify(next.href)}: stopped after ${MAX_REDIRECTS} redirects` };
      url = next;
    }
  } finally {
    cancelTimeout();
  }
}

export async function httpProbe(opts: HttpProbeOptions): Promise<ProbeOutcome> {
  const exchange = await httpExchange(opts);
  if (exchange.kind === "error") return { result: exchange.code === "InvalidURL" ? "unknown" : "failure", output: exchange.output };
  const { answer } = exchange;
  // Upstream DoHTTPProbe (probe/http/http.go:100-108): a body that cannot be read (beyond the 10 KiB kept) is an
  // error, with the result Failure; the prober throws it away after its "errored" event.
  if (answer.bodyError !== undefined) return { result: "failure", errored: true, output: answer.bodyError };
  if (answer.status >= 200 && answer.status < 400) {
    if (answer.status >= 300) return { result: "success", warning: true, output: `Probe terminated redirects, Response body: ${answer.body}` };
    return { result: "success", output: answer.body };
  }
  return { result: "failure", output: `HTTP probe failed with statuscode: ${answer.status}` };
}
