// Pod startup latency in cluster mode: N pods created at once through the
// API, time from each create to Running as a watch sees it; plus the
// runtime's own floor for the same work (sandbox + create + start through
// the CRI directly) and the agent's RSS idle and with the pods.
// Run: bun run bench:agent  (root; real containerd and control plane, as the integration tests).
// bun run bench (scripts/bench/compare.ts) runs this agent and the upstream kubelet side by side.
import { readFileSync } from "node:fs";
import { createRestClient, loadCredentials, type WatchEvent } from "../../src/api/rest.ts";
import { createCriClient } from "../../src/cri/client.ts";
import { realClock } from "../../src/util/clock.ts";
import { createLogger } from "../../src/util/log.ts";
import { eventually, startAgent } from "../../test/harness/agent.ts";
import { requireRoot, startContainerd } from "../../test/harness/containerd.ts";
import { startControlPlane } from "../../test/harness/controlplane.ts";
import { runBenchSandbox, startBenchContainer } from "./cri-pod.ts";

const COUNT = Number(process.env.BENCH_PODS ?? 30);
const NODE = "bench-node";

const rssMiB = (pid: number | undefined) => {
  if (!pid) return NaN;
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
};
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

requireRoot();
const [ctd, cp] = await Promise.all([startContainerd({ name: "bench" }), startControlPlane({ name: "bench" })]);
try {
  // The runtime's floor: the same sandbox + container work straight through the CRI, all at once.
  const cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  const floorStart = performance.now();
  const floors = await Promise.all(
    Array.from({ length: COUNT }, async (_, i) => {
      const t0 = performance.now();
      const sandbox = await runBenchSandbox(cri, ctd, "bench-floor", `floor-${i}`);
      await startBenchContainer(cri, ctd, sandbox);
      return { ms: performance.now() - t0, id: sandbox.id };
    }),
  );
  const floorTotal = performance.now() - floorStart;
  for (const f of floors) await cri.stopPodSandbox(f.id).then(() => cri.removePodSandbox(f.id));
  cri.close();

  const agentStart = performance.now();
  const agent = await startAgent(ctd, { nodeName: NODE, extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`] });
  const rest = createRestClient({
    credentials: await loadCredentials(cp.adminKubeconfig),
    qps: 0,
    burst: 0,
    clock: realClock,
    logger: createLogger({ verbosity: 0 }),
    userAgent: "bench",
  });
  await eventually(
    "node Ready",
    async () => {
      const node = await rest.request<any>("GET", `/api/v1/nodes/${NODE}`).catch(() => undefined);
      return node?.status?.conditions?.find((c: any) => c.type === "Ready")?.status === "True";
    },
    60_000,
    100,
  );
  const readyMs = performance.now() - agentStart;
  await Bun.sleep(5000);
  const idleRss = rssMiB(agent.pid());

  await rest.request("POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "bench" } } });
  const list = await rest.request<any>("GET", "/api/v1/namespaces/bench/pods");
  const created = new Map<string, number>();
  const running = new Map<string, number>();
  const watchAbort = new AbortController();
  const allRunning = Promise.withResolvers<void>();
  void rest.watch(
    "/api/v1/namespaces/bench/pods",
    { resourceVersion: list.metadata.resourceVersion },
    (e: WatchEvent) => {
      const pod = e.object as any;
      if (pod.status?.phase === "Running" && !running.has(pod.metadata.name)) {
        running.set(pod.metadata.name, performance.now());
        if (running.size === COUNT) allRunning.resolve();
      }
    },
    watchAbort.signal,
  );
  await Promise.all(
    Array.from({ length: COUNT }, async (_, i) => {
      const name = `p${i}`;
      created.set(name, performance.now());
      await rest.request("POST", "/api/v1/namespaces/bench/pods", {
        body: {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name },
          spec: {
            nodeName: NODE,
            terminationGracePeriodSeconds: 1,
            containers: [{ name: "c", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }],
          },
        },
      });
    }),
  );
  await Promise.race([allRunning.promise, Bun.sleep(180_000).then(() => Promise.reject(new Error(`only ${running.size}/${COUNT} pods Running after 180s`)))]);
  watchAbort.abort();
  const latencies = [...created].map(([name, t]) => running.get(name)! - t).sort((a, b) => a - b);
  const floor = floors.map((f) => f.ms).sort((a, b) => a - b);
  await Bun.sleep(2000);
  const busyRss = rssMiB(agent.pid());
  await agent.kill("SIGTERM");

  const row = (name: string, value: string) => console.log(`| ${name.padEnd(44)} | ${value.padStart(12)} |`);
  console.log(`\nPod startup, ${COUNT} pods created at once (one run; ratios are what to compare):\n`);
  console.log(`| ${"figure".padEnd(44)} | ${"value".padStart(12)} |`);
  console.log(`| ${"-".repeat(44)} | ${"-".repeat(12)} |`);
  row("API create → Running (watch), p50", `${percentile(latencies, 50).toFixed(0)} ms`);
  row("API create → Running (watch), p99", `${percentile(latencies, 99).toFixed(0)} ms`);
  row("runtime floor (CRI sandbox+create+start), p50", `${percentile(floor, 50).toFixed(0)} ms`);
  row("runtime floor, p99", `${percentile(floor, 99).toFixed(0)} ms`);
  row("runtime floor, all pods", `${floorTotal.toFixed(0)} ms`);
  row("p50 over floor p50", `${(percentile(latencies, 50) / percentile(floor, 50)).toFixed(2)}x`);
  row("agent start → node Ready", `${readyMs.toFixed(0)} ms`);
  row("agent RSS idle", `${idleRss.toFixed(1)} MiB`);
  row(`agent RSS with ${COUNT} pods`, `${busyRss.toFixed(1)} MiB`);
  row("agent", process.env.BUNLET_BINARY ? "dist/kubelet" : "bun src/main.ts");
} finally {
  await Promise.all([ctd.stop(), cp.stop()]);
}
