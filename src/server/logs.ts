/**
 * Container logs for `/containerLogs/{namespace}/{pod}/{container}`, read
 * from the CRI log files, after upstream's pkg/kubelet/kuberuntime/logs.
 *
 * A CRI log line is `<RFC3339Nano> <stdout|stderr> <tags> <text>`, where the
 * tags are `:`-separated and `P` marks a partial line that the next entries
 * continue until one tagged `F`. Partial entries are joined into one line
 * here (upstream writes the pieces one after another, which comes to the
 * same bytes without timestamps); `timestamps` prefixes the first piece's
 * time, and `tailLines` counts joined lines. A line still partial where the
 * log ends (the output's last line had no newline) is served as it is,
 * without a newline, as upstream does.
 *
 * A container's files are `<podLogsDir>/<ns>_<name>_<uid>/<container>/<restartCount>.log`
 * plus the rotated `<n>.log.<YYYYMMDD-hhmmss>` and `.gz` ones
 * (src/logs/rotation.ts); `rotatedLogPaths` lists them oldest first for a
 * full view. `follow` keeps reading the newest file while the container
 * runs, and moves to the new file when the runtime reopens it after a
 * rotation.
 */
import { createReadStream } from "node:fs";
import { open, readdir, stat, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { createGunzip } from "node:zlib";
import { parseCriLine, type CriLogEntry } from "../logs/cri-line.ts";

/** What the resolver knows of a container's logs: its files (oldest first) and whether it still runs. */
export interface ResolvedLogs {
  paths: string[];
  running: boolean;
}

/** Injected: finds the log files of a container (`previous`: the previous restart's). */
export type ContainerLogs = (namespace: string, pod: string, container: string, previous: boolean) => ResolvedLogs | undefined | Promise<ResolvedLogs | undefined>;

export interface LogOptions {
  tailLines?: number;
  limitBytes?: number;
  /** Only entries at or after this time (ms since the epoch). */
  sinceMs?: number;
  timestamps: boolean;
  follow: boolean;
  previous: boolean;
}

/** `<current>.log.*` siblings (rotated, oldest first: the timestamp sorts), then the current file. */
export async function rotatedLogPaths(current: string): Promise<string[]> {
  const prefix = basename(current) + ".";
  let names: string[] = [];
  try {
    names = await readdir(dirname(current));
  } catch {
    return [current];
  }
  const rotated = names.filter((n) => n.startsWith(prefix) && !n.endsWith(".tmp")).map((n) => ({ n, key: n.slice(prefix.length).replace(/\.gz$/, "") }));
  // A file and its .gz twin (a compression that was interrupted): keep the uncompressed one.
  const keys = new Set(rotated.filter((r) => !r.n.endsWith(".gz")).map((r) => r.key));
  const files = rotated.filter((r) => !r.n.endsWith(".gz") || !keys.has(r.key)).sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
  return [...files.map((r) => join(dirname(current), r.n)), current];
}

const isENOENT = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code === "ENOENT";

/** Lines of a gzipped rotated file. */
async function* gzLines(path: string): AsyncGenerator<string> {
  let rest = "";
  const stream = createReadStream(path).pipe(createGunzip());
  stream.setEncoding("utf8");
  for await (const chunk of stream as AsyncIterable<string>) {
    rest += chunk;
    let i: number;
    while ((i = rest.indexOf("\n")) >= 0) {
      yield rest.slice(0, i);
      rest = rest.slice(i + 1);
    }
  }
  if (rest) yield rest;
}

/** A plain file read by position, so that `follow` can go on from where it stopped. */
class Tail {
  private pos = 0;
  private rest = Buffer.alloc(0);
  private readonly buf = Buffer.alloc(64 * 1024);
  private constructor(
    readonly path: string,
    private readonly fh: FileHandle,
    readonly ino: number,
  ) {}

  static async open(path: string): Promise<Tail | undefined> {
    try {
      const fh = await open(path, "r");
      return new Tail(path, fh, (await fh.stat()).ino);
    } catch (err) {
      if (isENOENT(err)) return undefined;
      throw err;
    }
  }

  /** Complete lines written so far; with `flush`, also an unterminated last line. */
  async *lines(flush: boolean): AsyncGenerator<string> {
    for (;;) {
      const { bytesRead } = await this.fh.read(this.buf, 0, this.buf.length, this.pos);
      if (bytesRead === 0) break;
      this.pos += bytesRead;
      let data = this.rest.length ? Buffer.concat([this.rest, this.buf.subarray(0, bytesRead)]) : Buffer.from(this.buf.subarray(0, bytesRead));
      let i: number;
      while ((i = data.indexOf(10)) >= 0) {
        yield data.subarray(0, i).toString("utf8");
        data = data.subarray(i + 1);
      }
      this.rest = Buffer.from(data);
    }
    if (flush && this.rest.length) {
      const last = this.rest.toString("utf8");
      this.rest = Buffer.alloc(0);
      yield last;
    }
  }

  async close(): Promise<void> {
    await this.fh.close().catch(() => {});
  }
}

/** Every line of a rotated plain file (none if it is gone). */
async function* wholeFile(path: string): AsyncGenerator<string> {
  const t = await Tail.open(path);
  if (!t) return;
  try {
    yield* t.lines(true);
  } finally {
    await t.close();
  }
}

/**
 * Joins partial entries and applies `sinceMs`; yields one output line (with
 * its newline) per logical line. A line still partial where the log ends
 * (containerd tags a last write without a newline `P`, e.g. `echo -n DONE`)
 * is given out by `flush` without a newline, as upstream's ReadLogs writes
 * every piece as it comes; what follows it later continues that line, with
 * no second timestamp.
 */
class LineJoiner {
  private pending: CriLogEntry | undefined;
  /** Some of the pending line was already given out by `flush`. */
  private started = false;
  constructor(private readonly opts: LogOptions) {}

  push(raw: string): string | undefined {
    const e = parseCriLine(raw);
    if (!e) return undefined;
    if (this.pending) {
      this.pending.text += e.text;
      this.pending.partial = e.partial;
    } else this.pending = { ...e };
    if (this.pending.partial) return undefined;
    const done = this.pending;
    this.pending = undefined;
    const continued = this.started;
    this.started = false;
    return this.format(done, continued, "\n");
  }

  /** The partial line held so far (undefined when none), given out now. */
  flush(): string | undefined {
    const p = this.pending;
    if (!p?.text) return undefined;
    const out = this.format(p, this.started, "");
    this.pending = { ...p, text: "" };
    this.started = true;
    return out;
  }

  private format(e: CriLogEntry, continued: boolean, end: string): string | undefined {
    if (this.opts.sinceMs !== undefined && e.timeMs < this.opts.sinceMs) return undefined;
    return (this.opts.timestamps && !continued ? `${e.time} ` : "") + e.text + end;
  }
}

export interface ReadLogsOptions extends LogOptions {
  /** Asked while following: false ends the stream after a last read. Default: never stops. */
  stillRunning?: () => Promise<boolean>;
  pollMs?: number;
  /** How often `stillRunning` is asked while following (default 1 s). */
  runningCheckMs?: number;
  signal?: AbortSignal;
}

/** The log as text chunks, per the options. `paths` oldest first; the last is the current file. */
export async function* readLogs(paths: string[], opts: ReadLogsOptions): AsyncGenerator<string> {
  const joiner = new LineJoiner(opts);
  let budget = opts.limitBytes ?? Infinity;
  const tail = opts.tailLines;
  const ring: string[] = [];
  const emit = (line: string): string | undefined => {
    if (tail !== undefined) {
      if (tail === 0) return undefined;
      ring.push(line);
      if (ring.length > tail) ring.shift();
      return undefined;
    }
    return line;
  };
  // Cuts a line to the byte budget; undefined once the budget is spent.
  const limit = (line: string): string | undefined => {
    if (budget <= 0) return undefined;
    const bytes = Buffer.byteLength(line);
    if (bytes <= budget) {
      budget -= bytes;
      return line;
    }
    const cut = Buffer.from(line).subarray(0, budget).toString("utf8");
    budget = 0;
    return cut;
  };

  // One raw CRI line through joining, the tail buffer and the byte budget: what to yield, and whether to stop.
  const take = (raw: string): { out?: string; stop: boolean } => give(joiner.push(raw));
  const give = (joined: string | undefined): { out?: string; stop: boolean } => {
    const line = joined === undefined ? undefined : emit(joined);
    if (line === undefined) return { stop: false };
    const l = limit(line);
    return l === undefined ? { stop: true } : { out: l, stop: budget <= 0 };
  };

  const last = paths[paths.length - 1];
  for (const p of paths.slice(0, -1)) {
    try {
      for await (const raw of p.endsWith(".gz") ? gzLines(p) : wholeFile(p)) {
        const step = take(raw);
        if (step.out !== undefined) yield step.out;
        if (step.stop) return;
      }
    } catch (err) {
      // A rotated file can be compressed or removed while being read: go on with the next.
      if (!isENOENT(err)) throw err;
    }
  }
  if (last === undefined) return;
  let current = await Tail.open(last);
  try {
    if (current) {
      for await (const raw of current.lines(!opts.follow)) {
        const step = take(raw);
        if (step.out !== undefined) yield step.out;
        if (step.stop) return;
      }
    }
    const step = give(joiner.flush());
    if (step.out !== undefined) yield step.out;
    if (step.stop) return;
    for (const line of ring.splice(0)) {
      const l = limit(line);
      if (l === undefined) return;
      yield l;
      if (budget <= 0) return;
    }
    if (!opts.follow) return;

    const pollMs = opts.pollMs ?? 250;
    const checkMs = opts.runningCheckMs ?? 1000;
    let lastCheck = Date.now();
    let stopping = false;
    while (!opts.signal?.aborted) {
      if (current) {
        for await (const raw of current.lines(stopping)) {
          const out = joiner.push(raw);
          if (out === undefined) continue;
          const l = limit(out);
          if (l === undefined) return;
          yield l;
          if (budget <= 0) return;
        }
      }
      // Caught up: a partial line is shown now, not when (if ever) its end arrives.
      const partial = joiner.flush();
      if (partial !== undefined) {
        const l = limit(partial);
        if (l === undefined) return;
        yield l;
        if (budget <= 0) return;
      }
      if (stopping) return;
      // Rotated: the runtime reopened a new file at the same path; finish the old one (done above) and switch.
      const now = await stat(last).catch(() => undefined);
      if (now && (!current || now.ino !== current.ino)) {
        await current?.close();
        current = await Tail.open(last);
        continue;
      }
      if (opts.stillRunning && Date.now() - lastCheck >= checkMs) {
        lastCheck = Date.now();
        if (!(await opts.stillRunning())) {
          stopping = true;
          continue;
        }
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, pollMs);
        opts.signal?.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
      });
    }
  } finally {
    await current?.close();
  }
}

/** A ReadableStream of the log for an HTTP body; cancelling it (client gone) stops a follow. */
export function logStream(paths: string[], opts: ReadLogsOptions): ReadableStream<Uint8Array> {
  const abort = new AbortController();
  if (opts.signal) opts.signal.addEventListener("abort", () => abort.abort(), { once: true });
  const gen = readLogs(paths, { ...opts, signal: abort.signal });
  const enc = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await gen.next();
        if (done) controller.close();
        else controller.enqueue(enc.encode(value));
      } catch (err) {
        controller.error(err);
      }
    },
    async cancel() {
      abort.abort();
      await gen.return(undefined);
    },
  });
}

/** A query parameter whose value is not acceptable: 400 naming it. */
export class BadLogQuery extends Error {
  constructor(
    readonly param: string,
    message: string,
  ) {
    super(message);
  }
}

/** metav1's query → bool conversion: absent false; `0 f false n no` false; anything else (even empty) true. */
function queryBool(v: string | undefined): boolean {
  if (v === undefined) return false;
  return !["0", "f", "false", "n", "no"].includes(v.toLowerCase());
}

function queryInt(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^[+-]?\d+$/.test(v.trim())) throw new BadLogQuery(name, `invalid value for ${name}: ${JSON.stringify(v)}: must be an integer`);
  return Number(v.trim());
}

/** PodLogOptions from the query, validated as upstream's ValidatePodLogOptions. `now` for sinceSeconds. */
export function parseLogQuery(q: Record<string, string | undefined>, now: number): LogOptions {
  let tailRaw = q.tailLines;
  // Backwards compatibility, as upstream: `tail`, where `all` means no limit.
  if (q.tail !== undefined) tailRaw = q.tail === "all" ? undefined : q.tail;
  const tailLines = queryInt("tailLines", tailRaw);
  if (tailLines !== undefined && tailLines < 0) throw new BadLogQuery("tailLines", "tailLines: must be greater than or equal to 0");
  const limitBytes = queryInt("limitBytes", q.limitBytes);
  if (limitBytes !== undefined && limitBytes < 1) throw new BadLogQuery("limitBytes", "limitBytes: must be greater than 0");
  const sinceSeconds = queryInt("sinceSeconds", q.sinceSeconds);
  if (sinceSeconds !== undefined && sinceSeconds < 1) throw new BadLogQuery("sinceSeconds", "sinceSeconds: must be greater than 0");
  let sinceMs: number | undefined;
  if (q.sinceTime !== undefined) {
    if (sinceSeconds !== undefined) throw new BadLogQuery("sinceTime", "sinceTime: at most one of `sinceTime` or `sinceSeconds` may be specified");
    // RFC 3339 with a zone, as metav1.Time decodes it.
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i.test(q.sinceTime) || Number.isNaN(Date.parse(q.sinceTime))) {
      throw new BadLogQuery("sinceTime", `invalid value for sinceTime: ${JSON.stringify(q.sinceTime)}: must be an RFC 3339 time`);
    }
    sinceMs = Date.parse(q.sinceTime);
  } else if (sinceSeconds !== undefined) sinceMs = now - sinceSeconds * 1000;
  return {
    ...(tailLines !== undefined ? { tailLines } : {}),
    ...(limitBytes !== undefined ? { limitBytes } : {}),
    ...(sinceMs !== undefined ? { sinceMs } : {}),
    timestamps: queryBool(q.timestamps),
    follow: queryBool(q.follow),
    previous: queryBool(q.previous),
  };
}
