// The cost of a quiet node (issue #24), side by side in one run: this agent
// (dist/kubelet) and the upstream kubelet idle at the same time, each on its
// own private containerd (an upstream kubelet removes sandboxes it does not
// know), both against one private control plane. Two idle windows: with 0
// pods, then with BENCH_PODS pods on each node. For each window and agent:
// - CPU: utime + stime from /proc/<pid>/stat over the window (the process's
//   own time, so other load on a shared machine barely moves it), split by
//   thread name (/proc/<pid>/task/*/stat), and its containerd's;
// - RSS: the mean of one VmRSS sample every 10 s;
// - API load: the API server's own audit log (level Metadata for the group
//   system:nodes): requests by verb and resource per node-hour, watches
//   started and open. apiserver_request_total has no user or user-agent
//   label since Kubernetes 1.17, so the per-node split comes from the audit
//   log; the metric's total over all clients is printed beside it. Bytes per
//   node: each agent reaches the API server through its own byte-counting
//   TCP pass-through (byte-counter.ts; TLS end to end), so bytes sent and
//   received are what crosses the network, headers and TLS included.
// Three windows: 0 pods; churn (CHURN_PODS pods created on each node every
// CHURN_SECONDS and the previous round's deleted, 0 standing pods); then
// BENCH_PODS standing pods on each node.
//
// Run: bun run bench:idle   (root; builds dist/kubelet first)
// Environment: IDLE_MINUTES=10 (each window), BUSY_MINUTES (the window with
// pods; default IDLE_MINUTES), CHURN_MINUTES (default IDLE_MINUTES; 0 skips
// it), CHURN_PODS=5, CHURN_SECONDS=30, BENCH_PODS=110 (0 skips that window), SETTLE_SECONDS=60 (after Ready
// and after the pods are Running, before a window), BENCH_HEAVY_LOCK (a lock
// file, e.g. /tmp/bunlet-heavy.lock: held with flock(1) while the control
// plane starts and while the pods start, not while idling),
// BENCH_BUNLET_ENV="NAME=VALUE ..." (this agent's environment only).
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createRestClient, loadCredentials, type RestClient } from "../../src/api/rest.ts";
import { realClock } from "../../src/util/clock.ts";
import { freePort, startAgent } from "../../test/harness/agent.ts";
import { type ContainerdHandle, requireRoot, runtimeUnderTest, startContainerd } from "../../test/harness/containerd.ts";
import { type ControlPlaneHandle, startControlPlane } from "../../test/harness/controlplane.ts";
import { startUpstreamKubelet } from "../../test/harness/upstream-kubelet.ts";
import { type ApiLoad, apiLoad, readAudit } from "./audit.ts";
import { type ByteCounter, startByteCounter } from "./byte-counter.ts";
import { heavy as heavyLock } from "./lock.ts";
import { CLK_TCK, cpuTicks, parseStat, rssMiB } from "./proc.ts";
import { createLogger } from "../../src/util/log.ts";

const repoRoot = resolve(import.meta.dir, "../..");
const IDLE_MINUTES = Number(process.env.IDLE_MINUTES ?? 10);
const BUSY_MINUTES = Number(process.env.BUSY_MINUTES ?? IDLE_MINUTES);
const PODS = Number(process.env.BENCH_PODS ?? 110);
const CHURN_MINUTES = Number(process.env.CHURN_MINUTES ?? IDLE_MINUTES);
const CHURN_PODS = Number(process.env.CHURN_PODS ?? 5);
const CHURN_SECONDS = Number(process.env.CHURN_SECONDS ?? 30);
const SETTLE_MS = Number(process.env.SETTLE_SECONDS ?? 60) * 1000;
const LOCK = process.env.BENCH_HEAVY_LOCK;
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
const NAMESPACE = "idle";
const heavy = <T>(what: string, body: () => Promise<T>) => heavyLock(LOCK, what, body, (l) => console.error(`idle: ${l}`));
const work = join(tmpdir(), `bunlet-bench-idle-${new Date().toISOString().replace(/[:.]/g, "-")}`);

type Kind = "bunlet" | "upstream";
interface Agent {
  kind: Kind;
  node: string;
  pid: number;
  ctd: ContainerdHandle;
  ctdPid: number;
  logFile: string;
  /** The agent's bytes to and from the API server. */
  bytes: ByteCounter;
  stop(): Promise<void>;
}

/** CPU ticks of every thread of `pid`, summed by thread name. */
function threadTicks(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    } catch {
      continue; // the thread ended
    }
    const { comm, ticks } = parseStat(stat);
    const name = comm.replace(/[0-9]+$/, "#");
    byName.set(name, (byName.get(name) ?? 0) + ticks);
  }
  return byName;
}

/** apiserver_request_total summed over every label but verb: all clients, from the API server's /metrics. */
async function requestTotals(cp: ControlPlaneHandle): Promise<number> {
  const r = await cp.kubectl(["get", "--raw", "/metrics"]);
  let sum = 0;
  for (const line of r.stdout.split("\n")) if (line.startsWith("apiserver_request_total{")) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  return sum;
}

interface Window {
  label: string;
  seconds: number;
  cpu: Map<Kind, number>;
  ctdCpu: Map<Kind, number>;
  threads: Map<Kind, Map<string, number>>;
  rss: Map<Kind, number>;
  api: Map<Kind, ApiLoad>;
  /** Bytes the agent sent to / received from the API server in the window (on the wire). */
  bytesSent: Map<Kind, number>;
  bytesReceived: Map<Kind, number>;
  allClientsPerHour: number;
  /** What ran during the window (churn), if anything. */
  activity?: string;
}

/** The window's figures as JSON (Maps as objects), kept beside the logs. */
function saveWindow(w: Window): void {
  const plain = JSON.stringify(w, (_, v) => (v instanceof Map ? Object.fromEntries(v) : v), 2);
  writeFileSync(join(work, `window-${w.label.replace(/\W+/g, "-")}.json`), plain);
}

/**
 * One measured window; `activity` runs through it (churn) and reports what it
 * did once its signal aborts at the window's end.
 */
async function idleWindow(
  label: string,
  minutes: number,
  agents: Agent[],
  cp: ControlPlaneHandle,
  auditFile: string,
  activity?: (signal: AbortSignal) => Promise<string>,
): Promise<Window> {
  console.error(`idle: ${label}: measuring for ${minutes} min`);
  const b0 = new Map(agents.map((a) => [a.kind, { sent: a.bytes.sent(), received: a.bytes.received() }]));
  const stopActivity = new AbortController();
  const activityDone = activity?.(stopActivity.signal);
  const w0 = Date.now();
  const t0 = performance.now();
  const m0 = await requestTotals(cp);
  const c0 = new Map(agents.map((a) => [a.kind, cpuTicks(a.pid)]));
  const d0 = new Map(agents.map((a) => [a.kind, cpuTicks(a.ctdPid)]));
  const th0 = new Map(agents.map((a) => [a.kind, threadTicks(a.pid)]));
  const rss = new Map<Kind, number[]>(agents.map((a) => [a.kind, []]));
  while (performance.now() - t0 < minutes * 60_000) {
    await Bun.sleep(Math.min(10_000, minutes * 60_000 - (performance.now() - t0)));
    for (const a of agents) rss.get(a.kind)!.push(rssMiB(a.pid));
  }
  const seconds = (performance.now() - t0) / 1000;
  const w1 = Date.now();
  const b1 = new Map(agents.map((a) => [a.kind, { sent: a.bytes.sent(), received: a.bytes.received() }]));
  const c1 = new Map(agents.map((a) => [a.kind, cpuTicks(a.pid)]));
  const d1 = new Map(agents.map((a) => [a.kind, cpuTicks(a.ctdPid)]));
  const pct = (ticks: number) => (ticks / CLK_TCK / seconds) * 100;
  const threads = new Map<Kind, Map<string, number>>();
  for (const a of agents) {
    const before = th0.get(a.kind)!;
    const after = threadTicks(a.pid);
    threads.set(a.kind, new Map([...after].map(([n, t]) => [n, pct(t - (before.get(n) ?? 0))])));
  }
  const m1 = await requestTotals(cp);
  stopActivity.abort();
  const did = await activityDone;
  // The audit backend writes in batches: let the window's last events reach the file.
  await Bun.sleep(3000);
  const events = readAudit(auditFile);
  const w: Window = {
    label,
    seconds,
    cpu: new Map(agents.map((a) => [a.kind, pct(c1.get(a.kind)! - c0.get(a.kind)!)])),
    ctdCpu: new Map(agents.map((a) => [a.kind, pct(d1.get(a.kind)! - d0.get(a.kind)!)])),
    threads,
    rss: new Map([...rss].map(([k, v]) => [k, v.reduce((x, y) => x + y, 0) / v.length])),
    api: new Map(agents.map((a) => [a.kind, apiLoad(events, (u) => u === `system:node:${a.node}`, w0, w1)])),
    bytesSent: new Map(agents.map((a) => [a.kind, b1.get(a.kind)!.sent - b0.get(a.kind)!.sent])),
    bytesReceived: new Map(agents.map((a) => [a.kind, b1.get(a.kind)!.received - b0.get(a.kind)!.received])),
    allClientsPerHour: ((m1 - m0) / seconds) * 3600,
    ...(did ? { activity: did } : {}),
  };
  saveWindow(w);
  return w;
}

async function waitNodeReady(rest: RestClient, node: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const n = await rest.request<any>("GET", `/api/v1/nodes/${node}`).catch(() => undefined);
    if (n?.status?.conditions?.find((c: any) => c.type === "Ready")?.status === "True") return;
    if (Date.now() > deadline) throw new Error(`node ${node} not Ready after 120 s`);
    await Bun.sleep(500);
  }
}

async function startPods(rest: RestClient, ctd: ContainerdHandle, node: string, count: number): Promise<void> {
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: count }, (_, i) =>
      rest.request("POST", `/api/v1/namespaces/${NAMESPACE}/pods`, {
        body: {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: `${node}-${i}`, labels: { node } },
          spec: {
            nodeName: node,
            terminationGracePeriodSeconds: 1,
            containers: [{ name: "c", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "86400"] }],
          },
        },
      }),
    ),
  );
  const deadline = Date.now() + 600_000;
  for (;;) {
    const list = await rest.request<any>("GET", `/api/v1/namespaces/${NAMESPACE}/pods`, { query: { labelSelector: `node=${node}` } });
    const running = list.items.filter((p: any) => p.status?.phase === "Running").length;
    if (running === count) break;
    if (Date.now() > deadline) throw new Error(`${running} of ${count} pods Running on ${node} after 600 s`);
    await Bun.sleep(1000);
  }
  console.error(`idle: ${count} pods Running on ${node} after ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

const churnPod = (ctd: ContainerdHandle, node: string, name: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, labels: { node, churn: "true" } },
  spec: {
    nodeName: node,
    terminationGracePeriodSeconds: 1,
    containers: [{ name: "c", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "86400"] }],
  },
});

/**
 * Churn on every node until `signal` aborts: each CHURN_SECONDS, CHURN_PODS
 * new pods and a delete of the previous round's (a pod lives one round).
 * Then the last round is deleted and waited for, outside the window's figures
 * only for its CPU (the audit log and bytes are read up to the window's end).
 */
async function churn(rest: RestClient, agents: Agent[], signal: AbortSignal): Promise<string> {
  const path = `/api/v1/namespaces/${NAMESPACE}/pods`;
  const live = new Map<string, string[]>();
  let created = 0;
  let round = 0;
  while (!signal.aborted) {
    await Promise.all(
      agents.map(async (a) => {
        const names = Array.from({ length: CHURN_PODS }, (_, i) => `${a.node}-churn-${round}-${i}`);
        await Promise.all(names.map((n) => rest.request("POST", path, { body: churnPod(a.ctd, a.node, n) })));
        created += names.length;
        await Promise.all((live.get(a.node) ?? []).map((n) => rest.request("DELETE", `${path}/${n}`).catch(() => undefined)));
        live.set(a.node, names);
      }),
    );
    round++;
    await new Promise<void>((res) => {
      const t = setTimeout(res, CHURN_SECONDS * 1000);
      signal.addEventListener("abort", () => (clearTimeout(t), res()), { once: true });
    });
  }
  await rest.request("DELETE", path, { query: { labelSelector: "churn=true" } });
  const deadline = Date.now() + 180_000;
  while ((await rest.request<any>("GET", path, { query: { labelSelector: "churn=true" } })).items.length > 0) {
    if (Date.now() > deadline) throw new Error("churn pods still in the API 180 s after the window");
    await Bun.sleep(1000);
  }
  return `${created / agents.length} pods created and deleted per node, ${CHURN_PODS} every ${CHURN_SECONDS} s`;
}

async function startBunlet(cp: ControlPlaneHandle): Promise<Agent> {
  const ctd = await startContainerd({ name: "idle-bunlet" });
  const node = "bunlet-node";
  const bytes = await startByteCounter(cp.apiServerUrl);
  process.env.BUNLET_BINARY = resolve(repoRoot, process.env.BUNLET_BINARY ?? "dist/kubelet");
  const agent = await startAgent(ctd, {
    name: "bunlet",
    nodeName: node,
    extraArgs: [`--kubeconfig=${bytes.kubeconfig(await cp.nodeKubeconfig(node), join(work, `${node}.kubeconfig`))}`, "--node-ip=127.0.0.1"],
    extraConfig: { authentication: { x509: { clientCAFile: cp.caFile }, webhook: { enabled: true }, anonymous: { enabled: false } }, authorization: { mode: "Webhook" } },
    ...(Object.keys(BUNLET_ENV).length ? { env: BUNLET_ENV } : {}),
  });
  return {
    kind: "bunlet",
    node,
    pid: agent.pid()!,
    ctd,
    ctdPid: Number(readFileSync(join(ctd.dir, "containerd.pid"), "utf8")),
    logFile: agent.logFile,
    bytes,
    stop: async () => {
      await agent.kill("SIGTERM");
      await bytes.close();
    },
  };
}

async function startUpstream(cp: ControlPlaneHandle): Promise<Agent> {
  const ctd = await startContainerd({ name: "idle-upstream" });
  const node = "upstream-node";
  const bytes = await startByteCounter(cp.apiServerUrl);
  const dir = join(ctd.dir, "agent-upstream");
  const kubelet = startUpstreamKubelet(ctd, {
    binDir: cp.binDir,
    dir,
    nodeName: node,
    rootDir: join(dir, "root"),
    podLogsDir: join(dir, "pod-logs"),
    kubeconfig: bytes.kubeconfig(await cp.nodeKubeconfig(node), join(work, `${node}.kubeconfig`)),
    clientCAFile: cp.caFile,
    healthzPort: await freePort(),
    port: await freePort(),
  });
  return {
    kind: "upstream",
    node,
    pid: kubelet.pid,
    ctd,
    ctdPid: Number(readFileSync(join(ctd.dir, "containerd.pid"), "utf8")),
    logFile: kubelet.logFile,
    bytes,
    stop: async () => {
      await kubelet.stop();
      await bytes.close();
    },
  };
}

function ratio(a: number | undefined, b: number | undefined): string {
  return a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? "–" : `${(a / b).toFixed(2)}x`;
}

function report(w: Window): string {
  const out: string[] = [];
  const hours = w.seconds / 3600;
  out.push(`### ${w.label} (${(w.seconds / 60).toFixed(1)} min)`, "");
  if (w.activity) out.push(`During the window: ${w.activity}.`, "");
  out.push("| figure | bunlet | upstream kubelet | bunlet / upstream |", "| --- | ---: | ---: | ---: |");
  const row = (name: string, a: number | undefined, b: number | undefined, unit: string, digits: number) =>
    out.push(`| ${name} | ${a === undefined ? "–" : `${a.toFixed(digits)} ${unit}`} | ${b === undefined ? "–" : `${b.toFixed(digits)} ${unit}`} | ${ratio(a, b)} |`);
  row("agent CPU (one core = 100%)", w.cpu.get("bunlet"), w.cpu.get("upstream"), "%", 2);
  row("its containerd's CPU", w.ctdCpu.get("bunlet"), w.ctdCpu.get("upstream"), "%", 2);
  row("agent RSS (mean)", w.rss.get("bunlet"), w.rss.get("upstream"), "MiB", 1);
  const total = (k: Kind) => {
    const l = w.api.get(k);
    return l ? [...l.requests.values()].reduce((a, b) => a + b, 0) / hours : undefined;
  };
  row("API requests per node-hour (audit log, watches counted when started)", total("bunlet"), total("upstream"), "", 0);
  const watches = (k: Kind) => {
    const l = w.api.get(k);
    return l ? [...l.requests].filter(([key]) => key.startsWith("watch ")).reduce((a, [, n]) => a + n, 0) / hours : undefined;
  };
  row("watches started per node-hour", watches("bunlet"), watches("upstream"), "", 0);
  row("watches open at the window's end", w.api.get("bunlet")?.watchesOpenAtEnd, w.api.get("upstream")?.watchesOpenAtEnd, "", 0);
  const kib = (m: Map<Kind, number>, k: Kind) => (m.has(k) ? m.get(k)! / 1024 / hours : undefined);
  row("KiB sent to the API server per node-hour (on the wire, TLS)", kib(w.bytesSent, "bunlet"), kib(w.bytesSent, "upstream"), "KiB", 0);
  row("KiB received from the API server per node-hour (on the wire, TLS)", kib(w.bytesReceived, "bunlet"), kib(w.bytesReceived, "upstream"), "KiB", 0);
  out.push("", `All clients together (apiserver_request_total): ${w.allClientsPerHour.toFixed(0)} requests per hour.`, "");
  const keys = new Set([...(w.api.get("bunlet")?.requests.keys() ?? []), ...(w.api.get("upstream")?.requests.keys() ?? [])]);
  out.push("| requests per node-hour, by verb and resource | bunlet | upstream kubelet |", "| --- | ---: | ---: |");
  for (const key of [...keys].sort())
    out.push(`| ${key} | ${((w.api.get("bunlet")?.requests.get(key) ?? 0) / hours).toFixed(0)} | ${((w.api.get("upstream")?.requests.get(key) ?? 0) / hours).toFixed(0)} |`);
  out.push("", "| agent CPU by thread (% of one core) | bunlet | upstream kubelet |", "| --- | ---: | ---: |");
  for (const k of ["bunlet", "upstream"] as Kind[]) {
    const th = [...(w.threads.get(k) ?? new Map<string, number>())].filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
    for (const [name, v] of th.slice(0, 8)) out.push(k === "bunlet" ? `| ${name} | ${v.toFixed(2)} % | |` : `| ${name} | | ${v.toFixed(2)} % |`);
  }
  for (const k of ["bunlet", "upstream"] as Kind[]) if (w.api.get(k)?.userAgent) out.push("", `${k}'s user agent: ${w.api.get(k)!.userAgent}`);
  return out.join("\n");
}

requireRoot();
mkdirSync(work, { recursive: true });
const auditFile = join(work, "audit.log");
const policy = join(work, "audit-policy.yaml");
writeFileSync(
  policy,
  ["apiVersion: audit.k8s.io/v1", "kind: Policy", "omitStages: [RequestReceived]", "rules:", "- level: Metadata", "  userGroups: [system:nodes]", "- level: None", ""].join("\n"),
);
const agents: Agent[] = [];
let cp: ControlPlaneHandle | undefined;
try {
  // One heavy step: the control plane's and the agents' start, up to both nodes Ready.
  const rest = await heavy("the control plane and the agents' start", async () => {
    const c = await startControlPlane({
      name: "idle",
      apiServerArgs: [`--audit-policy-file=${policy}`, `--audit-log-path=${auditFile}`, "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s"],
    });
    cp = c;
    const r = createRestClient({
      credentials: await loadCredentials(c.adminKubeconfig),
      qps: 0,
      burst: 0,
      clock: realClock,
      logger: createLogger({ verbosity: 0 }),
      userAgent: "bench-idle",
    });
    await r.request("POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name: NAMESPACE } } });
    agents.push(await startBunlet(c));
    agents.push(await startUpstream(c));
    await Promise.all(agents.map((a) => waitNodeReady(r, a.node)));
    return r;
  });
  for (;;) {
    const sa = await rest.request("GET", `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/default`).catch(() => undefined);
    if (sa) break;
    await Bun.sleep(200);
  }
  console.error(`idle: both nodes Ready; settling ${SETTLE_MS / 1000} s`);
  await Bun.sleep(SETTLE_MS);
  const windows = [await idleWindow("0 pods", IDLE_MINUTES, agents, cp!, auditFile)];
  console.log(report(windows[0]!));
  if (CHURN_MINUTES > 0) {
    windows.push(await idleWindow("churn", CHURN_MINUTES, agents, cp!, auditFile, (signal) => churn(rest, agents, signal)));
    console.log(`\n${report(windows.at(-1)!)}`);
  }
  if (PODS > 0) {
    await heavy(`${PODS} pods per node`, async () => {
      for (const a of agents) await startPods(rest, a.ctd, a.node, PODS);
    });
    await Bun.sleep(SETTLE_MS);
    windows.push(await idleWindow(`${PODS} pods`, BUSY_MINUTES, agents, cp!, auditFile));
    console.log(`\n${report(windows.at(-1)!)}`);
  }
  const memGiB = Number(/MemTotal:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0) / 2 ** 20;
  console.log(
    `\n${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC; ${navigator.hardwareConcurrency} CPUs, ${memGiB.toFixed(1)} GiB, runtime ${runtimeUnderTest()}, Kubernetes ${cp!.kubernetesVersion}; bunlet ${process.env.BUNLET_BINARY}; logs and audit log in ${work}`,
  );
} finally {
  await Promise.all(
    agents.map(async (a) => {
      await a.stop().catch(() => {});
      writeFileSync(join(work, `${a.kind}.log`), readFileSync(a.logFile));
      await a.ctd.stop();
    }),
  );
  await cp?.stop();
}
