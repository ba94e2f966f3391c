// The soak's chart: the agent's RSS over time as a line, with the band the
// issue allows (growth under 5% over the level after warm-up) shaded, so a
// leak reads as a line leaving the band. Hand-written SVG like chart.ts.

import { esc } from "./chart.ts";

export interface SoakPoint {
  /** Seconds since the pods were all created. */
  s: number;
  rssMiB: number;
}

export function renderSoakChart(points: SoakPoint[], opts: { title: string; baselineMiB: number; warmupSeconds: number }): string {
  const w = 760,
    h = 360,
    left = 70,
    right = 20,
    top = 50,
    bottom = 60;
  const pw = w - left - right,
    ph = h - top - bottom;
  const tMax = Math.max(60, ...points.map((p) => p.s));
  const yMax = Math.ceil(Math.max(opts.baselineMiB * 1.1, ...points.map((p) => p.rssMiB)) / 10) * 10;
  const x = (s: number) => left + (s / tMax) * pw;
  const y = (v: number) => top + ph - (v / yMax) * ph;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${w}" height="${h}" fill="white"/>`);
  out.push(`<text x="${w / 2}" y="24" text-anchor="middle" font-size="15">${esc(opts.title)}</text>`);
  // The allowed band: from the post-warm-up level to 5% above it, after the warm-up.
  const band = [opts.baselineMiB, opts.baselineMiB * 1.05];
  out.push(
    `<rect x="${x(opts.warmupSeconds).toFixed(1)}" y="${y(band[1]!).toFixed(1)}" width="${(x(tMax) - x(opts.warmupSeconds)).toFixed(1)}" height="${(y(band[0]!) - y(band[1]!)).toFixed(1)}" fill="#2ca02c" opacity="0.15"/>`,
  );
  for (let v = 0; v <= yMax; v += yMax / 5) {
    out.push(`<line x1="${left}" x2="${left + pw}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e0e0e0"/>`);
    out.push(`<text x="${left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${v.toFixed(0)} MiB</text>`);
  }
  const minuteStep = tMax > 3600 ? 20 : tMax > 1200 ? 10 : 2;
  for (let m = 0; m * 60 <= tMax; m += minuteStep) {
    out.push(`<line x1="${x(m * 60).toFixed(1)}" x2="${x(m * 60).toFixed(1)}" y1="${top}" y2="${top + ph}" stroke="#f0f0f0"/>`);
    out.push(`<text x="${x(m * 60).toFixed(1)}" y="${top + ph + 16}" text-anchor="middle">${m}</text>`);
  }
  out.push(`<rect x="${left}" y="${top}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${left + pw / 2}" y="${top + ph + 34}" text-anchor="middle">minutes since the pods were created (shaded: the level after warm-up + 5%)</text>`);
  out.push(`<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="${points.map((p) => `${x(p.s).toFixed(1)},${y(p.rssMiB).toFixed(1)}`).join(" ")}"/>`);
  out.push(`</svg>`);
  return `${out.join("\n")}\n`;
}
