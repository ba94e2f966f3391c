// The API server's cost of many quiet nodes (issue #24): SCALE_NODES hollow
// nodes of one kind at a time against one fresh control plane, idle, and what
// the API server spends on them.
// - bunlet: whole agents with the fake CRI, several per Bun process
//   (scripts/bench/hollow.ts; SCALE_PER_PROCESS each);
// - upstream: kubemark --morph=kubelet, k8s.io/kubernetes' hollow node (the
//   kubelet with a fake runtime, cadvisor and container manager) at the
//   control plane's release (scripts/controlplane/build.sh --with-kubemark),
//   one process per node as upstream runs them.
// Per kind: a fresh control plane, a baseline window with no node, then the
// nodes, all Ready, SCALE_SETTLE_SECONDS, and a window of SCALE_MINUTES:
// - the API server's and etcd's CPU (utime + stime from /proc/<pid>/stat)
//   and the API server's RSS;
// - apiserver_request_total by verb and resource (all clients), bytes the
//   API server received (apiserver_request_body_size_bytes) and sent
//   (apiserver_response_sizes, apiserver_watch_events_sizes), watches open
//   (apiserver_longrunning_requests);
// - the nodes' own requests by verb and resource from the audit log (group
//   system:nodes; the metric has no user label), per node-hour;
// - the leases: the oldest renewal seen every 10 s, and each node's lease
//   updates in the window (on time = one every 10 s);
// - the hollow processes' CPU and RSS, and for bunlet the event loop's lag.
//
// Run: bun run bench:scale   (root)
// Environment: SCALE_NODES=100, SCALE_KINDS=bunlet,upstream, SCALE_MINUTES=5,
// SCALE_SETTLE_SECONDS=60, SCALE_BASELINE_SECONDS=60, SCALE_PER_PROCESS=50,
// BENCH_HEAVY_LOCK (held for each kind's whole run: start, windows, stop).
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createRestClient, loadCredentials, type RestClient } from "../../src/api/rest.ts";
import { realClock } from "../../src/util/clock.ts";
import { freePort } from "../../test/harness/agent.ts";
import { type ControlPlaneHandle, startControlPlane } from "../../test/harness/controlplane.ts";
import { apiLoad, readAudit } from "./audit.ts";
import { heavy as heavyLock } from "./lock.ts";
import { CLK_TCK, cpuTicks, rssMiB } from "./proc.ts";
import { delta, groups, type HollowKind, hollowNodeName, LagMeter, leaseAges, parseHollowNodeName, parsePrometheus, type Sample, sumBy, verbResource } from "./scale-lib.ts";
import { createLogger } from "../../src/util/log.ts";

const repoRoot = resolve(import.meta.dir, "../..");
const NODES = Number(process.env.SCALE_NODES ?? 100);
const KINDS = (process.env.SCALE_KINDS ?? "bunlet,upstream").split(",").filter(Boolean) as HollowKind[];
const MINUTES = Number(process.env.SCALE_MINUTES ?? 5);
const SETTLE_MS = Number(process.env.SCALE_SETTLE_SECONDS ?? 60) * 1000;
const BASELINE_MS = Number(process.env.SCALE_BASELINE_SECONDS ?? 60) * 1000;
const PER_PROCESS = Number(process.env.SCALE_PER_PROCESS ?? 50);
const LOCK = process.env.BENCH_HEAVY_LOCK;
for (const k of KINDS) if (k !== "bunlet" && k !== "upstream") throw new Error(`SCALE_KINDS: ${k} is neither bunlet nor upstream`);
const work = join(tmpdir(), `bunlet-bench-scale-${new Date().toISOString().replace(/[:.]/g, "-")}`);
const say = (line: string) => console.error(`scale: ${line}`);

interface Fleet {
  kind: HollowKind;
  /** The processes that run the nodes. */
  pids(): number[];
  /** Files of `<unix ms> <lag ms>` lines, one per event loop (bunlet only). */
  lagFiles: string[];
  stop(): Promise<void>;
}

interface Figures {
  label: string;
  seconds: number;
  apiCpu: number;
  etcdCpu: number;
  apiRssMiB: number;
  /** Per second, all clients. */
  requests: Map<string, number>;
  bytesIn: number;
  bytesOut: number;
  /** bytesOut by "verb resource[/subresource]" (apiserver_response_sizes also counts a WATCH's stream when it ends). */
  bytesOutBy: Map<string, number>;
  watchBytesOut: number;
  watchesOpen: number;
  /** The nodes' requests (audit log) per node-hour, and the nodes seen. */
  nodeRequests: Map<string, number>;
  nodeWatchesOpen: number;
  nodesSeen: number;
  /** Lease updates per node in the window: the fewest and the most. */
  leaseUpdates: { min: number; max: number };
  oldestLeaseMs: number;
  fleetCpu: number;
  fleetRssMiB: number;
  lag: { ticks: number; p50: number; p99: number; max: number } | undefined;
}

async function metrics(cp: ControlPlaneHandle): Promise<Sample[]> {
  const r = await cp.kubectl(["get", "--raw", "/metrics"]);
  if (r.code !== 0) throw new Error(`GET /metrics: ${r.stderr}`);
  return parsePrometheus(r.stdout);
}

const pct = (ticks: number, seconds: number) => (ticks / CLK_TCK / seconds) * 100;
const total = (m: ReadonlyMap<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
const pidOf = (cp: ControlPlaneHandle, name: string) => Number(readFileSync(join(cp.dir, `${name}.pid`), "utf8"));

function ticksOf(pids: number[]): number {
  let sum = 0;
  for (const p of pids) {
    try {
      sum += cpuTicks(p);
    } catch {
      // the process ended: its share of the window is lost, said by the node count
    }
  }
  return sum;
}

function rssOf(pids: number[]): number {
  let sum = 0;
  for (const p of pids) {
    try {
      sum += rssMiB(p);
    } catch {}
  }
  return sum;
}

async function window(label: string, ms: number, cp: ControlPlaneHandle, rest: RestClient, auditFile: string, fleet: Fleet | undefined, nodes: number): Promise<Figures> {
  say(`${label}: measuring for ${(ms / 1000).toFixed(0)} s`);
  const apiPid = pidOf(cp, "kube-apiserver");
  const etcdPid = pidOf(cp, "etcd");
  const pids = fleet?.pids() ?? [];
  const m0 = await metrics(cp);
  const w0 = Date.now();
  const t0 = performance.now();
  const a0 = cpuTicks(apiPid);
  const e0 = cpuTicks(etcdPid);
  const f0 = ticksOf(pids);
  const rss: number[] = [];
  const fleetRss: number[] = [];
  let oldest = 0;
  while (performance.now() - t0 < ms) {
    await Bun.sleep(Math.min(10_000, ms - (performance.now() - t0)));
    rss.push(rssMiB(apiPid));
    if (fleet) {
      fleetRss.push(rssOf(pids));
      const leases = await rest.request<{ items: { metadata: { name: string }; spec?: { renewTime?: string } }[] }>(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
      );
      for (const age of leaseAges(leases.items, Date.now(), (n) => parseHollowNodeName(n)?.kind === fleet.kind).values()) oldest = Math.max(oldest, age);
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const a1 = cpuTicks(apiPid);
  const e1 = cpuTicks(etcdPid);
  const f1 = ticksOf(pids);
  const w1 = Date.now();
  const m1 = await metrics(cp);
  const perSecond = (m: Map<string, number>) => new Map([...m].filter(([, v]) => v !== 0).map(([k, v]) => [k, v / seconds]));
  const sumOf = (s: Sample[], name: string) => total(sumBy(s, name, () => ""));
  // The audit backend writes in batches: let the window's last events reach the file.
  await Bun.sleep(3000);
  const load = apiLoad(readAudit(auditFile), (u) => u.startsWith("system:node:"), w0, w1);
  const nodeHours = (nodes * seconds) / 3600;
  const leaseCounts = [...load.byUser.values()].map((m) => m.get("update leases") ?? 0);
  while (fleet && leaseCounts.length < nodes) leaseCounts.push(0); // a node that sent none
  let lag: Figures["lag"];
  if (fleet?.lagFiles.length) {
    const meter = new LagMeter();
    for (const f of fleet.lagFiles) {
      for (const line of readFileSync(f, "utf8").split("\n")) {
        const [at, l] = line.split(" ").map(Number);
        if (at !== undefined && l !== undefined && Number.isFinite(at) && Number.isFinite(l)) meter.record(at - l, at);
      }
    }
    lag = meter.summary(w0, w1);
  }
  const f: Figures = {
    label,
    seconds,
    apiCpu: pct(a1 - a0, seconds),
    etcdCpu: pct(e1 - e0, seconds),
    apiRssMiB: rss.reduce((a, b) => a + b, 0) / Math.max(1, rss.length),
    requests: perSecond(delta(sumBy(m0, "apiserver_request_total", verbResource), sumBy(m1, "apiserver_request_total", verbResource))),
    bytesIn: (sumOf(m1, "apiserver_request_body_size_bytes_sum") - sumOf(m0, "apiserver_request_body_size_bytes_sum")) / seconds,
    bytesOut: (sumOf(m1, "apiserver_response_sizes_sum") - sumOf(m0, "apiserver_response_sizes_sum")) / seconds,
    bytesOutBy: perSecond(delta(sumBy(m0, "apiserver_response_sizes_sum", verbResource), sumBy(m1, "apiserver_response_sizes_sum", verbResource))),
    watchBytesOut: (sumOf(m1, "apiserver_watch_events_sizes_sum") - sumOf(m0, "apiserver_watch_events_sizes_sum")) / seconds,
    watchesOpen: total(sumBy(m1, "apiserver_longrunning_requests", (l) => (l.verb === "WATCH" ? "" : undefined))),
    nodeRequests: new Map([...load.requests].map(([k, v]) => [k, nodeHours > 0 ? v / nodeHours : 0])),
    nodeWatchesOpen: load.watchesOpenAtEnd,
    nodesSeen: load.byUser.size,
    leaseUpdates: { min: leaseCounts.length ? Math.min(...leaseCounts) : 0, max: leaseCounts.length ? Math.max(...leaseCounts) : 0 },
    oldestLeaseMs: oldest,
    fleetCpu: pct(f1 - f0, seconds),
    fleetRssMiB: fleetRss.reduce((a, b) => a + b, 0) / Math.max(1, fleetRss.length),
    lag,
  };
  writeFileSync(
    join(work, `${f.label.replace(/\W+/g, "-")}.json`),
    JSON.stringify(f, (_, v) => (v instanceof Map ? Object.fromEntries(v) : v), 2),
  );
  return f;
}

async function nodeKubeconfigs(cp: ControlPlaneHandle, kind: HollowKind): Promise<{ node: string; kubeconfig: string }[]> {
  const out: { node: string; kubeconfig: string }[] = [];
  for (let i = 0; i < NODES; i++) {
    const node = hollowNodeName(kind, i);
    out.push({ node, kubeconfig: await cp.nodeKubeconfig(node) });
  }
  return out;
}

async function startBunletFleet(cp: ControlPlaneHandle, dir: string): Promise<Fleet> {
  const nodes = await nodeKubeconfigs(cp, "bunlet");
  const procs = groups(NODES, PER_PROCESS).map(({ first, count }, g) => {
    const gdir = join(dir, `process-${g}`);
    mkdirSync(gdir, { recursive: true });
    const list = join(gdir, "nodes.json");
    writeFileSync(list, JSON.stringify(nodes.slice(first, first + count)));
    const out = Bun.file(join(gdir, "stderr.log"));
    return { gdir, proc: Bun.spawn([process.execPath, join(repoRoot, "scripts/bench/hollow.ts"), list, gdir], { stdout: out, stderr: out }) };
  });
  return {
    kind: "bunlet",
    pids: () => procs.map((p) => p.proc.pid),
    lagFiles: procs.map((p) => join(p.gdir, "lag.log")),
    stop: async () => {
      for (const p of procs) p.proc.kill("SIGTERM");
      await Promise.all(procs.map((p) => Promise.race([p.proc.exited, Bun.sleep(30_000).then(() => p.proc.kill("SIGKILL"))])));
    },
  };
}

function kubemarkBinary(cp: ControlPlaneHandle): string | undefined {
  const bin = join(cp.binDir, "kubemark");
  return existsSync(bin) ? bin : undefined;
}

/** The fake runtime sockets kubemark makes (/tmp/kubelet_remote_<random>.sock, a fixed place in its code). */
const fakeSockets = () => new Set(readdirSync("/tmp").filter((f) => /^kubelet_remote_\d+\.sock$/.test(f)));

async function startUpstreamFleet(cp: ControlPlaneHandle, dir: string, kubemark: string): Promise<Fleet> {
  const nodes = await nodeKubeconfigs(cp, "upstream");
  const socketsBefore = fakeSockets();
  const procs: ReturnType<typeof Bun.spawn>[] = [];
  for (const { node, kubeconfig } of nodes) {
    const ndir = join(dir, node);
    mkdirSync(ndir, { recursive: true });
    const out = Bun.file(join(ndir, "kubemark.log"));
    procs.push(
      Bun.spawn(
        [
          kubemark,
          "--morph=kubelet",
          `--name=${node}`,
          `--kubeconfig=${kubeconfig}`,
          `--kubelet-port=${await freePort()}`,
          "--kubelet-read-only-port=0",
          "--use-host-image-service=false",
          "--v=2",
        ],
        // Its root directory is a temporary directory (os.TempDir): here, not the machine's /tmp.
        { stdout: out, stderr: out, env: { ...process.env, TMPDIR: ndir } },
      ),
    );
    await Bun.sleep(200); // each kubelet's start costs CPU; a storm would delay the first leases
  }
  return {
    kind: "upstream",
    pids: () => procs.map((p) => p.pid),
    lagFiles: [],
    stop: async () => {
      for (const p of procs) p.kill("SIGTERM");
      await Promise.all(procs.map((p) => Promise.race([p.exited, Bun.sleep(30_000).then(() => p.kill("SIGKILL"))])));
      for (const s of fakeSockets()) if (!socketsBefore.has(s)) rmSync(join("/tmp", s), { force: true });
    },
  };
}

async function waitReady(rest: RestClient, kind: HollowKind, timeoutMs: number): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    const list = await rest.request<{ items: any[] }>("GET", "/api/v1/nodes");
    const ready = list.items.filter(
      (n) => parseHollowNodeName(n.metadata.name)?.kind === kind && n.status?.conditions?.find((c: any) => c.type === "Ready")?.status === "True",
    ).length;
    if (ready === NODES) return (performance.now() - t0) / 1000;
    if (performance.now() - t0 > timeoutMs) throw new Error(`${ready} of ${NODES} ${kind} nodes Ready after ${(timeoutMs / 1000).toFixed(0)} s`);
    await Bun.sleep(2000);
  }
}

interface KindRun {
  kind: HollowKind;
  baseline: Figures;
  nodes: Figures;
  readySeconds: number;
}

async function runKind(kind: HollowKind): Promise<KindRun | string> {
  const dir = join(work, kind);
  mkdirSync(dir, { recursive: true });
  const auditFile = join(dir, "audit.log");
  const policy = join(dir, "audit-policy.yaml");
  writeFileSync(
    policy,
    ["apiVersion: audit.k8s.io/v1", "kind: Policy", "omitStages: [RequestReceived]", "rules:", "- level: Metadata", "  userGroups: [system:nodes]", "- level: None", ""].join("\n"),
  );
  let cp: ControlPlaneHandle | undefined;
  let fleet: Fleet | undefined;
  try {
    cp = await startControlPlane({
      name: `scale-${kind}`,
      apiServerArgs: [`--audit-policy-file=${policy}`, `--audit-log-path=${auditFile}`, "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s"],
    });
    const kubemark = kind === "upstream" ? kubemarkBinary(cp) : undefined;
    if (kind === "upstream" && !kubemark) return `no kubemark in ${cp.binDir}: run \`bash scripts/controlplane/build.sh --with-kubemark\``;
    const rest = createRestClient({
      credentials: await loadCredentials(cp.adminKubeconfig),
      qps: 0,
      burst: 0,
      clock: realClock,
      logger: createLogger({ verbosity: 0 }),
      userAgent: "bench-scale",
    });
    const baseline = await window(`${kind}: control plane alone`, BASELINE_MS, cp, rest, auditFile, undefined, 0);
    const t0 = performance.now();
    fleet = kind === "bunlet" ? await startBunletFleet(cp, dir) : await startUpstreamFleet(cp, dir, kubemark!);
    say(`${kind}: ${NODES} nodes started in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    const readySeconds = (performance.now() - t0) / 1000 + (await waitReady(rest, kind, 300_000));
    say(`${kind}: ${NODES} nodes Ready ${readySeconds.toFixed(0)} s after the first start; settling ${SETTLE_MS / 1000} s`);
    await Bun.sleep(SETTLE_MS);
    const nodes = await window(`${kind}: ${NODES} nodes`, MINUTES * 60_000, cp, rest, auditFile, fleet, NODES);
    return { kind, baseline, nodes, readySeconds };
  } finally {
    await fleet?.stop().catch((err: unknown) => say(`${kind}: stopping the nodes: ${String(err)}`));
    if (cp) {
      for (const c of ["kube-apiserver", "etcd"]) {
        try {
          writeFileSync(join(dir, `${c}.log`), readFileSync(join(cp.dir, `${c}.log`)));
        } catch {}
      }
      await cp.stop();
    }
  }
}

const fmt = (v: number | undefined, digits: number, unit = "") => (v === undefined || !Number.isFinite(v) ? "–" : `${v.toFixed(digits)}${unit}`);
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? "–" : `${(a / b).toFixed(2)}x`;

function report(runs: Map<HollowKind, KindRun>): string {
  const b = runs.get("bunlet");
  const u = runs.get("upstream");
  const out: string[] = [];
  out.push(`| figure, ${NODES} idle nodes, ${MINUTES} min | bunlet (hollow.ts) | upstream (kubemark) | bunlet / upstream |`, "| --- | ---: | ---: | ---: |");
  const row = (name: string, get: (r: KindRun) => number | undefined, digits: number, unit = "") =>
    out.push(`| ${name} | ${fmt(b && get(b), digits, unit)} | ${fmt(u && get(u), digits, unit)} | ${ratio(b && get(b), u && get(u))} |`);
  row("API server CPU (one core = 100%)", (r) => r.nodes.apiCpu, 2, " %");
  row("API server CPU, control plane alone before (baseline)", (r) => r.baseline.apiCpu, 2, " %");
  row("API server CPU above the baseline", (r) => r.nodes.apiCpu - r.baseline.apiCpu, 2, " %");
  row("etcd CPU", (r) => r.nodes.etcdCpu, 2, " %");
  row("etcd CPU above the baseline", (r) => r.nodes.etcdCpu - r.baseline.etcdCpu, 2, " %");
  row("API server RSS (mean)", (r) => r.nodes.apiRssMiB, 0, " MiB");
  row("requests/s, all clients (apiserver_request_total)", (r) => total(r.nodes.requests), 2);
  row("requests/s above the baseline", (r) => total(r.nodes.requests) - total(r.baseline.requests), 2);
  row("the nodes' requests per node-hour (audit log)", (r) => total(r.nodes.nodeRequests), 0);
  row("bytes received/s (request bodies)", (r) => r.nodes.bytesIn, 0);
  row("bytes sent/s (responses, not watches)", (r) => r.nodes.bytesOut, 0);
  row("bytes sent/s in watch events", (r) => r.nodes.watchBytesOut, 0);
  row("watches open at the end, all clients", (r) => r.nodes.watchesOpen, 0);
  row("watches open at the end, the nodes'", (r) => r.nodes.nodeWatchesOpen, 0);
  row("lease updates per node in the window, fewest", (r) => r.nodes.leaseUpdates.min, 0);
  row("lease updates per node in the window, most", (r) => r.nodes.leaseUpdates.max, 0);
  row("oldest lease renewal seen (sampled every 10 s)", (r) => r.nodes.oldestLeaseMs / 1000, 1, " s");
  row("hollow nodes' CPU, all processes", (r) => r.nodes.fleetCpu, 1, " %");
  row("hollow nodes' RSS, all processes", (r) => r.nodes.fleetRssMiB, 0, " MiB");
  row("start → all nodes Ready", (r) => r.readySeconds, 0, " s");
  if (b?.nodes.lag)
    out.push(
      "",
      `bunlet's event loops (${Math.ceil(NODES / PER_PROCESS)} processes): a 1 s timer late by p50 ${fmt(b.nodes.lag.p50, 1)} ms, p99 ${fmt(b.nodes.lag.p99, 1)} ms, max ${fmt(b.nodes.lag.max, 1)} ms over ${b.nodes.lag.ticks} ticks.`,
    );
  const keys = new Set<string>();
  for (const r of runs.values()) for (const k of r.nodes.nodeRequests.keys()) keys.add(k);
  out.push("", "| the nodes' requests per node-hour (audit log), by verb and resource | bunlet | upstream | bunlet / upstream |", "| --- | ---: | ---: | ---: |");
  for (const k of [...keys].sort())
    out.push(
      `| ${k} | ${fmt(b?.nodes.nodeRequests.get(k) ?? (b ? 0 : undefined), 0)} | ${fmt(u?.nodes.nodeRequests.get(k) ?? (u ? 0 : undefined), 0)} | ${ratio(b?.nodes.nodeRequests.get(k), u?.nodes.nodeRequests.get(k))} |`,
    );
  const sent = new Set<string>();
  for (const r of runs.values()) for (const k of r.nodes.bytesOutBy.keys()) sent.add(k);
  out.push("", "| bytes sent/s in responses by verb and resource, all clients (apiserver_response_sizes) | bunlet | upstream |", "| --- | ---: | ---: |");
  for (const k of [...sent].sort())
    out.push(`| ${k} | ${fmt(b?.nodes.bytesOutBy.get(k) ?? (b ? 0 : undefined), 0)} | ${fmt(u?.nodes.bytesOutBy.get(k) ?? (u ? 0 : undefined), 0)} |`);
  const all = new Set<string>();
  for (const r of runs.values()) for (const k of r.nodes.requests.keys()) all.add(k);
  out.push("", "| requests/s by verb and resource, all clients (apiserver_request_total) | bunlet | upstream |", "| --- | ---: | ---: |");
  for (const k of [...all].sort()) out.push(`| ${k} | ${fmt(b?.nodes.requests.get(k) ?? (b ? 0 : undefined), 3)} | ${fmt(u?.nodes.requests.get(k) ?? (u ? 0 : undefined), 3)} |`);
  return out.join("\n");
}

mkdirSync(work, { recursive: true });
const runs = new Map<HollowKind, KindRun>();
for (const kind of KINDS) {
  // One kind failing does not cost the other its measurement.
  const r = await heavyLock(LOCK, `${NODES} ${kind} hollow nodes`, () => runKind(kind), say).catch((err: unknown) =>
    err instanceof Error ? (err.stack ?? err.message) : String(err),
  );
  if (typeof r === "string") say(`${kind}: not measured: ${r}`);
  else runs.set(kind, r);
}
const memGiB = Number(/MemTotal:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0) / 2 ** 20;
console.log(report(runs));
console.log(
  `\n${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC; ${navigator.hardwareConcurrency} CPUs, ${memGiB.toFixed(1)} GiB, load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}; logs, audit logs and figures in ${work} (${statSync(work).isDirectory() ? "kept" : "missing"})`,
);
