/**
 * A small Prometheus registry: counters, gauges and histograms with labels,
 * rendered in the text exposition format (version 0.0.4) that Prometheus
 * and metrics-server scrape. Instances, not globals: the agent owns one.
 */

export type Labels = Record<string, string>;

interface Family {
  name: string;
  help: string;
  type: "counter" | "gauge" | "histogram";
  render(out: string[]): void;
}

/**
 * Kubernetes' component-base prefixes the HELP of its metrics with their
 * stability level (annotateStabilityLevel): `[ALPHA] ...`, `[STABLE] ...`.
 * client_golang's own (process_*) and cAdvisor's carry none.
 */
export const alpha = (help: string): string => `[ALPHA] ${help}`;
export const stable = (help: string): string => `[STABLE] ${help}`;

/** Upstream client_golang's DefBuckets. */
export const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start * factor ** i);
}

const escapeLabel = (v: string) => v.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"');
const escapeHelp = (v: string) => v.replaceAll("\\", "\\\\").replaceAll("\n", "\\n");

function labelText(labels: Labels, extra?: [string, string]): string {
  const pairs = Object.entries(labels);
  if (extra) pairs.push(extra);
  return pairs.length ? `{${pairs.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}` : "";
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

const keyOf = (labelNames: readonly string[], labels: Labels) => labelNames.map((n) => labels[n] ?? "").join("\u0000");

function pick(labelNames: readonly string[], labels: Labels): Labels {
  for (const k of Object.keys(labels)) if (!labelNames.includes(k)) throw new Error(`metric label "${k}" is not declared`);
  return Object.fromEntries(labelNames.map((n) => [n, labels[n] ?? ""]));
}

export class Counter<L extends string = never> {
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(readonly labelNames: readonly L[]) {}

  inc(labels: Partial<Record<L, string>> = {}, by = 1): void {
    if (by < 0) throw new Error("a counter cannot decrease");
    const l = pick(this.labelNames, labels as Labels);
    const key = keyOf(this.labelNames, l);
    const entry = this.values.get(key) ?? { labels: l, value: 0 };
    entry.value += by;
    this.values.set(key, entry);
  }

  get(labels: Partial<Record<L, string>> = {}): number {
    return this.values.get(keyOf(this.labelNames, labels as Labels))?.value ?? 0;
  }

  /** Drops series, e.g. of a pod that is gone. */
  removeWhere(match: (labels: Labels) => boolean): void {
    for (const [k, e] of this.values) if (match(e.labels)) this.values.delete(k);
  }

  samples(): { labels: Labels; value: number }[] {
    return [...this.values.values()];
  }
}

export class Gauge<L extends string = never> {
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(readonly labelNames: readonly L[]) {}

  set(labels: Partial<Record<L, string>>, value: number): void {
    const l = pick(this.labelNames, labels as Labels);
    this.values.set(keyOf(this.labelNames, l), { labels: l, value });
  }

  reset(): void {
    this.values.clear();
  }

  samples(): { labels: Labels; value: number }[] {
    return [...this.values.values()];
  }
}

export class Histogram<L extends string = never> {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(
    readonly labelNames: readonly L[],
    readonly buckets: readonly number[],
  ) {}

  observe(labels: Partial<Record<L, string>>, value: number): void {
    const l = pick(this.labelNames, labels as Labels);
    const key = keyOf(this.labelNames, l);
    let s = this.series.get(key);
    if (!s) this.series.set(key, (s = { labels: l, counts: this.buckets.map(() => 0), sum: 0, count: 0 }));
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) s.counts[i]!++;
    s.sum += value;
    s.count++;
  }

  removeWhere(match: (labels: Labels) => boolean): void {
    for (const [k, s] of this.series) if (match(s.labels)) this.series.delete(k);
  }

  count(labels: Partial<Record<L, string>> = {}): number {
    return this.series.get(keyOf(this.labelNames, labels as Labels))?.count ?? 0;
  }

  render(name: string, out: string[]): void {
    for (const s of this.series.values()) {
      this.buckets.forEach((le, i) => out.push(`${name}_bucket${labelText(s.labels, ["le", formatValue(le)])} ${s.counts[i]}`));
      out.push(`${name}_bucket${labelText(s.labels, ["le", "+Inf"])} ${s.count}`);
      out.push(`${name}_sum${labelText(s.labels)} ${formatValue(s.sum)}`);
      out.push(`${name}_count${labelText(s.labels)} ${s.count}`);
    }
  }
}

export class Registry {
  private readonly families = new Map<string, Family>();

  private add(f: Family): void {
    if (this.families.has(f.name)) throw new Error(`metric ${f.name} registered twice`);
    if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(f.name)) throw new Error(`invalid metric name ${f.name}`);
    this.families.set(f.name, f);
  }

  counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    const c = new Counter<L>(labelNames);
    this.add({ name, help, type: "counter", render: (out) => c.samples().forEach((s) => out.push(`${name}${labelText(s.labels)} ${formatValue(s.value)}`)) });
    return c;
  }

  gauge<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
    const g = new Gauge<L>(labelNames);
    this.add({ name, help, type: "gauge", render: (out) => g.samples().forEach((s) => out.push(`${name}${labelText(s.labels)} ${formatValue(s.value)}`)) });
    return g;
  }

  /** A gauge whose samples are read when scraped (process figures, running pods); a sample may carry the time of its reading. */
  gaugeFn(name: string, help: string, read: () => { labels?: Labels; value: number; timestampMs?: number }[]): void {
    this.add({
      name,
      help,
      type: "gauge",
      render: (out) =>
        read().forEach((s) => out.push(`${name}${labelText(s.labels ?? {})} ${formatValue(s.value)}${s.timestampMs !== undefined ? ` ${Math.round(s.timestampMs)}` : ""}`)),
    });
  }

  /** A counter whose samples are read when scraped (CPU seconds from the stats collector). */
  counterFn(name: string, help: string, read: () => { labels?: Labels; value: number; timestampMs?: number }[]): void {
    this.add({
      name,
      help,
      type: "counter",
      render: (out) =>
        read().forEach((s) => out.push(`${name}${labelText(s.labels ?? {})} ${formatValue(s.value)}${s.timestampMs !== undefined ? ` ${Math.round(s.timestampMs)}` : ""}`)),
    });
  }

  histogram<L extends string = never>(name: string, help: string, labelNames: readonly L[] = [], buckets: readonly number[] = DEFAULT_BUCKETS): Histogram<L> {
    const h = new Histogram<L>(labelNames, buckets);
    this.add({ name, help, type: "histogram", render: (out) => h.render(name, out) });
    return h;
  }

  /** The text exposition format; a family with no samples still lists HELP and TYPE. */
  render(): string {
    const out: string[] = [];
    for (const f of this.families.values()) {
      out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
      f.render(out);
    }
    return out.join("\n") + "\n";
  }
}

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
