// What a switch between the upstream kubelet (v1.34.12) and this agent costs a
// running node, measured: a private containerd, one static pod running an HTTP
// server with an exec readiness probe, standalone mode, one root directory,
// one healthz and one read-only port for whichever kubelet runs. Three swaps:
// upstream restarting itself (the baseline an operator knows), upstream → this
// agent, this agent → upstream. For each, from the moment the old kubelet is
// told to stop:
//   - kubelet API: the longest time /healthz did not answer 200;
//   - status: the longest time /pods (read-only port) did not show the pod
//     Running and ready;
//   - probes: the longest gap between two readiness probe runs (each appends
//     the host's /proc/uptime to a file), against the probe period of 1 s;
//   - service: requests to the pod's HTTP server every 50 ms, how many failed
//     and the longest run of failures;
//   - restarts: whether the pod's container ID or restart count changed.
// As root, from the repo (heavy: run it under the shared lock):
//   flock /tmp/bunlet-heavy.lock bun scripts/takeover-downtime.ts
// Needs `bash scripts/controlplane/build.sh --with-kubelet` (the upstream kubelet).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../src/cri/client.ts";
import { ContainerFilter, ContainerState } from "../src/cri/index.ts";
import { createLogger } from "../src/util/log.ts";
import { agentPaths, eventually, freePort, startAgent, type AgentHandle } from "../test/harness/agent.ts";
import { startContainerd } from "../test/harness/containerd.ts";
import { controlPlaneBinDir } from "../test/harness/controlplane.ts";
import { startUpstreamKubelet, type UpstreamKubeletHandle } from "../test/harness/upstream-kubelet.ts";

const NODE = "downtime-node";
const POD = `web-${NODE}`;
const ctd = await startContainerd({ name: "downtime" });
const cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
const paths = agentPaths(ctd, "dt");
const probesDir = join(ctd.dir, "probes");
mkdirSync(paths.manifests, { recursive: true });
mkdirSync(probesDir, { recursive: true });
writeFileSync(
  join(paths.manifests, "web.json"),
  JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web" },
    spec: {
      terminationGracePeriodSeconds: 2,
      containers: [
        {
          name: "web",
          image: ctd.busyboxImage,
          imagePullPolicy: "IfNotPresent",
          command: ["sh", "-c", "echo ok > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"],
          readinessProbe: { exec: { command: ["sh", "-c", "cut -d' ' -f1 /proc/uptime >> /probes/runs"] }, periodSeconds: 1 },
          volumeMounts: [{ name: "probes", mountPath: "/probes" }],
        },
      ],
      volumes: [{ name: "probes", hostPath: { path: probesDir } }],
    },
  }),
);

let upstream: UpstreamKubeletHandle | undefined;
let agent: AgentHandle | undefined;
// One healthz and one read-only port for both kubelets, as one config file would give them.
const healthzPort = await freePort();
const readOnlyPort = await freePort();
const port = await freePort();

async function startUpstream(): Promise<void> {
  upstream = startUpstreamKubelet(ctd, {
    binDir: controlPlaneBinDir(),
    dir: join(ctd.dir, "upstream"),
    nodeName: NODE,
    rootDir: paths.rootDir,
    podLogsDir: paths.podLogsDir,
    healthzPort,
    port,
    extraConfig: { staticPodPath: paths.manifests, fileCheckFrequency: "2s", syncFrequency: "5s", readOnlyPort },
  });
}
async function stopUpstream(): Promise<void> {
  await upstream?.stop();
  upstream = undefined;
}
async function startBunlet(): Promise<void> {
  if (agent) agent.start();
  else agent = await startAgent(ctd, { name: "dt", nodeName: NODE, extraConfig: { syncFrequency: "5s", fileCheckFrequency: "2s", healthzPort, readOnlyPort, port } });
}
async function stopBunlet(): Promise<void> {
  await agent?.kill("SIGTERM");
}

async function webContainer() {
  const c = (await cri.listContainers(ContainerFilter.create({}))).find((c) => c.state === ContainerState.CONTAINER_RUNNING && c.labels["io.kubernetes.pod.name"] === POD);
  return c ? { id: c.id, restartCount: c.annotations["io.kubernetes.container.restartCount"] } : undefined;
}
async function podIP(): Promise<string> {
  const sandbox = (await cri.listPodSandbox()).find((s) => s.labels["io.kubernetes.pod.name"] === POD);
  return (await cri.podSandboxStatus(sandbox!.id)).status?.network?.ip ?? "";
}
const ok = async (url: string, check: (body: string) => boolean = () => true) => {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(500) });
    return res.ok && check(await res.text());
  } catch {
    return false;
  }
};
const statusServed = (body: string) => {
  const pod = (JSON.parse(body) as { items: { metadata: { name: string }; status: { phase: string; containerStatuses?: { ready: boolean }[] } }[] }).items.find(
    (p) => p.metadata.name === POD,
  );
  return pod?.status.phase === "Running" && pod.status.containerStatuses?.[0]?.ready === true;
};

/** Polls `check` every `everyMs` until stopped; the longest stretch it was false, and how many polls failed. */
function watch(check: () => Promise<boolean>, everyMs: number) {
  let stop = false;
  let failing: number | undefined;
  let longest = 0;
  let failures = 0;
  let polls = 0;
  const done = (async () => {
    while (!stop) {
      const at = Date.now();
      const good = await check();
      polls++;
      if (good) {
        if (failing !== undefined) longest = Math.max(longest, Date.now() - failing);
        failing = undefined;
      } else {
        failures++;
        failing ??= at;
      }
      await Bun.sleep(Math.max(0, everyMs - (Date.now() - at)));
    }
    if (failing !== undefined) longest = Math.max(longest, Date.now() - failing);
  })();
  return {
    stop: async () => {
      stop = true;
      await done;
      return { longestMs: longest, failures, polls };
    },
  };
}

const probeRuns = () =>
  existsSync(join(probesDir, "runs"))
    ? readFileSync(join(probesDir, "runs"), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((s) => Number(s) * 1000)
    : [];
const uptimeMs = () => Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]) * 1000;

async function swap(name: string, stopOld: () => Promise<void>, startNew: () => Promise<void>) {
  const before = await webContainer();
  const ip = await podIP();
  const api = watch(() => ok(`http://127.0.0.1:${healthzPort}/healthz`), 50);
  const status = watch(() => ok(`http://127.0.0.1:${readOnlyPort}/pods`, statusServed), 50);
  const service = watch(() => ok(`http://${ip}:8080/index.html`), 50);
  await Bun.sleep(2_000);
  const from = uptimeMs();
  const t0 = Date.now();
  await stopOld();
  const stoppedMs = Date.now() - t0;
  await startNew();
  await eventually("the new kubelet serves the pod's status", () => ok(`http://127.0.0.1:${readOnlyPort}/pods`, statusServed), 120_000, 50);
  const servedAfterMs = Date.now() - t0;
  await Bun.sleep(15_000); // through syncs and a resync of the new kubelet
  const [a, s, w] = [await api.stop(), await status.stop(), await service.stop()];
  const runs = probeRuns().filter((t) => t >= from - 2_000);
  let probeGap = 0;
  for (let i = 1; i < runs.length; i++) probeGap = Math.max(probeGap, runs[i]! - runs[i - 1]!);
  const after = await webContainer();
  return {
    swap: name,
    "old kubelet stopped in (ms)": stoppedMs,
    "status served again after (ms)": servedAfterMs,
    "kubelet API down (ms)": a.longestMs,
    "status not served (ms)": s.longestMs,
    "longest probe gap (ms, period 1000)": Math.round(probeGap),
    "service failed requests": `${w.failures}/${w.polls}`,
    "service longest outage (ms)": w.longestMs,
    "container restarted": before?.id !== after?.id || before?.restartCount !== after?.restartCount,
  };
}

const results: Record<string, unknown>[] = [];
try {
  await startUpstream();
  await eventually("upstream runs the pod, ready", () => ok(`http://127.0.0.1:${readOnlyPort}/pods`, statusServed), 120_000, 500);
  await Bun.sleep(5_000);
  results.push(await swap("upstream → upstream (restart)", stopUpstream, startUpstream));
  results.push(await swap("upstream → this agent", stopUpstream, startBunlet));
  results.push(await swap("this agent → upstream", stopBunlet, startUpstream));
} finally {
  await stopUpstream();
  await agent?.kill("SIGKILL");
  cri.close();
  await ctd.stop();
}
console.table(results);
