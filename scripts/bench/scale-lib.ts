// The logic of the scale bench (scripts/bench/scale.ts, issue #24), apart from
// its processes so it can be unit-tested: the hollow nodes' names, the API
// server's Prometheus text, lease ages and timer lag.

export type HollowKind = "bunlet" | "upstream";

/** The name of hollow node `i` of one kind: `hollow-bunlet-007`. Sorted by name is sorted by index. */
export function hollowNodeName(kind: HollowKind, i: number): string {
  if (!Number.isInteger(i) || i < 0 || i > 999) throw new RangeError(`hollow node index ${i}: an integer from 0 to 999`);
  return `hollow-${kind}-${String(i).padStart(3, "0")}`;
}

/** The kind and index a hollow node's name says, or undefined for any other name. */
export function parseHollowNodeName(name: string): { kind: HollowKind; index: number } | undefined {
  const m = /^hollow-(bunlet|upstream)-(\d{3})$/.exec(name);
  return m ? { kind: m[1] as HollowKind, index: Number(m[2]) } : undefined;
}

/** `count` agents split into groups of at most `perGroup` consecutive indexes: one group per hollow process. */
export function groups(count: number, perGroup: number): { first: number; count: number }[] {
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`count ${count}: a whole number`);
  if (!Number.isInteger(perGroup) || perGroup < 1) throw new RangeError(`perGroup ${perGroup}: at least 1`);
  const out: { first: number; count: number }[] = [];
  for (let first = 0; first < count; first += perGroup) out.push({ first, count: Math.min(perGroup, count - first) });
  return out;
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of Prometheus' text format (version 0.0.4); comments and blank lines are skipped, timestamps dropped. */
export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (!m) throw new Error(`metrics: cannot read ${JSON.stringify(line)}`);
    const name = m[1]!;
    let i = name.length;
    const labels: Record<string, string> = {};
    if (line[i] === "{") {
      i++;
      for (;;) {
        while (line[i] === " " || line[i] === ",") i++;
        if (line[i] === "}") {
          i++;
          break;
        }
        const eq = line.indexOf("=", i);
        if (eq < 0 || line[eq + 1] !== '"') throw new Error(`metrics: bad label in ${JSON.stringify(line)}`);
        const key = line.slice(i, eq).trim();
        let value = "";
        let j = eq + 2;
        for (; j < line.length && line[j] !== '"'; j++) {
          if (line[j] === "\\") {
            j++;
            value += line[j] === "n" ? "\n" : line[j];
          } else value += line[j];
        }
        if (j >= line.length) throw new Error(`metrics: unterminated label value in ${JSON.stringify(line)}`);
        labels[key] = value;
        i = j + 1;
      }
    }
    const [valueText] = line.slice(i).trim().split(/\s+/);
    const value = valueText === "+Inf" ? Number.POSITIVE_INFINITY : valueText === "-Inf" ? Number.NEGATIVE_INFINITY : Number(valueText);
    if (valueText === undefined || valueText === "" || (Number.isNaN(value) && valueText !== "NaN")) throw new Error(`metrics: no value in ${JSON.stringify(line)}`);
    out.push({ name, labels, value });
  }
  return out;
}

/** The samples named `name`, summed by the key `key` gives each (a sample whose key is undefined is left out). */
export function sumBy(samples: readonly Sample[], name: string, key: (labels: Record<string, string>) => string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of samples) {
    if (s.name !== name) continue;
    const k = key(s.labels);
    if (k === undefined) continue;
    out.set(k, (out.get(k) ?? 0) + s.value);
  }
  return out;
}

/** `after − before` for each key of either (a counter that appeared counts from 0). */
export function delta(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of after) out.set(k, v - (before.get(k) ?? 0));
  for (const [k, v] of before) if (!after.has(k)) out.set(k, -v);
  return out;
}

/** `verb resource[/subresource]`, as the audit figures of bench:idle name requests. */
export function verbResource(labels: Record<string, string>): string {
  const resource = labels.resource || "(none)";
  return `${(labels.verb ?? "").toLowerCase()} ${resource}${labels.subresource ? `/${labels.subresource}` : ""}`;
}

/** Milliseconds since the epoch of a Kubernetes MicroTime or Time (`2026-11-24T17:40:00.123456Z`); NaN if it is not one. */
export function parseMicroTime(text: string): number {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/.exec(text);
  if (!m) return Number.NaN;
  const ms = Date.parse(`${m[1]}${m[3]}`);
  return ms + (m[2] ? Number(`0.${m[2]}`) * 1000 : 0);
}

export interface LeaseLike {
  metadata: { name: string };
  spec?: { renewTime?: string; leaseDurationSeconds?: number };
}

/** For each lease whose name `wanted` accepts: how long ago (ms) at `nowMs` it was last renewed (Infinity when never). */
export function leaseAges(leases: readonly LeaseLike[], nowMs: number, wanted: (name: string) => boolean): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of leases) {
    if (!wanted(l.metadata.name)) continue;
    const t = l.spec?.renewTime ? parseMicroTime(l.spec.renewTime) : Number.NaN;
    out.set(l.metadata.name, Number.isNaN(t) ? Number.POSITIVE_INFINITY : Math.max(0, nowMs - t));
  }
  return out;
}

/** The value at quantile q (0..1) by nearest rank; NaN for no values. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1]!;
}

/**
 * A timer's lateness: a one-second tick asked for at `expected` ran at `actual`
 * (both ms); the event loop was busy for `actual − expected`. Kept as a list
 * so a window's quantiles can be read.
 */
export class LagMeter {
  private readonly lags: { at: number; lagMs: number }[] = [];

  record(expected: number, actual: number): void {
    this.lags.push({ at: actual, lagMs: Math.max(0, actual - expected) });
  }

  /** p50, p99 and max lag of the ticks that ran in [from, to]. */
  summary(from = Number.NEGATIVE_INFINITY, to = Number.POSITIVE_INFINITY): { ticks: number; p50: number; p99: number; max: number } {
    const v = this.lags.filter((l) => l.at >= from && l.at <= to).map((l) => l.lagMs);
    return { ticks: v.length, p50: quantile(v, 0.5), p99: quantile(v, 0.99), max: v.length ? Math.max(...v) : Number.NaN };
  }

  /** Forgets ticks before `before` (a long run keeps only what it may still ask for). */
  drop(before: number): void {
    const i = this.lags.findIndex((l) => l.at >= before);
    this.lags.splice(0, i < 0 ? this.lags.length : i);
  }
}
