/**
 * `/metrics/resource`: the CPU and memory figures metrics-server and the
 * HPA read, in upstream's names (pkg/kubelet/metrics/collectors/
 * resource_metrics.go), built from the same Summary as `/stats/summary`.
 * Each sample carries the time of its reading, as upstream does.
 */
import type { StatsProvider, Summary } from "../stats/types.ts";
import { Registry, stable } from "./registry.ts";

const ms = (time: string | undefined) => (time ? Date.parse(time) : undefined);
const cpuSeconds = (ns: number | undefined) => (ns === undefined ? undefined : ns / 1e9);

export function renderResourceMetrics(summary: Summary | undefined): string {
  const r = new Registry();
  const s = summary;
  const present = <T>(x: T | undefined): x is T => x !== undefined;
  r.counterFn("node_cpu_usage_seconds_total", stable("Cumulative cpu time consumed by the node in core-seconds"), () =>
    [s?.node.cpu].filter(present).flatMap((c) => (c.usageCoreNanoSeconds === undefined ? [] : [{ value: cpuSeconds(c.usageCoreNanoSeconds)!, timestampMs: ms(c.time) }])),
  );
  r.gaugeFn("node_memory_working_set_bytes", stable("Current working set of the node in bytes"), () =>
    [s?.node.memory].filter(present).flatMap((m) => (m.workingSetBytes === undefined ? [] : [{ value: m.workingSetBytes, timestampMs: ms(m.time) }])),
  );
  const containers = () =>
    (s?.pods ?? []).flatMap((p) => p.containers.map((c) => ({ pod: p, c, labels: { container: c.name, namespace: p.podRef.namespace, pod: p.podRef.name } })));
  r.counterFn("container_cpu_usage_seconds_total", stable("Cumulative cpu time consumed by the container in core-seconds"), () =>
    containers().flatMap(({ c, labels }) =>
      c.cpu?.usageCoreNanoSeconds === undefined ? [] : [{ labels, value: cpuSeconds(c.cpu.usageCoreNanoSeconds)!, timestampMs: ms(c.cpu.time) }],
    ),
  );
  r.gaugeFn("container_memory_working_set_bytes", stable("Current working set of the container in bytes"), () =>
    containers().flatMap(({ c, labels }) => (c.memory?.workingSetBytes === undefined ? [] : [{ labels, value: c.memory.workingSetBytes, timestampMs: ms(c.memory.time) }])),
  );
  r.gaugeFn("container_start_time_seconds", stable("Start time of the container since unix epoch in seconds"), () =>
    containers().flatMap(({ c, labels }) => (ms(c.startTime) === undefined ? [] : [{ labels, value: ms(c.startTime)! / 1000 }])),
  );
  const pods = () => (s?.pods ?? []).map((p) => ({ p, labels: { namespace: p.podRef.namespace, pod: p.podRef.name } }));
  r.counterFn("pod_cpu_usage_seconds_total", stable("Cumulative cpu time consumed by the pod in core-seconds"), () =>
    pods().flatMap(({ p, labels }) => (p.cpu?.usageCoreNanoSeconds === undefined ? [] : [{ labels, value: cpuSeconds(p.cpu.usageCoreNanoSeconds)!, timestampMs: ms(p.cpu.time) }])),
  );
  r.gaugeFn("pod_memory_working_set_bytes", stable("Current working set of the pod in bytes"), () =>
    pods().flatMap(({ p, labels }) => (p.memory?.workingSetBytes === undefined ? [] : [{ labels, value: p.memory.workingSetBytes, timestampMs: ms(p.memory.time) }])),
  );
  r.gaugeFn("resource_scrape_error", stable("1 if there was an error while getting container metrics, 0 otherwise"), () => [{ value: s ? 0 : 1 }]);
  return r.render();
}

/** Reads a summary; a failed read is reported through resource_scrape_error rather than a failed scrape. */
export async function resourceMetrics(stats: StatsProvider | undefined): Promise<string> {
  const summary = stats ? await stats.summary().catch(() => undefined) : undefined;
  return renderResourceMetrics(summary);
}
