// Side-by-side benchmark: this agent (dist/kubelet, as the integration
// harness runs it) and the upstream kubelet (built from the same Kubernetes
// release as the control plane), one after the other, on one private
// containerd and one private control plane. For each: process start → node
// Ready, RSS and CPU idle (the first 10 s after Ready, and a steady window
// after a settle: CPU, RSS and the API load, requests per node-hour from the
// API server's audit log and bytes through a byte-counting pass-through, as
// bench:idle measures them), pod startup latency (API create → Running seen by
// a watch) for 30 and 110 pods created at once, RSS and CPU with 110 pods;
// plus the runtime's own floor for the same pods (sandbox + create + start
// straight through the CRI), and where the machine's CPU went while each batch
// started (the agent, the control plane, the runtime and the rest: on a
// machine the runtime alone keeps busy, the first two are time the runtime
// waits for a core). The floor is measured before the first agent and
// again after each one, and an agent is held against the floors on both sides
// of it, pooled: containerd gets slower over its life (the 30-pod floor
// measured second was the higher one, by 2% to 41%, in all 7 runs of
// 2026-11-22 that kept both; with no agent at all it rose from 2.7 to 3.3 s
// over a few minutes of batches), so a floor from one side only favours or
// handicaps whichever agent runs first. Every measurement also waits for the
// machine to be quiet, so none starts in the tail of the previous one's work.
// Prints a table and writes an SVG chart of the latency distributions.
//
// Run: bun run bench   (root; builds dist/kubelet first; several minutes)
// Environment: BENCH_AGENTS=bunlet,upstream (which to run, in order;
// upstream,bunlet to swap who gets the fresher containerd),
// BENCH_SIZES=30,110, BENCH_CHART=docs/benchmarks/startup-latency.svg,
// BENCH_STEADY_SECONDS=120 (the steady idle window; 0 skips it) after
// BENCH_STEADY_SETTLE_SECONDS=60 from Ready,
// BENCH_BUNLET_ENV="BUN_JSC_useJIT=0 ..." (variables for this agent only, e.g.
// JavaScriptCore options; not for the benchmark's own process, whose watch
// times the pods), BENCH_BUNLET_ARGS="--v=10" (flags added to this agent's,
// e.g. a verbosity whose log gives each pod's timeline; it costs CPU).
import { tmpdir } from "node:os";
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createRestClient, loadCredentials, type RestClient, type WatchEvent } from "../../src/api/rest.ts";
import { createCriClient } from "../../src/cri/client.ts";
import { realClock } from "../../src/util/clock.ts";
import { createLogger } from "../../src/util/log.ts";
import { freePort, startAgent } from "../../test/harness/agent.ts";
import { type ContainerdHandle, requireRoot, startContainerd } from "../../test/harness/containerd.ts";
import { type ControlPlaneHandle, startControlPlane } from "../../test/harness/controlplane.ts";
import { startUpstreamKubelet } from "../../test/harness/upstream-kubelet.ts";
import { apiLoad, readAudit } from "./audit.ts";
import { startByteCounter } from "./byte-counter.ts";
import { renderChart, type Series } from "./chart.ts";
import { runBenchSandbox, startBenchContainer } from "./cri-pod.ts";
import { CLK_TCK, cpuTicks, machineTicks, rssMiB, ticksOfCommands } from "./proc.ts";

const repoRoot = resolve(import.meta.dir, "../..");
const AGENTS = (process.env.BENCH_AGENTS ?? "bunlet,upstream").split(",").filter(Boolean) as AgentKind[];
const SIZES = (process.env.BENCH_SIZES ?? "30,110").split(",").map(Number);
const CHART = resolve(repoRoot, process.env.BENCH_CHART ?? "docs/benchmarks/startup-latency.svg");
const BUNLET_ENV = Object.fromEntries(
  (process.env.BENCH_BUNLET_ENV ?? "")
    .split(/\s+/)
    .filter(Boolean)
    .map((kv) => {
      const eq = kv.indexOf("=");
      if (eq < 1) throw new Error(`BENCH_BUNLET_ENV: ${JSON.stringify(kv)} is not NAME=VALUE`);
      return [kv.slice(0, eq), kv.slice(eq + 1)];
    }),
);
const BUNLET_ARGS = (process.env.BENCH_BUNLET_ARGS ?? "").split(/\s+/).filter(Boolean);
const NAMESPACE = "bench";
const WINDOW_MS = 10_000;
const STEADY_MS = Number(process.env.BENCH_STEADY_SECONDS ?? 120) * 1000;
const STEADY_SETTLE_MS = Number(process.env.BENCH_STEADY_SETTLE_SECONDS ?? 60) * 1000;
const LOGS = join(tmpdir(), `bunlet-bench-logs-${new Date().toISOString().replace(/[:.]/g, "-")}`);
const AUDIT = join(LOGS, "audit.log");

type AgentKind = "bunlet" | "upstream";

interface Usage {
  rssMiB: number;
  cpuPercent: number;
}

/** The steady idle window: usage and what the node cost the API server, per node-hour. */
interface Steady extends Usage {
  seconds: number;
  requestsPerHour: number;
  watchesPerHour: number;
  leaseUpdatesPerHour: number;
  sentKiBPerHour: number;
  receivedKiBPerHour: number;
}

interface AgentResult {
  kind: AgentKind;
  binary: string;
  binaryBytes: number;
  readyMs: number;
  idle: Usage;
  steady: Steady | undefined;
  busy: Usage;
  /** After the largest batch was deleted: does the memory come back? */
  after: Usage;
  latencies: Map<number, number[]>;
  /** The runtime floor measured just before this agent started and just after it stopped, per batch size. */
  floorBefore: Floors;
  floorAfter: Floors;
  /** Where the machine's CPU went from the first create until every pod was Running, per batch size. */
  startCpu: Map<number, StartCpu>;
}

/** The floors of one measurement, per batch size: each pod's start, and the machine's CPU while they started. */
interface Floors {
  latencies: Map<number, number[]>;
  cpu: Map<number, StartCpu>;
}

/**
 * The machine's CPU while a batch of pods started, in CPU seconds: all of
 * it, the agent's (none for the floor), the control plane's and this
 * benchmark's own (its watch and API calls). What is left is the runtime
 * (containerd, its shims, runc, the CNI plugins) and the kernel. On a machine
 * the runtime alone keeps busy, every CPU second the agent and the control
 * plane spend is time the runtime waits for a core.
 */
interface StartCpu {
  wallSeconds: number;
  machineSeconds: number;
  agentSeconds: number;
  controlPlaneSeconds: number;
  benchSeconds: number;
}

// /proc/PID/comm keeps 15 characters: kube-controller-manager is "kube-controller".
const CONTROL_PLANE_COMMANDS = ["kube-apiserver", "etcd", "kube-scheduler", "kube-controller"];

async function withStartCpu<T>(agentPid: number | undefined, run: () => Promise<T>): Promise<{ result: T; cpu: StartCpu }> {
  const agentTicks = () => (agentPid === undefined ? 0 : cpuTicks(agentPid));
  const benchSeconds = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  };
  const [t0, m0, a0, c0, b0] = [performance.now(), machineTicks().busy, agentTicks(), ticksOfCommands(CONTROL_PLANE_COMMANDS), benchSeconds()];
  const result = await run();
  const cpu: StartCpu = {
    wallSeconds: (performance.now() - t0) / 1000,
    machineSeconds: (machineTicks().busy - m0) / CLK_TCK,
    agentSeconds: (agentTicks() - a0) / CLK_TCK,
    controlPlaneSeconds: (ticksOfCommands(CONTROL_PLANE_COMMANDS) - c0) / CLK_TCK,
    benchSeconds: benchSeconds() - b0,
  };
  return { result, cpu };
}

interface RunningAgent {
  kind: AgentKind;
  pid: number;
  binary: string;
  logFile: string;
  stop(): Promise<void>;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;

/** CPU use over a window of `ms` and RSS (mean of one sample a second). */
async function measureUsage(pid: number, ms = WINDOW_MS): Promise<Usage> {
  const t0 = performance.now();
  const c0 = cpuTicks(pid);
  const rss: number[] = [];
  while (performance.now() - t0 < ms) {
    await Bun.sleep(1000);
    rss.push(rssMiB(pid));
  }
  const seconds = (performance.now() - t0) / 1000;
  return { rssMiB: rss.reduce((a, b) => a + b, 0) / rss.length, cpuPercent: ((cpuTicks(pid) - c0) / CLK_TCK / seconds) * 100 };
}

/**
 * Waits until the whole machine has been at least 85% idle over a 2-second
 * window (at most 90 s), so no measurement starts in the tail of the previous
 * one's work: runc and the kernel keep tearing down namespaces and cgroups
 * after the CRI has answered.
 */
async function waitQuiet(what: string): Promise<void> {
  const t0 = performance.now();
  for (;;) {
    const a = machineTicks();
    await Bun.sleep(2000);
    const b = machineTicks();
    const busy = (b.busy - a.busy) / Math.max(1, b.total - a.total);
    if (busy <= 0.15) return void console.error(`bench: quiet before ${what} after ${((performance.now() - t0) / 1000).toFixed(0)} s (${(busy * 100).toFixed(0)}% busy)`);
    if (performance.now() - t0 > 90_000) return void console.error(`bench: not quiet before ${what} after 90 s (${(busy * 100).toFixed(0)}% busy); measuring anyway`);
  }
}

async function withTimeout<T>(what: string, p: Promise<T>, ms: number): Promise<T> {
  let timer: Timer | undefined;
  const timeout = new Promise<never>((_, rej) => {
    timer = setTimeout(() => rej(new Error(`${what}: timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The runtime's floor: N pods' sandbox + create + start straight through the CRI, all at once. */
async function runtimeFloor(ctd: ContainerdHandle, count: number): Promise<number[]> {
  const cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  try {
    const results = await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const t0 = performance.now();
        await startBenchContainer(cri, ctd, await runBenchSandbox(cri, ctd, "bench-floor", `floor-${count}-${i}`));
        return performance.now() - t0;
      }),
    );
    return results.sort((a, b) => a - b);
  } finally {
    cri.close();
  }
  // (The floor's sandboxes are removed by emptyRuntime before the next step.)
}

/**
 * Waits until no sandbox is ready and no container runs (the agent has
 * stopped its pods), then removes what is left, so every step starts from an
 * empty runtime. `timeoutMs` 0: stop and remove everything now (the floor's pods).
 */
async function emptyRuntime(ctd: ContainerdHandle, timeoutMs = 180_000): Promise<void> {
  const cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const sandboxes = await cri.listPodSandbox(undefined);
      const containers = await cri.listContainers(undefined);
      const busy = sandboxes.filter((s) => s.state === 0).length + containers.filter((c) => c.state === 1).length;
      if (busy === 0 || Date.now() >= deadline) {
        // Stopped leftovers (the agent's garbage collector removes them later) and, after a timeout, anything else.
        await Promise.all(
          sandboxes.map((s) =>
            cri
              .stopPodSandbox(s.id)
              .then(() => cri.removePodSandbox(s.id))
              .catch(() => {}),
          ),
        );
        if (busy !== 0 && timeoutMs > 0) console.error(`bench: runtime not empty after ${timeoutMs} ms (${busy} ready sandboxes/running containers); removed them`);
        return;
      }
      await Bun.sleep(250);
    }
  } finally {
    cri.close();
  }
}

/** Process start → the node's Ready condition True, seen through a watch on the Node. */
async function waitNodeReady(rest: RestClient, node: string, since: number): Promise<number> {
  const abort = new AbortController();
  const ready = Promise.withResolvers<number>();
  const isReady = (n: any) => n?.status?.conditions?.find((c: any) => c.type === "Ready")?.status === "True";
  // The watch ends when the server closes it (about every few minutes) or on errors: start it again.
  void (async () => {
    while (!abort.signal.aborted) {
      await rest
        .watch(
          "/api/v1/nodes",
          { fieldSelector: `metadata.name=${node}`, allowWatchBookmarks: false },
          (e: WatchEvent) => {
            if ((e.type === "ADDED" || e.type === "MODIFIED") && isReady(e.object)) ready.resolve(performance.now() - since);
          },
          abort.signal,
        )
        .catch(() => {});
      if (!abort.signal.aborted) await Bun.sleep(50);
    }
  })();
  try {
    return await withTimeout(`node ${node} Ready`, ready.promise, 120_000);
  } finally {
    abort.abort();
  }
}

/** N pods bound to `node`, created at once; for each, API create → first watch event with phase Running (sorted, ms). */
async function podStartup(rest: RestClient, ctd: ContainerdHandle, node: string, runId: string, count: number): Promise<number[]> {
  const selector = `bench-run=${runId}`;
  const path = `/api/v1/namespaces/${NAMESPACE}/pods`;
  const list = await rest.request<any>("GET", path, { query: { labelSelector: selector } });
  const created = new Map<string, number>();
  const running = new Map<string, number>();
  const abort = new AbortController();
  const allRunning = Promise.withResolvers<void>();
  const observe = (pod: any) => {
    if (pod?.status?.phase === "Running" && !running.has(pod.metadata.name)) {
      running.set(pod.metadata.name, performance.now());
      if (running.size === count) allRunning.resolve();
    }
  };
  // A watch the server ends (or an ERROR event, e.g. an expired resource version) is followed by a list and a
  // new watch; pods the list first shows Running are timed at that list, later than they were: counted and reported.
  let rewatches = 0;
  const watching = (async () => {
    let resourceVersion = list.metadata.resourceVersion;
    while (!abort.signal.aborted) {
      await rest
        .watch(
          path,
          { labelSelector: selector, resourceVersion },
          (e: WatchEvent) => {
            if (e.type === "ERROR") console.error(`bench: ${runId}: watch ERROR event: ${JSON.stringify(e.object)}`);
            else observe(e.object);
          },
          abort.signal,
        )
        .then(
          () => "ended by the server",
          (err) => String(err),
        )
        .then((why) => {
          if (!abort.signal.aborted) console.error(`bench: ${runId}: the pod watch ${why}; listing and watching again`);
        });
      if (abort.signal.aborted) return;
      rewatches++;
      const again = await rest.request<any>("GET", path, { query: { labelSelector: selector } }).catch(() => undefined);
      if (!again) {
        await Bun.sleep(200);
        continue;
      }
      for (const pod of again.items) observe(pod);
      resourceVersion = again.metadata.resourceVersion;
    }
  })();
  try {
    await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const name = `${runId}-${i}`;
        created.set(name, performance.now());
        await rest.request("POST", `/api/v1/namespaces/${NAMESPACE}/pods`, {
          body: {
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name, labels: { "bench-run": runId } },
            spec: {
              nodeName: node,
              terminationGracePeriodSeconds: 1,
              containers: [{ name: "c", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }],
            },
          },
        });
      }),
    );
    await withTimeout(`${count} pods Running on ${node} (${running.size} were)`, allRunning.promise, 300_000);
  } finally {
    abort.abort();
    await watching;
  }
  if (rewatches > 0) console.error(`bench: ${runId}: the pod watch was restarted ${rewatches} time(s)`);
  return [...created].map(([name, t]) => running.get(name)! - t).sort((a, b) => a - b);
}

/** Deletes the run's pods, waits until the API has none and the runtime is empty. */
async function deletePods(rest: RestClient, ctd: ContainerdHandle, runId: string): Promise<void> {
  const selector = `bench-run=${runId}`;
  await rest.request("DELETE", `/api/v1/namespaces/${NAMESPACE}/pods`, { query: { labelSelector: selector } });
  const deadline = Date.now() + 180_000;
  for (;;) {
    const list = await rest.request<any>("GET", `/api/v1/namespaces/${NAMESPACE}/pods`, { query: { labelSelector: selector } });
    if (list.items.length === 0) break;
    if (Date.now() > deadline) throw new Error(`${list.items.length} pods of ${runId} still in the API after 180 s`);
    await Bun.sleep(500);
  }
  await emptyRuntime(ctd);
}

function startBunlet(ctd: ContainerdHandle, cp: ControlPlaneHandle, node: string, kubeconfig: string): Promise<RunningAgent> {
  const binary = resolve(repoRoot, process.env.BUNLET_BINARY ?? "dist/kubelet");
  if (!existsSync(binary)) throw new Error(`${binary} not found: run \`bun run build\` (bun run bench does)`);
  process.env.BUNLET_BINARY = binary;
  return startAgent(ctd, {
    name: "bunlet",
    nodeName: node,
    extraArgs: [`--kubeconfig=${kubeconfig}`, "--node-ip=127.0.0.1", ...BUNLET_ARGS],
    extraConfig: { authentication: { x509: { clientCAFile: cp.caFile }, webhook: { enabled: true }, anonymous: { enabled: false } }, authorization: { mode: "Webhook" } },
    ...(Object.keys(BUNLET_ENV).length ? { env: BUNLET_ENV } : {}),
  }).then((agent) => ({
    kind: "bunlet" as const,
    pid: agent.pid()!,
    binary,
    logFile: agent.logFile,
    stop: async () => {
      await agent.kill("SIGTERM");
    },
  }));
}

async function startUpstream(ctd: ContainerdHandle, cp: ControlPlaneHandle, node: string, kubeconfig: string): Promise<RunningAgent> {
  const dir = join(ctd.dir, "agent-upstream");
  const kubelet = startUpstreamKubelet(ctd, {
    binDir: cp.binDir,
    dir,
    nodeName: node,
    rootDir: join(dir, "root"),
    podLogsDir: join(dir, "pod-logs"),
    kubeconfig,
    clientCAFile: cp.caFile,
    healthzPort: await freePort(),
    port: await freePort(),
  });
  return { kind: "upstream", pid: kubelet.pid, binary: kubelet.binary, logFile: kubelet.logFile, stop: () => kubelet.stop() };
}

/** The runtime floor for every batch size, from a quiet machine and an empty runtime; none of the agents may run. */
async function measureFloors(ctd: ContainerdHandle, when: string): Promise<Floors> {
  const floors: Floors = { latencies: new Map(), cpu: new Map() };
  for (const count of SIZES) {
    await waitQuiet(`the floor ${when}, ${count} pods`);
    const { result: f, cpu } = await withStartCpu(undefined, () => runtimeFloor(ctd, count));
    floors.latencies.set(count, f);
    floors.cpu.set(count, cpu);
    console.error(`bench: floor ${when}: ${count} pods, p50 ${percentile(f, 50).toFixed(0)} ms, p99 ${percentile(f, 99).toFixed(0)} ms`);
    await emptyRuntime(ctd, 0);
  }
  return floors;
}

/** The floors on both sides of an agent's run, as one sample: neither side alone is fair to it (see the top). */
function pooledFloor(r: AgentResult, count: number): number[] {
  return [...r.floorBefore.latencies.get(count)!, ...r.floorAfter.latencies.get(count)!].sort((a, b) => a - b);
}

/** The floors' CPU on both sides of an agent's run, averaged. */
function pooledFloorCpu(r: AgentResult, count: number, pick: (c: StartCpu) => number): number {
  return (pick(r.floorBefore.cpu.get(count)!) + pick(r.floorAfter.cpu.get(count)!)) / 2;
}

type AgentFigures = Omit<AgentResult, "floorBefore" | "floorAfter">;

async function benchAgent(kind: AgentKind, ctd: ContainerdHandle, cp: ControlPlaneHandle, rest: RestClient): Promise<AgentFigures> {
  const node = `${kind}-node`;
  mkdirSync(LOGS, { recursive: true });
  // Each agent reaches the API server through its own counter: the server's byte metrics have no client label.
  const bytes = await startByteCounter(cp.apiServerUrl);
  const kubeconfig = bytes.kubeconfig(await cp.nodeKubeconfig(node), join(LOGS, `${node}.kubeconfig`));
  console.error(`bench: ${kind}: starting`);
  const t0 = performance.now();
  const agent = kind === "bunlet" ? await startBunlet(ctd, cp, node, kubeconfig) : await startUpstream(ctd, cp, node, kubeconfig);
  try {
    const readyMs = await waitNodeReady(rest, node, t0).catch((err) => {
      throw new Error(`${err.message}; the agent's log: ${agent.logFile}\n${readFileSync(agent.logFile, "utf8").split("\n").slice(-30).join("\n")}`);
    });
    console.error(`bench: ${kind}: node Ready after ${readyMs.toFixed(0)} ms; measuring idle`);
    const idle = await measureUsage(agent.pid);
    let steady: Steady | undefined;
    if (STEADY_MS > 0) {
      await Bun.sleep(STEADY_SETTLE_MS);
      console.error(`bench: ${kind}: steady idle window, ${STEADY_MS / 1000} s`);
      const [w0, s0, r0] = [Date.now(), bytes.sent(), bytes.received()];
      const usage = await measureUsage(agent.pid, STEADY_MS);
      const [w1, s1, r1] = [Date.now(), bytes.sent(), bytes.received()];
      await Bun.sleep(3000); // the audit backend writes in batches
      const load = apiLoad(readAudit(AUDIT), (u) => u === `system:node:${node}`, w0, w1);
      const hours = (w1 - w0) / 3_600_000;
      const count = (pick: (key: string) => boolean) => [...load.requests].filter(([k]) => pick(k)).reduce((a, [, n]) => a + n, 0) / hours;
      steady = {
        ...usage,
        seconds: (w1 - w0) / 1000,
        requestsPerHour: count(() => true),
        watchesPerHour: count((k) => k.startsWith("watch ")),
        leaseUpdatesPerHour: count((k) => k === "update leases"),
        sentKiBPerHour: (s1 - s0) / 1024 / hours,
        receivedKiBPerHour: (r1 - r0) / 1024 / hours,
      };
    }
    const latencies = new Map<number, number[]>();
    const startCpu = new Map<number, StartCpu>();
    let busy: Usage = { rssMiB: NaN, cpuPercent: NaN };
    for (const count of SIZES) {
      const runId = `${kind}-${count}`;
      await waitQuiet(`${kind}'s ${count} pods`);
      const { result: l, cpu } = await withStartCpu(agent.pid, () => podStartup(rest, ctd, node, runId, count));
      startCpu.set(count, cpu);
      latencies.set(count, l);
      console.error(`bench: ${kind}: ${count} pods Running, p50 ${percentile(l, 50).toFixed(0)} ms, p99 ${percentile(l, 99).toFixed(0)} ms`);
      if (count === Math.max(...SIZES)) {
        await Bun.sleep(5000);
        busy = await measureUsage(agent.pid);
      }
      const d0 = performance.now();
      await deletePods(rest, ctd, runId);
      console.error(`bench: ${kind}: ${count} pods deleted and the runtime empty after ${(performance.now() - d0).toFixed(0)} ms`);
    }
    await Bun.sleep(5000);
    const after = await measureUsage(agent.pid);
    return { kind, binary: agent.binary, binaryBytes: statSync(agent.binary).size, readyMs, idle, steady, busy, after, latencies, startCpu };
  } finally {
    await agent.stop();
    await bytes.close();
    // Kept after the run (the bench directory is removed with containerd).
    mkdirSync(LOGS, { recursive: true });
    copyFileSync(agent.logFile, join(LOGS, `${kind}.log`));
  }
}

const runtimeSeconds = (c: StartCpu) => c.machineSeconds - c.agentSeconds - c.controlPlaneSeconds - c.benchSeconds;

function table(results: AgentResult[]): string {
  const ours = results.find((r) => r.kind === "bunlet");
  const theirs = results.find((r) => r.kind === "upstream");
  const lines: string[] = [];
  const header = ["figure", "bunlet", "upstream kubelet", "bunlet / upstream", "floor around bunlet", "bunlet / floor", "floor around upstream", "upstream / floor"];
  lines.push(`| ${header.join(" | ")} |`, `| ${header.map((_, i) => (i === 0 ? "---" : "---:")).join(" | ")} |`);
  const fmt = (v: number | undefined, unit: string, digits = 0) => (v === undefined || Number.isNaN(v) ? "–" : `${v.toFixed(digits)} ${unit}`);
  const ratio = (a: number | undefined, b: number | undefined) =>
    a === undefined || b === undefined || Number.isNaN(a) || Number.isNaN(b) || b === 0 ? "–" : `${(a / b).toFixed(2)}x`;
  const row = (name: string, a: number | undefined, b: number | undefined, unit: string, digits = 0, fa?: number, fb?: number) =>
    lines.push(
      `| ${name} | ${fmt(a, unit, digits)} | ${fmt(b, unit, digits)} | ${ratio(a, b)} | ${fmt(fa, unit, digits)} | ${ratio(a, fa)} | ${fmt(fb, unit, digits)} | ${ratio(b, fb)} |`,
    );
  for (const count of SIZES) {
    for (const p of [50, 99]) {
      const pick = (m?: Map<number, number[]>) => (m?.get(count) ? percentile(m.get(count)!, p) : undefined);
      const floor = (r?: AgentResult) => (r ? percentile(pooledFloor(r, count), p) : undefined);
      row(`${count} pods at once, create → Running p${p}`, pick(ours?.latencies), pick(theirs?.latencies), "ms", 0, floor(ours), floor(theirs));
    }
  }
  const cores = navigator.hardwareConcurrency;
  for (const count of SIZES) {
    const cpu = (r: AgentResult | undefined, pick: (c: StartCpu) => number) => (r?.startCpu.get(count) ? pick(r.startCpu.get(count)!) : undefined);
    const floorCpu = (r: AgentResult | undefined, pick: (c: StartCpu) => number) => (r ? pooledFloorCpu(r, count, pick) : undefined);
    const both = (name: string, pick: (c: StartCpu) => number, unit: string, digits: number, withFloor: boolean) =>
      row(name, cpu(ours, pick), cpu(theirs, pick), unit, digits, withFloor ? floorCpu(ours, pick) : undefined, withFloor ? floorCpu(theirs, pick) : undefined);
    both(`agent CPU time to start the ${count} pods`, (c) => c.agentSeconds, "s", 1, false);
    both(`machine busy while the ${count} pods start (share of ${cores} cores)`, (c) => (c.machineSeconds / (c.wallSeconds * cores)) * 100, "%", 0, true);
    both(`machine CPU while the ${count} pods start`, (c) => c.machineSeconds, "s", 1, true);
    both("of which the control plane (API server, etcd, scheduler, controller-manager)", (c) => c.controlPlaneSeconds, "s", 1, true);
    both("of which the runtime, the kernel and the rest (machine − agent − control plane − this benchmark)", runtimeSeconds, "s", 1, true);
  }
  row("process start → node Ready", ours?.readyMs, theirs?.readyMs, "ms");
  row("RSS idle", ours?.idle.rssMiB, theirs?.idle.rssMiB, "MiB", 1);
  row(`RSS with ${Math.max(...SIZES)} pods`, ours?.busy.rssMiB, theirs?.busy.rssMiB, "MiB", 1);
  row(`RSS idle again, after deleting the ${Math.max(...SIZES)} pods`, ours?.after.rssMiB, theirs?.after.rssMiB, "MiB", 1);
  row("CPU in the first 10 s after node Ready (one core = 100%)", ours?.idle.cpuPercent, theirs?.idle.cpuPercent, "%", 1);
  const st = ours?.steady ?? theirs?.steady;
  if (st) {
    const w = `steady idle, ${(st.seconds / 60).toFixed(0)} min from ${STEADY_SETTLE_MS / 1000} s after Ready`;
    row(`CPU ${w}`, ours?.steady?.cpuPercent, theirs?.steady?.cpuPercent, "%", 2);
    row(`RSS ${w}`, ours?.steady?.rssMiB, theirs?.steady?.rssMiB, "MiB", 1);
    row(`API requests per node-hour, ${w} (audit log)`, ours?.steady?.requestsPerHour, theirs?.steady?.requestsPerHour, "");
    row("of which lease updates", ours?.steady?.leaseUpdatesPerHour, theirs?.steady?.leaseUpdatesPerHour, "");
    row("of which watches started", ours?.steady?.watchesPerHour, theirs?.steady?.watchesPerHour, "");
    row("KiB sent to the API server per node-hour (on the wire, TLS)", ours?.steady?.sentKiBPerHour, theirs?.steady?.sentKiBPerHour, "KiB");
    row("KiB received from the API server per node-hour (on the wire, TLS)", ours?.steady?.receivedKiBPerHour, theirs?.steady?.receivedKiBPerHour, "KiB");
  }
  row(`CPU with ${Math.max(...SIZES)} pods`, ours?.busy.cpuPercent, theirs?.busy.cpuPercent, "%", 1);
  row("binary size", ours && ours.binaryBytes / 2 ** 20, theirs && theirs.binaryBytes / 2 ** 20, "MiB", 1);
  return lines.join("\n");
}

/** Every floor of the run in the order it was measured, so a reader sees how far it moved. */
function floorTable(floors: { when: string; values: Floors }[]): string {
  const header = ["runtime floor, measured", ...SIZES.flatMap((n) => [`${n} pods p50`, `${n} pods p99`])];
  const lines = [`| ${header.join(" | ")} |`, `| ${header.map((_, i) => (i === 0 ? "---" : "---:")).join(" | ")} |`];
  for (const f of floors) lines.push(`| ${f.when} | ${SIZES.flatMap((n) => [50, 99].map((p) => `${percentile(f.values.latencies.get(n)!, p).toFixed(0)} ms`)).join(" | ")} |`);
  return lines.join("\n");
}

requireRoot();
mkdirSync(LOGS, { recursive: true });
const auditPolicy = join(LOGS, "audit-policy.yaml");
writeFileSync(
  auditPolicy,
  ["apiVersion: audit.k8s.io/v1", "kind: Policy", "omitStages: [RequestReceived]", "rules:", "- level: Metadata", "  userGroups: [system:nodes]", "- level: None", ""].join("\n"),
);
const [ctd, cp] = await Promise.all([
  startContainerd({ name: "bench" }),
  startControlPlane({
    name: "bench",
    apiServerArgs: [`--audit-policy-file=${auditPolicy}`, `--audit-log-path=${AUDIT}`, "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s"],
  }),
]);
try {
  const rest = createRestClient({
    credentials: await loadCredentials(cp.adminKubeconfig),
    qps: 0,
    burst: 0,
    clock: realClock,
    logger: createLogger({ verbosity: 0 }),
    userAgent: "bench",
  });
  await rest.request("POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name: NAMESPACE } } });
  // The pods use the namespace's default ServiceAccount (a projected token volume), as pods usually do.
  const deadline = Date.now() + 60_000;
  while (
    !(await rest.request("GET", `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/default`).then(
      () => true,
      () => false,
    ))
  ) {
    if (Date.now() > deadline) throw new Error("no default ServiceAccount in the bench namespace after 60 s");
    await Bun.sleep(200);
  }

  // A warm-up round: the first sandboxes after containerd starts pay for one-time work (snapshots, CNI setup).
  await runtimeFloor(ctd, 5);
  await emptyRuntime(ctd, 0);

  // F0, agent 1, F1, agent 2, F2: each agent is held against the floors on both sides of it.
  const floors = [{ when: `before ${AGENTS[0]}`, values: await measureFloors(ctd, `before ${AGENTS[0]}`) }];
  const results: AgentResult[] = [];
  for (const kind of AGENTS) {
    const figures = await benchAgent(kind, ctd, cp, rest);
    await emptyRuntime(ctd);
    const after = { when: `after ${kind}`, values: await measureFloors(ctd, `after ${kind}`) };
    results.push({ ...figures, floorBefore: floors.at(-1)!.values, floorAfter: after.values });
    floors.push(after);
  }

  // The runtime that ran (BUNLET_RUNTIME): its own binaries (beside its ctr for containerd 2.x), not PATH's 1.6.
  const runtimeBin = (name: string) => (ctd.ctr === "ctr" ? name : join(dirname(ctd.ctr), name));
  const versionWord = (name: string, word: number) =>
    Bun.spawnSync([runtimeBin(name), "--version"])
      .stdout.toString()
      .trim()
      .split(/\s+/)[word] ?? "?";
  const ctdVersion = `${versionWord("containerd", 2)} (${ctd.runtime}, ${runtimeBin("containerd")}), runc ${versionWord("runc", 2)}`;
  const memGiB = Number(/MemTotal:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0) / 2 ** 20;
  const kernel = readFileSync("/proc/sys/kernel/osrelease", "utf8").trim();
  const machine = `${navigator.hardwareConcurrency} CPUs, ${memGiB.toFixed(1)} GiB, Linux ${kernel}, containerd ${ctdVersion}, Kubernetes ${cp.kubernetesVersion} (control plane and upstream kubelet)`;
  const date = new Date().toISOString().slice(0, 16).replace("T", " ") + " UTC";
  console.log(`\n${date}; ${machine}\n`);
  console.log(table(results));
  console.log(
    `\nThe floors (sandbox + create + start straight through the CRI, all at once), in the order measured; "floor around" above pools the two on either side of an agent:\n\n${floorTable(floors)}`,
  );
  for (const r of results) console.log(`\n${r.kind}: ${r.binary} (${r.binaryBytes} bytes)`);

  const series: Series[] = [];
  for (const count of SIZES) {
    const panel = `${count} pods created at once`;
    for (const r of results)
      series.push({ panel, label: r.kind === "bunlet" ? "bunlet (dist/kubelet)" : `upstream kubelet ${cp.kubernetesVersion}`, values: r.latencies.get(count)! });
    for (const r of results) series.push({ panel, label: `runtime floor around ${r.kind}`, values: pooledFloor(r, count), dashed: true });
  }
  mkdirSync(resolve(CHART, ".."), { recursive: true });
  writeFileSync(CHART, renderChart(series, `Pod startup latency, API create → Running (${date}; ${navigator.hardwareConcurrency} CPUs)`));
  console.log(`\nchart: ${CHART}\nthe agents' logs: ${LOGS}`);
} finally {
  await Promise.all([ctd.stop(), cp.stop()]);
}
