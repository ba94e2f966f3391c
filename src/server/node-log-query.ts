/**
 * NodeLogQuery on `/logs/` (upstream pkg/kubelet/kubelet_server_journal.go),
 * served when enableSystemLogQuery is set and the NodeLogQuery feature gate
 * is on: a request to `/logs/` with query parameters asks for a service's
 * journal or a log file instead of the directory listing.
 *
 * Parameters (each checked with valibot; anything else is refused):
 * - `query` (repeatable): a service (journald unit, else the files
 *   /var/log/<s>, /var/log/<s>.log, /var/log/<s>/<s>.log in that order) or,
 *   when it has a `/` or `\`, a file under /var/log;
 * - `sinceTime`, `untilTime`: RFC 3339;
 * - `tailLines`: 0..100000;
 * - `pattern`: a regular expression (journalctl --grep);
 * - `boot`: 0 or a negative offset (journalctl --boot).
 *
 * Status codes as upstream: a parameter that cannot be parsed (and, here,
 * an unknown parameter) 400; a query that parses but is not allowed (a file
 * with options, two files, a file and services, tailLines out of range,
 * untilTime before sinceTime, boot above 0, an unsafe service name) 406;
 * a query with a path below /logs/ 406. Every message names the parameter,
 * in the field.ErrorList form upstream prints (`tailLines: Invalid value:
 * ...`). Services are read with `journalctl` when it exists and the unit is
 * in the journal, else from the heuristic files; the whole answer is cut at
 * 30 s as upstream.
 */
import { createReadStream, statSync } from "node:fs";
import { Readable } from "node:stream";
import * as v from "valibot";
import { resolveNodeLogPath } from "./node-logs.ts";

export const MAX_TAIL_LINES = 100_000;
const MAX_SERVICES = 4;
const MAX_SERVICE_LENGTH = 256;
const UNSAFE_SERVICE_CHARS = /[^a-zA-Z\-_.:0-9@]/;
export const NODE_LOG_QUERY_TIMEOUT_MS = 30_000;
export const NODE_LOG_QUERY_PARAMETERS = ["query", "sinceTime", "untilTime", "tailLines", "pattern", "boot"] as const;

export interface NodeLogQuery {
  services: string[];
  files: string[];
  sinceTime?: Date;
  untilTime?: Date;
  tailLines?: number;
  boot?: number;
  pattern?: string;
}

/** A query refused, with upstream's status (400 unparsable or unknown, 406 not allowed) and field.ErrorList text. */
export class NodeLogQueryError extends Error {
  constructor(
    readonly status: 400 | 406,
    readonly errors: string[],
  ) {
    super(errors.length === 1 ? errors[0]! : `[${errors.join(", ")}]`);
  }
}

const invalid = (field: string, value: unknown, detail: string) => `${field}: Invalid value: ${JSON.stringify(value)}: ${detail}`;

// Go's time.RFC3339 parse: a date, T, a time with optional fraction, Z or an offset.
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const time = v.pipe(
  v.string(),
  v.regex(RFC3339, "invalid time format"),
  v.transform((s) => new Date(s)),
  v.check((d) => !Number.isNaN(d.getTime()), "invalid time format"),
);
// strconv.Atoi: an optional sign and decimal digits.
const integer = v.pipe(
  v.string(),
  v.regex(/^[+-]?\d+$/, "must be an integer"),
  v.transform(Number),
  v.check((n: number) => Number.isSafeInteger(n), "value out of range"),
);
const pattern = v.pipe(
  v.string(),
  v.check((s) => {
    try {
      new RegExp(s);
      return true;
    } catch {
      return false;
    }
  }, "invalid regular expression"),
);
const SINGLE: Record<Exclude<(typeof NODE_LOG_QUERY_PARAMETERS)[number], "query">, v.GenericSchema<string, unknown>> = {
  sinceTime: time,
  untilTime: time,
  tailLines: integer,
  boot: integer,
  pattern,
};

/**
 * The query of a `/logs/` request; undefined when it asks for none (the
 * directory listing or a file is served then). Throws NodeLogQueryError.
 */
export function parseNodeLogQuery(params: URLSearchParams): NodeLogQuery | undefined {
  const errors: string[] = [];
  for (const key of new Set(params.keys())) {
    if (!(NODE_LOG_QUERY_PARAMETERS as readonly string[]).includes(key))
      errors.push(`${key}: Unsupported value: unknown query parameter (supported: ${NODE_LOG_QUERY_PARAMETERS.join(", ")})`);
  }
  const out: NodeLogQuery = { services: [], files: [] };
  const queries = params.getAll("query");
  for (const q of queries) {
    if (/[/\\]/.test(q)) out.files.push(q);
    else if (q.trim() !== "") out.services.push(q);
  }
  if (params.has("query") && out.files.length === 0 && out.services.length === 0) errors.push(invalid("query", queries, "query cannot be empty"));
  for (const [name, schema] of Object.entries(SINGLE)) {
    const all = params.getAll(name);
    if (all.length === 0 || all[0] === "") continue;
    if (all.length > 1) {
      errors.push(invalid(name, all, "must be given once"));
      continue;
    }
    const r = v.safeParse(schema, all[0]);
    if (!r.success) errors.push(invalid(name, all[0], r.issues[0].message));
    else (out as unknown as Record<string, unknown>)[name] = r.output;
  }
  if (errors.length) throw new NodeLogQueryError(400, errors);
  const hasOptions = out.sinceTime !== undefined || out.untilTime !== undefined || out.tailLines !== undefined || out.boot !== undefined || out.pattern !== undefined;
  if (out.services.length === 0 && out.files.length === 0 && !hasOptions) return undefined;
  return out;
}

/** Upstream's validate(): what parses but is not allowed; NodeLogQueryError 406. `logDir` is where files are looked up. */
export function validateNodeLogQuery(q: NodeLogQuery, logDir: string): void {
  const errors: string[] = [];
  for (const s of q.services) {
    if (s.length > MAX_SERVICE_LENGTH) errors.push(invalid("query", s, "length must be less than 100"));
    else if (UNSAFE_SERVICE_CHARS.test(s)) errors.push(invalid("query", s, "input contains unsupported characters"));
  }
  if (q.services.length > MAX_SERVICES) errors.push(`query: Too many: ${q.services.length}: must have at most ${MAX_SERVICES} items`);
  const hasOptions = q.sinceTime !== undefined || q.untilTime !== undefined || q.tailLines !== undefined || q.boot !== undefined || q.pattern !== undefined;
  if (q.files.length === 0 && q.services.length === 0) errors.push("query: Required value: cannot be empty with options");
  else if (q.files.length > 0 && q.services.length > 0) errors.push(invalid("query", `${q.files}, ${q.services}`, "cannot specify a file and service"));
  else if (q.files.length > 1) errors.push(invalid("query", q.files, "cannot specify more than one file"));
  else if (q.files.length === 1 && hasOptions) errors.push(invalid("query", q.files, "cannot specify file with options"));
  else if (q.files.length === 1 && !resolveNodeLogPath(logDir, q.files[0]!.replaceAll("\\", "/")))
    errors.push(invalid("query", q.files, "no such file under the node's log directory"));
  if (q.sinceTime && q.untilTime && q.sinceTime > q.untilTime) errors.push(invalid("untilTime", q.untilTime.toISOString(), "must be after `sinceTime`"));
  if (q.boot !== undefined && q.boot > 0) errors.push(invalid("boot", q.boot, "must be less than 1"));
  if (q.tailLines !== undefined && (q.tailLines < 0 || q.tailLines > MAX_TAIL_LINES))
    errors.push(invalid("tailLines", q.tailLines, `must be between 0 and ${MAX_TAIL_LINES}, inclusive`));
  if (errors.length) throw new NodeLogQueryError(406, errors);
}

/** journalctl's --since/--until layout (upstream dateLayout "2006-1-2 15:4:5", UTC). */
function journalTime(d: Date): string {
  return `${d.getUTCFullYear()}-${d.getUTCMonth() + 1}-${d.getUTCDate()} ${d.getUTCHours()}:${d.getUTCMinutes()}:${d.getUTCSeconds()}`;
}

/** upstream getLoggingCmd (Linux): journalctl's arguments for `services`. */
export function journalctlArgs(q: NodeLogQuery, services: string[]): string[] {
  const args = ["--utc", "--no-pager"];
  if (q.sinceTime) args.push(`--since=${journalTime(q.sinceTime)}`);
  if (q.untilTime) args.push(`--until=${journalTime(q.untilTime)}`);
  if (q.tailLines !== undefined) args.push("--pager-end", `--lines=${q.tailLines}`);
  for (const s of services) args.push(`--unit=${s}`);
  if (q.pattern) args.push(`--grep=${q.pattern}`);
  if (q.boot !== undefined) args.push("--boot", String(q.boot));
  args.push("--output=short-precise");
  return args;
}

/** How the journal is read; the real one runs journalctl, tests give a fake. */
export interface Journal {
  /** Whether journald has entries of `service` (a unit `<service>.service`); false without journalctl. */
  hasUnit(service: string, signal: AbortSignal): Promise<boolean>;
  /** journalctl with `args`: its stdout and stderr, in order. */
  read(args: string[], signal: AbortSignal): AsyncIterable<Uint8Array>;
}

export const journalctl: Journal = {
  async hasUnit(service, signal) {
    if (!Bun.which("journalctl")) return false;
    const p = Bun.spawn(["journalctl", "--field", "_SYSTEMD_UNIT"], { stdout: "pipe", stderr: "pipe", signal });
    const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
    return code === 0 && out.split("\n").includes(`${service}.service`);
  },
  async *read(args, signal) {
    const p = Bun.spawn(["journalctl", ...args], { stdout: "pipe", stderr: "pipe", signal });
    for await (const chunk of p.stdout) yield chunk;
    const err = await new Response(p.stderr).arrayBuffer();
    if (err.byteLength) yield new Uint8Array(err);
    await p.exited;
  },
};

const encoder = new TextEncoder();

async function* fileBytes(path: string, signal: AbortSignal): AsyncIterable<Uint8Array> {
  for await (const chunk of Readable.from(createReadStream(path, { signal }))) yield chunk as Uint8Array;
}

/** upstream heuristicsCopyFileLogs: /var/log/<s>, <s>.log, <s>/<s>.log, the first that is a file. */
function serviceLogFile(logDir: string, service: string): string | undefined {
  for (const name of [service, `${service}.log`, `${service}/${service}.log`]) {
    const path = resolveNodeLogPath(logDir, name);
    if (path && statSync(path).isFile()) return path;
  }
  return undefined;
}

/** The answer to a validated query, streamed; errors along the way are lines of the answer, as upstream writes them. */
export async function* nodeLogQueryOutput(q: NodeLogQuery, logDir: string, journal: Journal, signal: AbortSignal): AsyncIterable<Uint8Array> {
  if (q.files.length === 1) {
    yield* fileBytes(resolveNodeLogPath(logDir, q.files[0]!.replaceAll("\\", "/"))!, signal);
    return;
  }
  const native: string[] = [];
  const fileLoggers: string[] = [];
  for (const s of q.services) ((await journal.hasUnit(s, signal)) ? native : fileLoggers).push(s);
  if (native.length) yield* journal.read(journalctlArgs(q, native), signal);
  const hasOptions = q.sinceTime !== undefined || q.untilTime !== undefined || q.tailLines !== undefined || q.boot !== undefined || q.pattern !== undefined;
  if (fileLoggers.length && hasOptions) {
    yield encoder.encode(`\noptions present and query resolved to log files for [${fileLoggers.join(" ")}]\ntry without specifying options\n`);
    return;
  }
  for (const s of fileLoggers) {
    const path = serviceLogFile(logDir, s);
    if (path) yield* fileBytes(path, signal);
    else yield encoder.encode(`\nlog not found for ${s}\n`);
  }
}
