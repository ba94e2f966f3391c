// Idle CPU of the agent and of containerd with 0 pods, on the runtime
// BUNLET_RUNTIME picks (containerd16: the PLEG relists every second;
// containerd2: it follows the CRI event stream and relists every 300 s).
//
//   BUNLET_RUNTIME=containerd2 BUNLET_BINARY=dist/kubelet bun scripts/bench/idle-pleg.ts [seconds]
//
// Waits 15 s after the agent is healthy, then reads utime + stime of both
// processes from /proc over the window (default 120 s). Prints one JSON line.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startAgent, eventually } from "../../test/harness/agent.ts";
import { requireRoot, runtimeUnderTest, startContainerd } from "../../test/harness/containerd.ts";
import { CLK_TCK, cpuTicks, rssMiB } from "./proc.ts";

const seconds = Number(process.argv[2] ?? 120);
requireRoot();
const ctd = await startContainerd({ name: "idle" });
try {
  const agent = await startAgent(ctd);
  try {
    await eventually("agent healthy", async () => (await fetch(`http://127.0.0.1:${agent.healthzPort}/healthz`).catch(() => undefined))?.ok, 30_000);
    await Bun.sleep(15_000);
    const pid = agent.pid()!;
    const ctdPid = Number(readFileSync(join(ctd.dir, "containerd.pid"), "utf8"));
    const a0 = cpuTicks(pid);
    const c0 = cpuTicks(ctdPid);
    const t0 = performance.now();
    await Bun.sleep(seconds * 1000);
    const s = (performance.now() - t0) / 1000;
    const pct = (ticks: number) => Number(((ticks / CLK_TCK / s) * 100).toFixed(2));
    console.log(
      JSON.stringify({
        runtime: runtimeUnderTest(),
        seconds: Math.round(s),
        agentCpuPercent: pct(cpuTicks(pid) - a0),
        containerdCpuPercent: pct(cpuTicks(ctdPid) - c0),
        agentRssMiB: Number(rssMiB(pid).toFixed(1)),
      }),
    );
  } finally {
    await agent.kill("SIGKILL");
  }
} finally {
  await ctd.stop();
}
