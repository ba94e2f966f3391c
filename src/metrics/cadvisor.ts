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

const NS = 1e9;

const escapeLabel = (v: string) => (/[\\"\n]/.test(v) ? v.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"') : v);
const formatValue = (v: number) => (Number.isNaN(v) ? "NaN" : v === Infinity ? "+Inf" : v === -Infinity ? "-Inf" : String(v));

/**
 * A container's label text, escaped once per scrape, in three parts so that
 * one more label lands in name order (client_golang sorts label pairs):
 * `cpu` and `device` after `container`, `interface` after `image`.
 */
interface LabelParts {
  head: string;
  middle: string;
  tail: string;
}

function labelParts(c: CadvisorContainer): LabelParts {
  return {
    head: `container="${escapeLabel(c.container)}"`,
    middle: `id="${escapeLabel(c.id)}",image="${escapeLabel(c.image)}"`,
    tail: `name="${escapeLabel(c.name)}",namespace="${escapeLabel(c.namespace)}",pod="${escapeLabel(c.pod)}"`,
  };
}

const withExtra = (l: LabelParts, label: "cpu" | "device" | "interface" | undefined, value: string) =>
  label === undefined
    ? `{${l.head},${l.middle},${l.tail}}`
    : label === "interface"
      ? `{${l.head},${l.middle},interface="${escapeLabel(value)}",${l.tail}}`
      : `{${l.head},${label}="${escapeLabel(value)}",${l.middle},${l.tail}}`;

/**
 * The text exposition format written straight from the view: about 17,000
 * samples for 110 pods, so no per-sample objects. Families without samples
 * are left out, as client_golang does.
 */
export function renderCadvisorMetrics(view: CadvisorView | undefined, machine: MachineFacts | undefined, nowMs: number): string {
  const all = view?.containers ?? [];
  const labels = all.map(labelParts);
  const out: string[] = [];
  const family = (name: string, help: string, type: "counter" | "gauge", lines: string[]) => {
    if (lines.length === 0) return;
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const l of lines) out.push(l);
  };
  /** One sample per container that has the value. */
  const each = (name: string, get: (c: CadvisorContainer) => number | undefined): string[] => {
    const lines: string[] = [];
    all.forEach((c, i) => {
      const v = get(c);
      if (v !== undefined) lines.push(`${name}${withExtra(labels[i]!, undefined, "")} ${formatValue(v)}`);
    });
    return lines;
  };
  /** One sample per container and item (device, interface). */
  const per = <T>(name: string, items: (c: CadvisorContainer) => T[], label: "device" | "interface", key: (t: T) => string, get: (t: T) => number | undefined): string[] => {
    const lines: string[] = [];
    all.forEach((c, i) => {
      for (const t of items(c)) {
        const v = get(t);
        if (v !== undefined) lines.push(`${name}${withExtra(labels[i]!, label, key(t))} ${formatValue(v)}`);
      }
    });
    return lines;
  };
  const withQuota = (c: CadvisorContainer) => (c.cgroup.spec?.cpuQuotaUs ?? 0) !== 0;
  const cpu = (c: CadvisorContainer) => c.cgroup.cpu;
  const mem = (c: CadvisorContainer) => c.cgroup.memory;
  const ns = (v: number | undefined) => (v === undefined ? undefined : v / NS);
  const gauge = (name: string, help: string, get: (c: CadvisorContainer) => number | undefined) => family(name, help, "gauge", each(name, get));
  const counter = (name: string, help: string, get: (c: CadvisorContainer) => number | undefined) => family(name, help, "counter", each(name, get));
  const fsItems = (c: CadvisorContainer) => c.fs;
  const ioItems = (c: CadvisorContainer) => c.io;
  const fsFamily = (name: string, help: string, get: (f: CadvisorContainer["fs"][number]) => number | undefined) =>
    family(
      name,
      help,
      "gauge",
      per(name, fsItems, "device", (f) => f.device, get),
    );
  const ioFamily = (name: string, help: string, get: (d: CadvisorContainer["io"][number]) => number) =>
    family(
      name,
      help,
      "counter",
      per(name, ioItems, "device", (d) => d.device, get),
    );
  const net = (name: string, help: string, get: (i: CadvisorContainer["interfaces"][number]) => number) =>
    family(
      name,
      help,
      "counter",
      per(
        name,
        (c) => c.interfaces,
        "interface",
        (i) => i.name,
        get,
      ),
    );

  // Families in name order, as client_golang's registry sorts them.
  counter("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", (c) => (withQuota(c) ? cpu(c)?.nrPeriods : undefined));
  counter("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", (c) => (withQuota(c) ? cpu(c)?.nrThrottled : undefined));
  counter("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", (c) =>
    withQuota(c) ? ns(cpu(c)?.throttledNanoseconds) : undefined,
  );
  counter("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", (c) => ns(cpu(c)?.systemNanoseconds));
  {
    const name = "container_cpu_usage_seconds_total";
    const lines: string[] = [];
    all.forEach((c, i) => {
      const usage = cpu(c)?.usageNanoseconds;
      if (usage !== undefined && usage > 0) lines.push(`${name}${withExtra(labels[i]!, "cpu", "total")} ${formatValue(usage / NS)}`);
    });
    family(name, "Cumulative cpu time consumed in seconds.", "counter", lines);
  }
  counter("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", (c) => ns(cpu(c)?.userNanoseconds));
  fsFamily("container_fs_inodes_free", "Number of available Inodes", (f) => f.inodesFree);
  fsFamily("container_fs_inodes_total", "Number of Inodes", (f) => f.inodes);
  fsFamily("container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.", (f) => f.limitBytes);
  ioFamily("container_fs_reads_bytes_total", "Cumulative count of bytes read", (d) => d.readBytes);
  fsFamily("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", (f) => f.usageBytes);
  ioFamily("container_fs_writes_bytes_total", "Cumulative count of bytes written", (d) => d.writeBytes);
  gauge("container_last_seen", "Last time a container was seen by the exporter", () => Math.floor(nowMs / 1000));
  gauge("container_memory_cache", "Number of bytes of page cache memory.", (c) => mem(c)?.cacheBytes);
  counter("container_memory_failcnt", "Number of memory usage hits limits", (c) => mem(c)?.failcnt);
  gauge("container_memory_mapped_file", "Size of memory mapped files in bytes.", (c) => mem(c)?.mappedFileBytes);
  gauge("container_memory_rss", "Size of RSS in bytes.", (c) => mem(c)?.rssBytes);
  gauge("container_memory_swap", "Container swap usage in bytes.", (c) => (mem(c) ? (mem(c)!.swapBytes ?? 0) : undefined));
  gauge("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", (c) => mem(c)?.usageBytes);
  gauge("container_memory_working_set_bytes", "Current working set in bytes.", (c) => mem(c)?.workingSetBytes);
  net("container_network_receive_bytes_total", "Cumulative count of bytes received", (i) => i.rxBytes);
  net("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", (i) => i.rxErrors);
  net("container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving", (i) => i.rxDropped);
  net("container_network_receive_packets_total", "Cumulative count of packets received", (i) => i.rxPackets);
  net("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", (i) => i.txBytes);
  net("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", (i) => i.txErrors);
  net("container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting", (i) => i.txDropped);
  net("container_network_transmit_packets_total", "Cumulative count of packets transmitted", (i) => i.txPackets);
  counter("container_oom_events_total", "Count of out of memory events observed for the container", (c) => (mem(c) ? (mem(c)!.oomKills ?? 0) : undefined));
  gauge("container_processes", "Number of processes running inside the container.", (c) => c.cgroup.processes);
  family("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", "gauge", [`container_scrape_error ${view ? 0 : 1}`]);
  gauge("container_spec_cpu_period", "CPU period of the container.", (c) => c.cgroup.spec?.cpuPeriodUs);
  gauge("container_spec_cpu_quota", "CPU quota of the container.", (c) => (withQuota(c) ? c.cgroup.spec?.cpuQuotaUs : undefined));
  gauge("container_spec_cpu_shares", "CPU share of the container.", (c) => c.cgroup.spec?.cpuShares);
  gauge("container_spec_memory_limit_bytes", "Memory limit for the container.", (c) => c.cgroup.spec?.memoryLimitBytes);
  gauge("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", (c) => c.startTimeSeconds);
  gauge("container_threads", "Number of threads running inside the container", (c) => c.cgroup.pids);
  gauge("container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero", (c) =>
    c.cgroup.pids !== undefined ? (c.cgroup.pidsMax ?? 0) : undefined,
  );

  if (machine) {
    const m = `{boot_id="${escapeLabel(machine.bootId)}",machine_id="${escapeLabel(machine.machineId)}",system_uuid="${escapeLabel(machine.systemUuid)}"}`;
    const fact = (name: string, help: string, v: number) => family(name, help, "gauge", [`${name}${m} ${formatValue(v)}`]);
    fact("machine_cpu_cores", "Number of logical CPU cores.", machine.cores);
    fact("machine_cpu_physical_cores", "Number of physical CPU cores.", machine.physicalCores);
    fact("machine_cpu_sockets", "Number of CPU sockets.", machine.sockets);
    fact("machine_memory_bytes", "Amount of memory installed on the machine.", machine.memoryBytes);
    fact("machine_swap_bytes", "Amount of swap memory available on the machine.", machine.swapBytes);
  }
  return out.join("\n") + "\n";
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
