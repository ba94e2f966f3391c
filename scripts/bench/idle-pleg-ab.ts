// Two agent binaries idle side by side, standalone (no API server), each on
// its own private containerd (BUNLET_RUNTIME, 1.6 by default: the PLEG
// relists every second), with 0 pods: the A/B figure for a change to the
// idle agent (docs/benchmarks.md, "The cost of a quiet node").
//
//   bun scripts/bench/idle-pleg-ab.ts BINARY_A BINARY_B [seconds=300] [settle=60]
//
// Both start at once so the machine's other load falls on both; the window
// starts `settle` seconds after both are healthy. CPU is utime + stime of
// each agent process from /proc over the window, also its main
// (JavaScript) thread's alone, and its containerd's; RSS is the mean of a
// sample every 10 s. Prints one table.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, startAgent } from "../../test/harness/agent.ts";
import { requireRoot, runtimeUnderTest, startContainerd } from "../../test/harness/containerd.ts";
import { CLK_TCK, cpuTicks, parseStat, rssMiB } from "./proc.ts";

const [binaryA, binaryB] = [process.argv[2], process.argv[3]];
if (!binaryA || !binaryB) throw new Error("usage: idle-pleg-ab.ts BINARY_A BINARY_B [seconds] [settle]");
const seconds = Number(process.argv[4] ?? 300);
const settle = Number(process.argv[5] ?? 60);
requireRoot();

/** utime + stime of one thread of `pid` (its main thread: tid = pid). */
const threadTicks = (pid: number, tid: number) => parseStat(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")).ticks;

const sides = await Promise.all(
  [binaryA, binaryB].map(async (binary, i) => {
    const ctd = await startContainerd({ name: `ab-${i}` });
    // startAgent reads BUNLET_BINARY when it spawns, synchronously inside this call.
    process.env.BUNLET_BINARY = binary;
    const agent = await startAgent(ctd);
    return { binary, ctd, agent };
  }),
);
try {
  for (const s of sides) {
    await eventually("agent healthy", async () => (await fetch(`http://127.0.0.1:${s.agent.healthzPort}/healthz`).catch(() => undefined))?.ok, 60_000);
  }
  await Bun.sleep(settle * 1000);
  const start = sides.map((s) => {
    const pid = s.agent.pid()!;
    const ctdPid = Number(readFileSync(join(s.ctd.dir, "containerd.pid"), "utf8"));
    return { pid, ctdPid, agent: cpuTicks(pid), js: threadTicks(pid, pid), ctd: cpuTicks(ctdPid), rss: [] as number[] };
  });
  const t0 = performance.now();
  const began = new Date().toISOString();
  while (performance.now() - t0 < seconds * 1000) {
    for (const s of start) s.rss.push(rssMiB(s.pid));
    await Bun.sleep(Math.min(10_000, seconds * 1000 - (performance.now() - t0)));
  }
  const secs = (performance.now() - t0) / 1000;
  const pct = (ticks: number) => (ticks / CLK_TCK / secs) * 100;
  const rows = start.map((s, i) => ({
    binary: sides[i]!.binary,
    agent: pct(cpuTicks(s.pid) - s.agent),
    js: pct(threadTicks(s.pid, s.pid) - s.js),
    ctd: pct(cpuTicks(s.ctdPid) - s.ctd),
    rss: s.rss.reduce((a, b) => a + b, 0) / s.rss.length,
  }));
  console.log(`${runtimeUnderTest()}, 0 pods, ${Math.round(secs)} s from ${settle} s after healthy, ${began} to ${new Date().toISOString()}`);
  console.log("| binary | agent CPU | JavaScript thread | containerd CPU | RSS (mean) |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const r of rows) console.log(`| ${r.binary} | ${r.agent.toFixed(3)} % | ${r.js.toFixed(3)} % | ${r.ctd.toFixed(3)} % | ${r.rss.toFixed(1)} MiB |`);
  console.log(`B / A: agent CPU ${(rows[1]!.agent / rows[0]!.agent).toFixed(2)}x, JavaScript thread ${(rows[1]!.js / rows[0]!.js).toFixed(2)}x`);
} finally {
  await Promise.all(
    sides.map(async (s) => {
      await s.agent.kill("SIGKILL");
      await s.ctd.stop();
    }),
  );
}
