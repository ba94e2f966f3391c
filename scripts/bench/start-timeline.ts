// Each pod's start, step by step, from an agent log of bench/compare.ts run
// with BENCH_BUNLET_ARGS=--v=10 (issue #24: where the last pods of a burst
// wait). Times are seconds from the first pod's ADD: the Pending patch, the
// volumes written, the start-gate slot, RunPodSandbox sent and answered, the
// container started, the Running patch (and how long it waited for its
// rate-limit token); then the mean, p50, p90 and max of each step's length.
// Run: bun scripts/bench/start-timeline.ts <bunlet.log> [pod name prefix, default bunlet-110-]
import { readFileSync } from "node:fs";

const [file, prefix = "bunlet-110-"] = process.argv.slice(2);
if (!file) throw new Error("usage: bun scripts/bench/start-timeline.ts <bunlet.log> [pod name prefix]");

interface Steps {
  add?: number;
  pending?: number;
  volumes?: number;
  slot?: number;
  sandboxSent?: number;
  sandboxDone?: number;
  started?: number;
  running?: number;
  runningThrottledMs?: number;
}

const pods = new Map<string, Steps>();
const field = (line: string, name: string) => new RegExp(`\\b${name}=(\\S+)`).exec(line)?.[1];
const escaped = prefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const podOf = new RegExp(`(?:pod=(?:[\\w-]+/)?|target=[\\w-]+/|/pods/)(${escaped}\\d+)\\b`);
const lastThrottle = new Map<string, number>();
for (const line of readFileSync(file, "utf8").split("\n")) {
  if (!/^[IWE]\d{4}-/.test(line)) continue;
  const at = Date.parse(line.slice(1, 25));
  const name = podOf.exec(line)?.[1];
  if (!name) continue;
  const p = pods.get(name) ?? {};
  pods.set(name, p);
  const once = (key: keyof Steps, value: number) => void (p[key] ??= value);
  if (line.includes('"SyncLoop ADD"')) once("add", at);
  else if (line.includes('"volume content written"')) once("volumes", at);
  else if (line.includes('"start gate: slot taken"')) once("slot", at);
  else if (line.includes('"started container"')) once("started", at);
  else if (line.includes('"CRI call"') && line.includes("method=RunPodSandbox")) {
    once("sandboxSent", at - Number(field(line, "ms")));
    once("sandboxDone", at);
  } else if (line.includes('"API request"') && line.includes("/status ")) lastThrottle.set(name, Number(field(line, "throttledMs")));
  else if (line.includes('"pod status patched"')) {
    const phase = field(line, "phase");
    if (phase === "Pending") once("pending", at);
    if (phase === "Running" && p.running === undefined) {
      p.running = at;
      p.runningThrottledMs = lastThrottle.get(name) ?? 0;
    }
  }
}

const rows = [...pods].filter(([, p]) => p.add !== undefined);
if (!rows.length) throw new Error(`no pod named ${prefix}N with a "SyncLoop ADD" line in ${file}`);
const t0 = Math.min(...rows.map(([, p]) => p.add!));
const columns: (keyof Steps)[] = ["add", "pending", "volumes", "slot", "sandboxSent", "sandboxDone", "started", "running"];
const s = (v: number | undefined) => (v === undefined ? "-" : ((v - t0) / 1000).toFixed(2));
console.log(`| pod | ${columns.join(" | ")} | Running patch's token wait |\n| --- |${" ---: |".repeat(columns.length + 1)}`);
for (const [name, p] of rows.sort((a, b) => (a[1].running ?? Infinity) - (b[1].running ?? Infinity)))
  console.log(`| ${name} | ${columns.map((c) => s(p[c])).join(" | ")} | ${p.runningThrottledMs ?? "-"} ms |`);

const spans: [string, keyof Steps, keyof Steps][] = [
  ["ADD → volumes written", "add", "volumes"],
  ["volumes → start-gate slot", "volumes", "slot"],
  ["slot → RunPodSandbox sent", "slot", "sandboxSent"],
  ["RunPodSandbox", "sandboxSent", "sandboxDone"],
  ["sandbox → container started", "sandboxDone", "started"],
  ["started → Running patched", "started", "running"],
];
console.log("\n| step | mean | p50 | p90 | max |\n| --- | ---: | ---: | ---: | ---: |");
for (const [label, from, to] of spans) {
  const v = rows
    .map(([, p]) => (p[from] !== undefined && p[to] !== undefined ? p[to]! - p[from]! : undefined))
    .filter((x): x is number => x !== undefined)
    .sort((a, b) => a - b);
  if (!v.length) continue;
  const at = (q: number) => v[Math.min(v.length - 1, Math.ceil(q * v.length) - 1)]!;
  console.log(`| ${label} | ${(v.reduce((a, b) => a + b, 0) / v.length).toFixed(0)} ms | ${at(0.5).toFixed(0)} ms | ${at(0.9).toFixed(0)} ms | ${v.at(-1)!.toFixed(0)} ms |`);
}
const slots = rows.map(([, p]) => p.slot).filter((x): x is number => x !== undefined);
const sent = rows.map(([, p]) => p.sandboxSent).filter((x): x is number => x !== undefined);
console.log(
  `\nfirst RunPodSandbox sent at ${s(Math.min(...sent))} s, last slot taken at ${s(Math.max(...slots))} s, last Running patch at ${s(Math.max(...rows.map(([, p]) => p.running ?? 0)))} s`,
);
