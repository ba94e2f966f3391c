/**
 * `/metrics/cadvisor`: the container series the upstream kubelet exports
 * from its embedded cAdvisor (github.com/google/cadvisor/metrics), under the
 * same names, types, HELP texts, units and label sets, so the dashboards and
 * recording rules written for it (kube-prometheus, the Prometheus and
 * Grafana charts) work unchanged:
 * - every container series carries `container`, `id`, `image`, `name`,
 *   `namespace`, `pod` (upstream's containerPrometheusLabelsFunc), plus
 *   `cpu`, `device` or `interface` where upstream adds them;
 * - the CFS series only for cgroups with a quota, container_spec_cpu_quota
 *   likewise, a memory limit of "max" as 0 (cAdvisor's specMemoryValue);
 * - cpu usage as `cpu="total"` (the kubelet does not enable per-CPU usage);
 * - the machine series labelled `boot_id`, `machine_id`, `system_uuid`.
 *
 * Values are read at scrape time (stats/cadvisor.ts), so samples carry no
 * timestamp: the scrape's own time is when they were read, and Prometheus
 * then marks a deleted pod's series stale at once (series with explicit
 * timestamps are not marked stale).
 *
 * Not exported (the kubelet's cAdvisor has them; nothing here reads their
 * source): container_cpu_load_average_10s, container_tasks_state,
 * container_memory_failures_total, container_memory_max_usage_bytes,
 * container_fs_* operation counts and times, container_file_descriptors,
 * container_sockets, container_ulimits_soft, cadvisor_version_info.
 */
import type { CadvisorContainer, CadvisorView } from "../stats/cadvisor.ts";
import { Registry, type Labels } from "./registry.ts";

export interface MachineFacts {
  cores: number;
  physicalCores: number;
  sockets: number;
  memoryBytes: number;
  swapBytes: number;
  bootId: string;
  machineId: string;
  systemUuid: string;
}

type Sample = { labels?: Labels; value: number };

const base = (c: CadvisorContainer): Labels => ({ container: c.container, id: c.id, image: c.image, name: c.name, namespace: c.namespace, pod: c.pod });
const NS = 1e9;

export function renderCadvisorMetrics(view: CadvisorView | undefined, machine: MachineFacts | undefined, nowMs: number): string {
  const r = new Registry();
  const all = view?.containers ?? [];
  /** One sample per container that has the value. */
  const each = (get: (c: CadvisorContainer) => number | undefined) => (): Sample[] =>
    all.flatMap((c) => {
      const v = get(c);
      return v === undefined ? [] : [{ labels: base(c), value: v }];
    });
  /** One sample per container and item (device, interface). */
  const per = <T>(items: (c: CadvisorContainer) => T[], label: string, key: (t: T) => string, get: (t: T) => number | undefined) => (): Sample[] =>
    all.flatMap((c) =>
      items(c).flatMap((t) => {
        const v = get(t);
        return v === undefined ? [] : [{ labels: withLabel(base(c), label, key(t)), value: v }];
      }),
    );
  const withQuota = (c: CadvisorContainer) => (c.cgroup.spec?.cpuQuotaUs ?? 0) !== 0;
  const cpu = (c: CadvisorContainer) => c.cgroup.cpu;
  const mem = (c: CadvisorContainer) => c.cgroup.memory;
  const ns = (v: number | undefined) => (v === undefined ? undefined : v / NS);
  const gauge = (name: string, help: string, read: () => Sample[]) => r.gaugeFn(name, help, read);
  const counter = (name: string, help: string, read: () => Sample[]) => r.counterFn(name, help, read);
  const iface = (c: CadvisorContainer) => c.interfaces;

  // Families in name order, as client_golang's registry sorts them.
  counter("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", each((c) => (withQuota(c) ? cpu(c)?.nrPeriods : undefined)));
  counter("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", each((c) => (withQuota(c) ? cpu(c)?.nrThrottled : undefined)));
  counter("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", each((c) => (withQuota(c) ? ns(cpu(c)?.throttledNanoseconds) : undefined)));
  counter("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", each((c) => ns(cpu(c)?.systemNanoseconds)));
  counter("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", () =>
    all.flatMap((c) => {
      const usage = cpu(c)?.usageNanoseconds;
      return usage !== undefined && usage > 0 ? [{ labels: withLabel(base(c), "cpu", "total"), value: usage / NS }] : [];
    }),
  );
  counter("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", each((c) => ns(cpu(c)?.userNanoseconds)));
  gauge("container_fs_inodes_free", "Number of available Inodes", per((c) => c.fs, "device", (f) => f.device, (f) => f.inodesFree));
  gauge("container_fs_inodes_total", "Number of Inodes", per((c) => c.fs, "device", (f) => f.device, (f) => f.inodes));
  gauge("container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.", per((c) => c.fs, "device", (f) => f.device, (f) => f.limitBytes));
  counter("container_fs_reads_bytes_total", "Cumulative count of bytes read", per((c) => c.io, "device", (d) => d.device, (d) => d.readBytes));
  gauge("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", per((c) => c.fs, "device", (f) => f.device, (f) => f.usageBytes));
  counter("container_fs_writes_bytes_total", "Cumulative count of bytes written", per((c) => c.io, "device", (d) => d.device, (d) => d.writeBytes));
  gauge("container_last_seen", "Last time a container was seen by the exporter", each(() => Math.floor(nowMs / 1000)));
  gauge("container_memory_cache", "Number of bytes of page cache memory.", each((c) => mem(c)?.cacheBytes));
  counter("container_memory_failcnt", "Number of memory usage hits limits", each((c) => mem(c)?.failcnt));
  gauge("container_memory_mapped_file", "Size of memory mapped files in bytes.", each((c) => mem(c)?.mappedFileBytes));
  gauge("container_memory_rss", "Size of RSS in bytes.", each((c) => mem(c)?.rssBytes));
  gauge("container_memory_swap", "Container swap usage in bytes.", each((c) => (mem(c) ? (mem(c)!.swapBytes ?? 0) : undefined)));
  gauge("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", each((c) => mem(c)?.usageBytes));
  gauge("container_memory_working_set_bytes", "Current working set in bytes.", each((c) => mem(c)?.workingSetBytes));
  counter("container_network_receive_bytes_total", "Cumulative count of bytes received", per(iface, "interface", (i) => i.name, (i) => i.rxBytes));
  counter("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", per(iface, "interface", (i) => i.name, (i) => i.rxErrors));
  counter("container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving", per(iface, "interface", (i) => i.name, (i) => i.rxDropped));
  counter("container_network_receive_packets_total", "Cumulative count of packets received", per(iface, "interface", (i) => i.name, (i) => i.rxPackets));
  counter("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", per(iface, "interface", (i) => i.name, (i) => i.txBytes));
  counter("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", per(iface, "interface", (i) => i.name, (i) => i.txErrors));
  counter("container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting", per(iface, "interface", (i) => i.name, (i) => i.txDropped));
  counter("container_network_transmit_packets_total", "Cumulative count of packets transmitted", per(iface, "interface", (i) => i.name, (i) => i.txPackets));
  counter("container_oom_events_total", "Count of out of memory events observed for the container", each((c) => (mem(c) ? (mem(c)!.oomKills ?? 0) : undefined)));
  gauge("container_processes", "Number of processes running inside the container.", each((c) => c.cgroup.processes));
  gauge("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", () => [{ value: view ? 0 : 1 }]);
  gauge("container_spec_cpu_period", "CPU period of the container.", each((c) => c.cgroup.spec?.cpuPeriodUs));
  gauge("container_spec_cpu_quota", "CPU quota of the container.", each((c) => (withQuota(c) ? c.cgroup.spec?.cpuQuotaUs : undefined)));
  gauge("container_spec_cpu_shares", "CPU share of the container.", each((c) => c.cgroup.spec?.cpuShares));
  gauge("container_spec_memory_limit_bytes", "Memory limit for the container.", each((c) => c.cgroup.spec?.memoryLimitBytes));
  gauge("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", each((c) => c.startTimeSeconds));
  gauge("container_threads", "Number of threads running inside the container", each((c) => c.cgroup.pids));
  gauge("container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero", each((c) => (c.cgroup.pids !== undefined ? (c.cgroup.pidsMax ?? 0) : undefined)));

  const m = machine;
  const machineLabels = (): Labels => ({ boot_id: m!.bootId, machine_id: m!.machineId, system_uuid: m!.systemUuid });
  const fact = (get: (m: MachineFacts) => number) => (): Sample[] => (m ? [{ labels: machineLabels(), value: get(m) }] : []);
  gauge("machine_cpu_cores", "Number of logical CPU cores.", fact((x) => x.cores));
  gauge("machine_cpu_physical_cores", "Number of physical CPU cores.", fact((x) => x.physicalCores));
  gauge("machine_cpu_sockets", "Number of CPU sockets.", fact((x) => x.sockets));
  gauge("machine_memory_bytes", "Amount of memory installed on the machine.", fact((x) => x.memoryBytes));
  gauge("machine_swap_bytes", "Amount of swap memory available on the machine.", fact((x) => x.swapBytes));
  return r.render();
}

/** The base labels with one more, in name order (client_golang sorts label pairs). */
function withLabel(labels: Labels, name: string, value: string): Labels {
  return Object.fromEntries(Object.entries({ ...labels, [name]: value }).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** The machine series' numbers from `/spec/` (cAdvisor's MachineInfo JSON, node/machine-spec.ts). */
export function machineFactsFromSpec(spec: Record<string, unknown>): MachineFacts {
  const n = (k: string) => (typeof spec[k] === "number" ? (spec[k] as number) : 0);
  const s = (k: string) => (typeof spec[k] === "string" ? (spec[k] as string) : "");
  return {
    cores: n("num_cores"),
    physicalCores: n("num_physical_cores"),
    sockets: n("num_sockets"),
    memoryBytes: n("memory_capacity"),
    swapBytes: n("swap_capacity"),
    bootId: s("boot_id"),
    machineId: s("machine_id"),
    systemUuid: s("system_uuid"),
  };
}

/** The view of a collector; a failed read is reported through container_scrape_error, as upstream. */
export async function cadvisorMetrics(read: () => Promise<CadvisorView>, machine: () => MachineFacts | undefined, now: () => number): Promise<string> {
  const view = await read().catch(() => undefined);
  let facts: MachineFacts | undefined;
  try {
    facts = machine();
  } catch {
    facts = undefined;
  }
  return renderCadvisorMetrics(view, facts, now());
}
