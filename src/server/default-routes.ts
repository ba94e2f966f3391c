/**
 * What upstream's InstallAuthNotRequiredHandlers serves, on both the kubelet
 * API (10250, behind its authentication) and the read-only port (10255,
 * open): `/pods`, `/stats/summary`, the health checks, and `/metrics`,
 * `/metrics/resource`, `/metrics/probes`, `/metrics/cadvisor`.
 */
import type { Hono, Env } from "hono";
import type { Pod } from "../pods/schema.ts";
import type { ReportedStatuses } from "../status/index.ts";
import type { CpuStats, ContainerStats, MemoryStats, StatsProvider, Summary } from "../stats/types.ts";
import { PROMETHEUS_CONTENT_TYPE } from "../metrics/registry.ts";
import type { MetricsEndpoints } from "../metrics/endpoints.ts";
import { HttpError } from "./errors.ts";

export interface DefaultRoutesOptions {
  /** Pods with their statuses (LocalStatusStore). */
  pods: ReportedStatuses;
  /** `/stats/*` answers 503 without it. */
  stats?: StatsProvider | undefined;
  /** healthzApp(...): served under `/healthz`. */
  health: Hono;
  /** `/metrics`, `/metrics/resource`, `/metrics/probes`, `/metrics/cadvisor` (Prometheus text); 404 without it. */
  metrics?: MetricsEndpoints | undefined;
}

/** Upstream's GetCPUAndMemoryStats: only CPU and memory of the node, its system containers, pods and containers. */
export function cpuAndMemoryOnly(s: Summary): Summary {
  const cm = <T extends { cpu?: CpuStats; memory?: MemoryStats }>(x: T) => ({
    ...(x.cpu ? { cpu: x.cpu } : {}),
    ...(x.memory ? { memory: x.memory } : {}),
  });
  const container = (c: ContainerStats): ContainerStats => ({ name: c.name, startTime: c.startTime, ...cm(c) });
  return {
    node: {
      nodeName: s.node.nodeName,
      startTime: s.node.startTime,
      ...cm(s.node),
      ...(s.node.systemContainers ? { systemContainers: s.node.systemContainers.map(container) } : {}),
    },
    pods: s.pods.map((p) => ({ podRef: p.podRef, startTime: p.startTime, containers: p.containers.map(container), ...cm(p) })),
  };
}

const asApiPod = (pod: Pod, status: unknown) => ({ ...pod, apiVersion: "v1", kind: "Pod", status });

/** Adds the routes to `app`; its onError maps HttpError (a bad query 400, no stats 503). */
export function installDefaultRoutes<E extends Env>(app: Hono<E>, opts: DefaultRoutesOptions): void {
  app.get("/pods", (c) =>
    c.json({ kind: "PodList", apiVersion: "v1", metadata: {}, items: opts.pods.list().map(({ pod, status, apiStatus }) => asApiPod(pod, apiStatus ?? status)) }),
  );

  app.get("/stats/summary", async (c) => {
    if (!opts.stats) throw new HttpError(503, "stats are not available");
    const only = c.req.query("only_cpu_and_memory");
    if (only !== undefined && only !== "true" && only !== "false") {
      throw new HttpError(400, `invalid value for only_cpu_and_memory: ${JSON.stringify(only)}`);
    }
    const summary = await opts.stats.summary();
    return c.json(only === "true" ? cpuAndMemoryOnly(summary) : summary);
  });

  app.route("/", opts.health);

  if (opts.metrics) {
    const m = opts.metrics;
    const prometheus = { "content-type": PROMETHEUS_CONTENT_TYPE };
    app.get("/metrics", (c) => c.body(m.kubelet(), 200, prometheus));
    app.get("/metrics/resource", async (c) => c.body(await m.resource(), 200, prometheus));
    app.get("/metrics/probes", (c) => c.body(m.probes(), 200, prometheus));
    app.get("/metrics/cadvisor", async (c) => c.body(await m.cadvisor(), 200, prometheus));
  }
}
