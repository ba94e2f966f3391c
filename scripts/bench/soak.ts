// Soak: the agent under a full node for a long time, with churn, in cluster
// mode on a real containerd and control plane. Prints the agent's RSS over
// time, the slope of a least-squares line through it after warm-up (a leak
// shows as a steady positive slope), and its CPU use.
//
//   bun scripts/bench/soak.ts                          # 110 pods, 30 minutes
//   SOAK_PODS=20 SOAK_MINUTES=2 bun scripts/bench/soak.ts   # a quick check
//   BUNLET_BINARY=dist/kubelet bun scripts/bench/soak.ts    # the shipped binary
//
// Churn: every SOAK_CHURN_SECONDS (default 30) a few pods are deleted and as
// many created; one pod crash-loops all along (restarts, backoff, GC), one
// fails its liveness probe (probe kills and restarts), one fails its readiness
// probe every 5 s (Ready flips, events), and one writes logs fast enough that
// its log is rotated every few seconds (containerLogMaxSize 256Ki).
// The figure the issue asks for: RSS growth from the level after warm-up
// (mean of minutes 10 to 15) to the level at the end (mean of the last 5
// minutes), under 5%. SOAK_OUT (default .cache/soak) gets the samples as JSON
// and the chart as SVG.
// Not part of the test command: it takes half an hour and a whole node.
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CLK_TCK, cpuTicks, rssMiB } from "./proc.ts";
import { renderSoakChart } from "./soak-chart.ts";
import { createRestClient, loadCredentials } from "../../src/api/rest.ts";
import { realClock } from "../../src/util/clock.ts";
import { eventually, startAgent } from "../../test/harness/agent.ts";
import { requireRoot, startContainerd } from "../../test/harness/containerd.ts";
import { startControlPlane } from "../../test/harness/controlplane.ts";
import { createLogger } from "../../src/util/log.ts";

const PODS = Number(process.env.SOAK_PODS ?? 110);
const MINUTES = Number(process.env.SOAK_MINUTES ?? 30);
const CHURN_SECONDS = Number(process.env.SOAK_CHURN_SECONDS ?? 30);
const CHURN_PODS = Math.max(1, Math.round(PODS / 20));
const SAMPLE_SECONDS = 10;
const WARMUP_SECONDS = Number(process.env.SOAK_WARMUP_SECONDS ?? 600);
const OUT = process.env.SOAK_OUT ?? ".cache/soak";
const NODE = "soak-node";

interface Sample {
  s: number;
  rssMiB: number;
  cpuSeconds: number;
}

function sample(pid: number, t0: number): Sample {
  return { s: (performance.now() - t0) / 1000, rssMiB: rssMiB(pid), cpuSeconds: cpuTicks(pid) / CLK_TCK };
}

/** Least-squares slope of y over x. */
function slope(points: { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((a, p) => a + p.x, 0) / n;
  const my = points.reduce((a, p) => a + p.y, 0) / n;
  const num = points.reduce((a, p) => a + (p.x - mx) * (p.y - my), 0);
  const den = points.reduce((a, p) => a + (p.x - mx) ** 2, 0);
  return den === 0 ? NaN : num / den;
}

requireRoot();
const [ctd, cp] = await Promise.all([startContainerd({ name: "soak" }), startControlPlane({ name: "soak" })]);
try {
  const agent = await startAgent(ctd, {
    nodeName: NODE,
    extraConfig: { containerLogMaxSize: "256Ki", containerLogMaxFiles: 3 },
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, "--node-ip=127.0.0.1"],
  });
  const rest = createRestClient({
    credentials: await loadCredentials(cp.adminKubeconfig),
    qps: 0,
    burst: 0,
    clock: realClock,
    logger: createLogger({ verbosity: 0 }),
    userAgent: "soak",
  });
  await eventually(
    "node Ready",
    async () => {
      const node = await rest.request<any>("GET", `/api/v1/nodes/${NODE}`).catch(() => undefined);
      return node?.status?.conditions?.find((c: any) => c.type === "Ready")?.status === "True";
    },
    60_000,
    500,
  );
  await rest.request("POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "soak" } } });
  const passing = { readinessProbe: { exec: { command: ["true"] }, periodSeconds: 30 } };
  const pod = (name: string, command: string[], probes: Record<string, unknown>) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      nodeName: NODE,
      terminationGracePeriodSeconds: 1,
      containers: [{ name: "c", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command, ...probes }],
    },
  });
  const create = (name: string, command = ["sleep", "1000000"], probes: Record<string, unknown> = passing) =>
    rest.request("POST", "/api/v1/namespaces/soak/pods", { body: pod(name, command, probes) });
  const remove = (name: string) => rest.request("DELETE", `/api/v1/namespaces/soak/pods/${name}`).catch(() => undefined);
  const runningCount = async () => {
    const list = await rest.request<any>("GET", "/api/v1/namespaces/soak/pods");
    return list.items.filter((p: any) => p.status?.phase === "Running").length;
  };

  // PODS in all: the four special ones, the churn slots, the rest stable.
  await create("crashloop", ["sh", "-c", "sleep 5; exit 1"]);
  await create("liveness-fail", ["sleep", "1000000"], { livenessProbe: { exec: { command: ["false"] }, initialDelaySeconds: 20, periodSeconds: 10, failureThreshold: 1 } });
  await create("readiness-fail", ["sleep", "1000000"], { readinessProbe: { exec: { command: ["false"] }, periodSeconds: 5 } });
  // About 40 KB/s of log lines: a 256Ki file is rotated every few seconds of the agent's log monitor.
  await create("logger", ["sh", "-c", "while true; do seq 1 8000; sleep 1; done"]);
  const SPECIAL = 4;
  let generation = 0;
  const churn = Array.from({ length: CHURN_PODS }, (_, i) => `churn-${i}-g0`);
  const stable = Array.from({ length: PODS - SPECIAL - CHURN_PODS }, (_, i) => `stable-${i}`);
  for (const name of [...stable, ...churn]) await create(name);
  const t0 = performance.now();
  // The crash-looping pod's phase stays Running too, but it is not counted on.
  await eventually(`${PODS - 1} pods Running`, async () => (await runningCount()) >= PODS - 1, 600_000, 2000);
  console.log(`${PODS} pods up in ${((performance.now() - t0) / 1000).toFixed(1)} s; soaking for ${MINUTES} min`);

  // Rotated log files of the logger, by name, as seen at each sample.
  const rotatedSeen = new Set<string>();
  const noteRotated = () => {
    for (const podDir of readdirSync(agent.podLogsDir).filter((d) => d.startsWith("soak_logger_"))) {
      const containerDir = join(agent.podLogsDir, podDir, "c");
      for (const file of readdirSync(containerDir, { withFileTypes: true })) if (/\.log\.\d{8}-\d{6}(\.gz)?$/.test(file.name)) rotatedSeen.add(file.name.replace(/\.gz$/, ""));
    }
  };
  const pid = agent.pid()!;
  const samples: Sample[] = [sample(pid, t0)];
  const end = performance.now() + MINUTES * 60_000;
  let nextChurn = performance.now() + CHURN_SECONDS * 1000;
  while (performance.now() < end) {
    await Bun.sleep(SAMPLE_SECONDS * 1000);
    samples.push(sample(pid, t0));
    try {
      noteRotated();
    } catch {
      // The directory is being rotated under us: the next sample sees it.
    }
    if (performance.now() >= nextChurn) {
      generation++;
      for (let i = 0; i < churn.length; i++) {
        await remove(churn[i]!);
        churn[i] = `churn-${i}-g${generation}`;
        await create(churn[i]!);
      }
      nextChurn += CHURN_SECONDS * 1000;
    }
    const last = samples.at(-1)!;
    process.stdout.write(`t=${last.s.toFixed(0)}s rss=${last.rssMiB.toFixed(1)}MiB cpu=${last.cpuSeconds.toFixed(1)}s churned=${generation * churn.length}\n`);
  }

  // Warm-up: the first third (pods starting, caches filling) is left out of the slope.
  const steady = samples.filter((s) => s.s >= samples.at(-1)!.s / 3);
  const rssSlopePerHour = slope(steady.map((s) => ({ x: s.s / 3600, y: s.rssMiB })));
  const first = steady[0]!;
  const last = samples.at(-1)!;
  const cpuPercent = ((last.cpuSeconds - first.cpuSeconds) / (last.s - first.s)) * 100;
  const restartsOf = async (name: string) => ((await rest.request<any>("GET", `/api/v1/namespaces/soak/pods/${name}`)).status?.containerStatuses?.[0]?.restartCount ?? 0) as number;
  const restarts = await restartsOf("crashloop");
  const livenessRestarts = await restartsOf("liveness-fail");
  const mean = (xs: Sample[]) => xs.reduce((a, s) => a + s.rssMiB, 0) / xs.length;
  const afterWarmup = samples.filter((s) => s.s >= WARMUP_SECONDS && s.s < WARMUP_SECONDS + 300);
  const atEnd = samples.filter((s) => s.s >= last.s - 300);
  const baseline = afterWarmup.length > 0 ? mean(afterWarmup) : NaN;
  const growth = (mean(atEnd) / baseline - 1) * 100;
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, "samples.json"), JSON.stringify({ pods: PODS, churnSeconds: CHURN_SECONDS, samples }, null, 1));
  if (afterWarmup.length > 0) {
    const title = `Agent RSS, ${PODS} pods with churn, ${(last.s / 60).toFixed(0)} minutes`;
    writeFileSync(join(OUT, "soak-rss.svg"), renderSoakChart(samples, { title, baselineMiB: baseline, warmupSeconds: WARMUP_SECONDS }));
  }
  console.log("\nsoak result");
  console.log(`  pods                 ${PODS} (${churn.length} replaced every ${CHURN_SECONDS}s, ${generation * churn.length} in all; 1 crash-looping, ${restarts} restarts)`);
  console.log(`  probe failures       liveness-fail restarted ${livenessRestarts} times; readiness-fail failed every 5 s`);
  console.log(`  log rotation         ${rotatedSeen.size} rotated files of the logger seen`);
  console.log(`  duration             ${(last.s / 60).toFixed(1)} min, ${samples.length} samples every ${SAMPLE_SECONDS}s`);
  console.log(
    `  RSS                  start ${samples[0]!.rssMiB.toFixed(1)} MiB, min ${Math.min(...samples.map((s) => s.rssMiB)).toFixed(1)}, max ${Math.max(...samples.map((s) => s.rssMiB)).toFixed(1)}, end ${last.rssMiB.toFixed(1)} MiB`,
  );
  console.log(
    `  RSS growth           ${growth.toFixed(1)}% from ${baseline.toFixed(1)} MiB (mean of minutes ${WARMUP_SECONDS / 60}-${WARMUP_SECONDS / 60 + 5}) to ${mean(atEnd).toFixed(1)} MiB (mean of the last 5)`,
  );
  console.log(`  RSS slope            ${rssSlopePerHour.toFixed(2)} MiB/hour (least squares after the first third)`);
  console.log(`  agent CPU            ${cpuPercent.toFixed(1)}% of one core on average after warm-up`);
  await agent.kill("SIGTERM");
} finally {
  await Promise.all([ctd.stop(), cp.stop()]);
}
