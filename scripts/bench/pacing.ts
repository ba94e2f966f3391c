// How containerd serves a burst of pod starts: N pods' RunPodSandbox +
// CreateContainer + StartContainer straight through the CRI, all at once and
// with at most K pods in flight (a pod holds its place from its sandbox
// request to its container started, as the agent's start gate does, or only
// through RunPodSandbox). No agent and no control plane: the evidence behind
// runtime/start-gate.ts (docs/benchmarks.md).
// Run (root): bun scripts/bench/pacing.ts   [BENCH_PODS=30] [ROUNDS=2]
//   [BENCH_IN_FLIGHT=8,12,16: only these widths, each through container started]
import { createCriClient } from "../../src/cri/client.ts";
import { createLogger } from "../../src/util/log.ts";
import { requireRoot, startContainerd } from "../../test/harness/containerd.ts";
import { runBenchSandbox, startBenchContainer, type BenchSandbox } from "./cri-pod.ts";

const COUNT = Number(process.env.BENCH_PODS ?? 30);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
type Mode = { inFlight: number; through: "sandbox" | "container started" };
const MODES: Mode[] = process.env.BENCH_IN_FLIGHT
  ? process.env.BENCH_IN_FLIGHT.split(",").map((n) => ({ inFlight: Number(n), through: "container started" }))
  : [
      { inFlight: Infinity, through: "container started" },
      { inFlight: 8, through: "sandbox" },
      { inFlight: 4, through: "sandbox" },
      { inFlight: 8, through: "container started" },
      { inFlight: 4, through: "container started" },
    ];

/** At most `n` holders at once, served in arrival order. */
function limiter(n: number) {
  let active = 0;
  const waiting: (() => void)[] = [];
  return {
    async enter(): Promise<void> {
      if (active >= n) await new Promise<void>((resolve) => waiting.push(resolve));
      active++;
    },
    leave(): void {
      active--;
      waiting.shift()?.();
    },
  };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;

requireRoot();
const ctd = await startContainerd({ name: "pacing" });
const cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
let batch = 0;

/** Each pod's time from the burst's start to its container started (sorted, ms). */
async function burst(count: number, mode: (typeof MODES)[number]): Promise<number[]> {
  batch++;
  const gate = limiter(mode.inFlight);
  const times = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const t0 = performance.now();
      await gate.enter();
      let sandbox: BenchSandbox;
      try {
        sandbox = await runBenchSandbox(cri, ctd, "bench-pacing", `pacing-${batch}-${i}`);
      } finally {
        if (mode.through === "sandbox") gate.leave();
      }
      try {
        await startBenchContainer(cri, ctd, sandbox);
      } finally {
        if (mode.through === "container started") gate.leave();
      }
      return performance.now() - t0;
    }),
  );
  return times.sort((a, b) => a - b);
}

async function removeAll(): Promise<void> {
  const sandboxes = await cri.listPodSandbox(undefined);
  await Promise.all(sandboxes.map((s) => cri.stopPodSandbox(s.id).then(() => cri.removePodSandbox(s.id))));
  await Bun.sleep(2000);
}

try {
  await burst(5, { inFlight: Infinity, through: "container started" }); // warm-up: the first sandboxes pay for one-time work
  await removeAll();
  console.log(`| ${COUNT} pods, in flight | through | p50 | p99 |\n| --- | --- | ---: | ---: |`);
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of MODES) {
      const t = await burst(COUNT, mode);
      console.log(`| ${Number.isFinite(mode.inFlight) ? mode.inFlight : "all"} | ${mode.through} | ${percentile(t, 50).toFixed(0)} ms | ${percentile(t, 99).toFixed(0)} ms |`);
      await removeAll();
    }
  }
} finally {
  cri.close();
  await ctd.stop();
}
