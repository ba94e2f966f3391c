/**
 * Structured logging in the kubelet's style: `msg key=value ...`, with
 * verbosity levels like `--v`. Loggers are passed in, never global.
 */
export type LogFields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Logged only when the configured verbosity is at least `level`. */
  v(level: number): Pick<Logger, "info">;
  with(fields: LogFields): Logger;
}

export interface LogSink {
  write(line: string): void;
}

function formatValue(value: unknown): string {
  if (value instanceof Error) return JSON.stringify(value.message);
  if (typeof value === "string") return /^[\w./:@-]+$/.test(value) ? value : JSON.stringify(value);
  if (typeof value === "bigint") return value.toString();
  return JSON.stringify(value) ?? "undefined";
}

export function formatLine(level: string, time: Date, msg: string, fields: LogFields): string {
  const parts = [`${level}${time.toISOString()}`, JSON.stringify(msg)];
  for (const [k, v] of Object.entries(fields)) parts.push(`${k}=${formatValue(v)}`);
  return parts.join(" ");
}

/**
 * The verbosity of a logger and every logger derived from it with `with`:
 * one value, changed at run time by the kubelet API's PUT /debug/flags/v
 * (enableDebugFlagsHandler). Owned by main and passed in, never global.
 */
export class Verbosity {
  constructor(private level: number) {}
  get(): number {
    return this.level;
  }
  set(level: number): void {
    this.level = level;
  }
}

export function createLogger(opts: { verbosity: number | Verbosity; sink?: LogSink; now?: () => number; fields?: LogFields }): Logger {
  const sink = opts.sink ?? { write: (line: string) => process.stderr.write(line + "\n") };
  const now = opts.now ?? Date.now;
  const base = opts.fields ?? {};
  const emit = (level: string, msg: string, fields?: LogFields) => sink.write(formatLine(level, new Date(now()), msg, { ...base, ...fields }));
  const silent = { info: () => {} };
  const level = opts.verbosity;
  const current = typeof level === "number" ? () => level : () => level.get();
  const logger: Logger = {
    info: (msg, f) => emit("I", msg, f),
    warn: (msg, f) => emit("W", msg, f),
    error: (msg, f) => emit("E", msg, f),
    v: (n) => (n <= current() ? { info: (msg, f) => emit("I", msg, f) } : silent),
    with: (fields) => createLogger({ ...opts, sink, now, fields: { ...base, ...fields } }),
  };
  return logger;
}

/** Collects lines in memory; for tests. */
export function memoryLogger(verbosity = 10): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: createLogger({ verbosity, sink: { write: (l) => lines.push(l) }, now: () => 0 }), lines };
}
