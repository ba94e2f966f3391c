// A small hand-written SVG chart for the benchmark: one panel per pod count,
// in each the sorted latencies of every series as a step curve (x: share of
// the pods, y: latency), so medians, tails and spread read at a glance;
// dashed series (the runtime floors) take the colour of the solid one they go with.

export interface Series {
  panel: string;
  label: string;
  /** Latencies in ms, sorted ascending. */
  values: number[];
  dashed?: boolean;
}

const COLORS = ["#1f77b4", "#ff7f0e", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
export const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** A round step for an axis that reaches `max` in about five ticks. */
function tickStep(max: number): number {
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw)!;
}

export function renderChart(series: Series[], title: string): string {
  const panels = [...new Set(series.map((s) => s.panel))];
  const labels = [...new Set(series.map((s) => s.label))];
  const pw = 420,
    ph = 300,
    left = 70,
    top = 50,
    gap = 60,
    bottom = 100;
  const width = left + panels.length * pw + (panels.length - 1) * gap + 30;
  const height = top + ph + bottom;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  out.push(`<text x="${width / 2}" y="24" text-anchor="middle" font-size="15">${esc(title)}</text>`);
  panels.forEach((panel, pi) => {
    const x0 = left + pi * (pw + gap);
    const inPanel = series.filter((s) => s.panel === panel);
    const max = Math.max(1, ...inPanel.flatMap((s) => s.values));
    const step = tickStep(max);
    const yMax = Math.ceil(max / step) * step;
    const y = (v: number) => top + ph - (v / yMax) * ph;
    const x = (f: number) => x0 + f * pw;
    out.push(`<text x="${x0 + pw / 2}" y="${top - 8}" text-anchor="middle" font-size="13">${esc(panel)}</text>`);
    for (let v = 0; v <= yMax + 1e-9; v += step) {
      out.push(`<line x1="${x0}" x2="${x0 + pw}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e0e0e0"/>`);
      out.push(`<text x="${x0 - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${v >= 1000 ? `${(v / 1000).toFixed(step < 1000 ? 1 : 0)} s` : `${v} ms`}</text>`);
    }
    for (let f = 0; f <= 1.0001; f += 0.25) {
      out.push(`<line x1="${x(f).toFixed(1)}" x2="${x(f).toFixed(1)}" y1="${top}" y2="${top + ph}" stroke="#f0f0f0"/>`);
      out.push(`<text x="${x(f).toFixed(1)}" y="${top + ph + 16}" text-anchor="middle">${Math.round(f * 100)}%</text>`);
    }
    out.push(`<rect x="${x0}" y="${top}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
    out.push(`<text x="${x0 + pw / 2}" y="${top + ph + 34}" text-anchor="middle">share of pods Running (sorted by latency)</text>`);
    for (const s of inPanel) {
      const color = COLORS[labels.indexOf(s.label) % COLORS.length];
      const n = s.values.length;
      const pts: string[] = [];
      s.values.forEach((v, i) => {
        pts.push(`${x(i / n).toFixed(1)},${y(v).toFixed(1)}`, `${x((i + 1) / n).toFixed(1)},${y(v).toFixed(1)}`);
      });
      out.push(`<polyline fill="none" stroke="${color}" stroke-width="2"${s.dashed ? ` stroke-dasharray="6 4" opacity="0.7"` : ""} points="${pts.join(" ")}"/>`);
    }
  });
  labels.forEach((label, i) => {
    const lx = left + (i % 2) * 300,
      ly = top + ph + 56 + Math.floor(i / 2) * 18;
    const dashed = series.find((s) => s.label === label)?.dashed;
    out.push(
      `<line x1="${lx}" x2="${lx + 24}" y1="${ly - 4}" y2="${ly - 4}" stroke="${COLORS[i % COLORS.length]}" stroke-width="3"${dashed ? ` stroke-dasharray="6 4" opacity="0.7"` : ""}/>`,
    );
    out.push(`<text x="${lx + 30}" y="${ly}">${esc(label)}</text>`);
  });
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}
