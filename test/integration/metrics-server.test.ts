// `kubectl top` through a real metrics-server: metrics-server (built from Go
// modules by scripts/controlplane/build.sh --with-metrics-server, on first
// use) runs as a host process, registered with the aggregator as
// v1beta1.metrics.k8s.io behind a selector-less Service whose endpoint is the
// host's address; kube-apiserver dials it directly (--enable-aggregator-routing,
// no kube-proxy here). It scrapes the agent's /metrics/resource on 10250 at
// the node's InternalIP with the admin's client certificate.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, mkdirSync, openSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "top-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let metricsServer: Subprocess | undefined;
let metricsServerLog: string;

/** The IPv4 address of the interface the default route leaves by (an Endpoints object may not hold loopback). */
function defaultRouteAddress(): string {
  const routes = readFileSync("/proc/net/route", "utf8").split("\n").slice(1);
  const iface = routes.map((l) => l.trim().split(/\s+/)).find((f) => f[1] === "00000000" && f[7] === "00000000")?.[0];
  const addr = iface ? networkInterfaces()[iface]?.find((a) => a.family === "IPv4")?.address : undefined;
  if (!addr) throw new Error("no default route with an IPv4 address: metrics-server needs a non-loopback address for its Endpoints");
  return addr;
}

/** metrics-server's binary: built once into the control plane's cache (minutes when cold), then reused. */
function metricsServerBinary(): string {
  const script = resolve(import.meta.dir, "../../scripts/controlplane/build.sh");
  const r = Bun.spawnSync(["bash", script, "--with-metrics-server"], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`build.sh --with-metrics-server failed:\n${r.stderr.toString()}`);
  return join(r.stdout.toString().trim().split("\n").pop()!, "metrics-server");
}

async function kubectl(...args: string[]): Promise<string> {
  const r = await cp.kubectl(args);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}
const apply = async (obj: unknown) => {
  const r = await cp.kubectl(["apply", "-f", "-"], { stdin: JSON.stringify(obj) });
  if (r.code !== 0) throw new Error(`kubectl apply: ${r.stderr}`);
};

beforeAll(async () => {
  requireRoot();
  const binary = metricsServerBinary();
  [ctd, cp] = await startTogether([startContainerd({ name: "top" }), startControlPlane({ name: "top", apiServerArgs: ["--enable-aggregator-routing=true"] })]);
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, "--node-ip=127.0.0.1"],
    extraConfig: {
      // Self-signed serving certificate: metrics-server runs with --kubelet-insecure-tls.
      authentication: { x509: { clientCAFile: cp.caFile }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
    },
  });

  const hostIP = defaultRouteAddress();
  const port = await freePort();
  const dir = join(cp.dir, "metrics-server");
  mkdirSync(dir, { recursive: true });
  metricsServerLog = join(dir, "metrics-server.log");
  const fd = openSync(metricsServerLog, "a");
  metricsServer = Bun.spawn(
    [
      binary,
      `--bind-address=${hostIP}`,
      `--secure-port=${port}`,
      `--cert-dir=${dir}`,
      `--kubeconfig=${cp.adminKubeconfig}`,
      `--authentication-kubeconfig=${cp.adminKubeconfig}`,
      `--authorization-kubeconfig=${cp.adminKubeconfig}`,
      `--requestheader-client-ca-file=${join(cp.dir, "pki/front-proxy-ca.crt")}`,
      "--kubelet-insecure-tls",
      "--kubelet-preferred-address-types=InternalIP",
      "--kubelet-use-node-status-port",
      "--metric-resolution=10s",
      // It must be below the resolution (the default is 10s).
      "--kubelet-request-timeout=5s",
      "--v=2",
    ],
    { stdout: fd, stderr: fd },
  );
  process.once("exit", () => metricsServer?.kill("SIGKILL"));

  // What the metrics-server manifests register, with an endpoint of our own instead of a selector.
  await apply({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "metrics-server", namespace: "kube-system" },
    spec: { ports: [{ name: "https", port: 443, targetPort: port, protocol: "TCP" }] },
  });
  await apply({
    apiVersion: "v1",
    kind: "Endpoints",
    metadata: { name: "metrics-server", namespace: "kube-system" },
    subsets: [{ addresses: [{ ip: hostIP }], ports: [{ name: "https", port, protocol: "TCP" }] }],
  });
  await apply({
    apiVersion: "apiregistration.k8s.io/v1",
    kind: "APIService",
    metadata: { name: "v1beta1.metrics.k8s.io" },
    spec: {
      service: { name: "metrics-server", namespace: "kube-system", port: 443 },
      group: "metrics.k8s.io",
      version: "v1beta1",
      insecureSkipTLSVerify: true,
      groupPriorityMinimum: 100,
      versionPriority: 100,
    },
  });
}, 1_800_000);

afterAll(async () => {
  metricsServer?.kill("SIGTERM");
  await metricsServer?.exited;
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

const logTail = () => readFileSync(metricsServerLog, "utf8").split("\n").slice(-15).join("\n");
/** Fails at once, with its log, if metrics-server has exited. */
const alive = () => {
  if (metricsServer?.exitCode !== null) throw new Error(`metrics-server exited (${metricsServer?.exitCode}):\n${logTail()}`);
};

describe("kubectl top through metrics-server", () => {
  test("the metrics API becomes Available, and kubectl top node shows the node's CPU and memory", async () => {
    await eventually(
      "APIService v1beta1.metrics.k8s.io Available",
      async () => {
        alive();
        const svc = JSON.parse(await kubectl("get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "json"));
        return svc.status?.conditions?.some((c: any) => c.type === "Available" && c.status === "True");
      },
      90_000,
      1000,
    ).catch((e) => {
      throw new Error(`${(e as Error).message}\nmetrics-server log:\n${logTail()}`);
    });
    const out = await eventually(
      "kubectl top node with CPU > 0",
      async () => {
        const r = await cp.kubectl(["top", "node", NODE, "--no-headers"]);
        if (r.code !== 0) return undefined;
        // A live node always uses some CPU (the agent, containerd, the control plane here).
        return Number.parseInt(r.stdout.trim().split(/\s+/)[1] ?? "0", 10) > 0 ? r.stdout : undefined;
      },
      90_000,
      2000,
    ).catch((e) => {
      throw new Error(`${(e as Error).message}\nmetrics-server log:\n${logTail()}`);
    });
    console.log(`kubectl top node: ${out.trim()}`);
    // NAME CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%)
    const [name, cpu, cpuPct, memory, memoryPct] = out.trim().split(/\s+/);
    expect(name).toBe(NODE);
    expect(cpu).toMatch(/^[1-9]\d*m$/);
    expect(cpuPct).toMatch(/^\d+%$/);
    expect(memory).toMatch(/^\d+Mi$/);
    expect(Number.parseInt(memory!, 10)).toBeGreaterThan(0);
    expect(memoryPct).toMatch(/^\d+%$/);
  }, 240_000);

  test("kubectl top pod shows a busy-looping pod using CPU, and its container with --containers", async () => {
    await apply({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "spinner", namespace: "default" },
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: "spin",
            image: ctd.busyboxImage,
            imagePullPolicy: "IfNotPresent",
            command: ["sh", "-c", "while :; do :; done"],
            // A fifth of a core: visible, and gentle with a shared 2-core machine.
            resources: { limits: { cpu: "200m", memory: "32Mi" } },
          },
        ],
      },
    });
    await eventually("spinner Running", async () => JSON.parse(await kubectl("get", "pod", "spinner", "-o", "json")).status?.phase === "Running", 60_000);
    // metrics-server needs two scrapes of the pod (10 s apart) for a CPU rate.
    const out = await eventually(
      "kubectl top pod spinner with CPU > 0",
      async () => {
        const r = await cp.kubectl(["top", "pod", "spinner", "--no-headers"]);
        if (r.code !== 0) return undefined;
        const [, cpu] = r.stdout.trim().split(/\s+/);
        return Number.parseInt(cpu ?? "0", 10) > 0 ? r.stdout : undefined;
      },
      120_000,
      2000,
    ).catch((e) => {
      throw new Error(`${(e as Error).message}\nmetrics-server log:\n${logTail()}`);
    });
    console.log(`kubectl top pod: ${out.trim()}`);
    const [name, cpu, memory] = out.trim().split(/\s+/);
    expect(name).toBe("spinner");
    // A loop capped at 200m: well above zero, not above its limit (with some slack for the rate's window).
    expect(Number.parseInt(cpu!, 10)).toBeGreaterThan(20);
    expect(Number.parseInt(cpu!, 10)).toBeLessThanOrEqual(260);
    expect(memory).toMatch(/^\d+Mi$/);
    const containers = await kubectl("top", "pod", "spinner", "--containers", "--no-headers");
    expect(containers.trim().split(/\s+/).slice(0, 2)).toEqual(["spinner", "spin"]);
  }, 240_000);
});
