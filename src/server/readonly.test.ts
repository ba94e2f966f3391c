import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import type { Summary } from "../stats/types.ts";
import { PROMETHEUS_CONTENT_TYPE } from "../metrics/registry.ts";
import { healthzApp } from "./healthz.ts";
import { DEBUGGING_DISABLED_PATHS, readOnlyApp } from "./readonly.ts";

const pod: Pod = { metadata: { name: "web", namespace: "default", uid: "u1" }, spec: { containers: [{ name: "app", image: "busybox" }] } };
const summary = { node: { nodeName: "n1", startTime: "t", cpu: { time: "t", usageNanoCores: 5 }, fs: { time: "t", usedBytes: 3 } }, pods: [] } as Summary;

function app(withStats = true) {
  return readOnlyApp({
    statuses: { list: () => [{ pod, status: { phase: "Running", sandboxReady: true, podIPs: [], containerStatuses: [] } }] },
    health: healthzApp([{ name: "ping", check: () => ({ ok: true }) }]),
    ...(withStats ? { stats: { summary: async () => summary } } : {}),
    metrics: {
      kubelet: () => "kubelet_started_pods_total 3\n",
      resource: async () => "node_cpu_usage_seconds_total 1\n",
      probes: () => "prober_probe_total 0\n",
      cadvisor: async () => "machine_cpu_cores 2\n",
    },
    spec: { spec: () => ({ num_cores: 2 }) },
  });
}

describe("the read-only port (upstream's server without authentication or debugging handlers)", () => {
  test("serves /pods, /healthz and /spec/", async () => {
    const a = app();
    const pods = (await (await a.request("/pods")).json()) as { kind: string; items: { metadata: { name: string } }[] };
    expect(pods.kind).toBe("PodList");
    expect(pods.items.map((p) => p.metadata.name)).toEqual(["web"]);
    expect(await (await a.request("/healthz")).text()).toBe("ok");
    expect(await (await a.request("/spec/")).json()).toEqual({ num_cores: 2 });
  });

  test("serves /stats/summary (with only_cpu_and_memory) and every /metrics endpoint as Prometheus text", async () => {
    const a = app();
    expect(await (await a.request("/stats/summary")).json()).toEqual(summary);
    const cpuOnly = (await (await a.request("/stats/summary?only_cpu_and_memory=true")).json()) as Summary;
    expect(cpuOnly.node).toEqual({ nodeName: "n1", startTime: "t", cpu: { time: "t", usageNanoCores: 5 } });
    const bad = await a.request("/stats/summary?only_cpu_and_memory=yes");
    expect([bad.status, await bad.text()]).toEqual([400, 'invalid value for only_cpu_and_memory: "yes"']);
    for (const [path, body] of [
      ["/metrics", "kubelet_started_pods_total 3\n"],
      ["/metrics/resource", "node_cpu_usage_seconds_total 1\n"],
      ["/metrics/probes", "prober_probe_total 0\n"],
      ["/metrics/cadvisor", "machine_cpu_cores 2\n"],
    ] as const) {
      const res = await a.request(path);
      expect([path, res.status, res.headers.get("content-type"), await res.text()]).toEqual([path, 200, PROMETHEUS_CONTENT_TYPE, body]);
    }
  });

  test("without stats, /stats/summary answers 503", async () => {
    const res = await app(false).request("/stats/summary");
    expect(res.status).toBe(503);
  });

  test("exec, attach, port-forward, logs and the rest answer upstream's 405 Debug endpoints are disabled., under every path", async () => {
    const a = app();
    for (const path of DEBUGGING_DISABLED_PATHS) {
      for (const [method, sub] of [
        ["GET", ""],
        ["POST", "default/web/app"],
      ] as const) {
        const res = await a.request(`${path}${sub}`, { method });
        expect([path, sub, res.status, await res.text()]).toEqual([path, sub, 405, "Debug endpoints are disabled.\n"]);
      }
    }
    expect((await a.request("/configz")).status).toBe(404);
    expect((await a.request("/nothing")).status).toBe(404);
  });
});
