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
 * Where upstream reports a value this agent has no source for, the series
 * is left out rather than made up, except where upstream's own value is a
 * constant of the kubelet's setup (the load averages and task states: its
 * load reader is off; the pressure series with KubeletPSI where the kernel
 * has no *.pressure file, as on cgroup v1). Left out: memory.peak before
 * kernel 5.19, v2 kernel memory before 5.18 (upstream reports 0 for each);
 * machine_nvm_* (no NVDIMMs read here).
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
  /** For cadvisor_version_info: uname's release and /etc/os-release's PRETTY_NAME (cAdvisor's VersionInfo). */
  kernelVersion: string;
  osVersion: string;
}

const NS = 1e9;

const escapeLabel = (v: string) => (/[\\"\n]/.test(v) ? v.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"') : v);
const formatValue = (v: number) => (Number.isNaN(v) ? "NaN" : v === Infinity ? "+Inf" : v === -Infinity ? "-Inf" : String(v));

/** Where a label goes among the base labels (client_golang writes label pairs sorted by name). */
type Extra = readonly [name: string, value: string];

/**
 * A container's label text, escaped once per scrape: the base labels in
 * three parts, so that extra labels land in name order: `cpu`, `device`,
 * `failure_type` after `container`; `interface` after `image`; `scope`,
 * `state`, `ulimit` after `pod`.
 */
interface LabelParts {
  head: string;
  middle: string;
  tail: string;
  /** `{...}` with no extra label. */
  plain: string;
}

function labelParts(c: CadvisorContainer): LabelParts {
  const head = `container="${escapeLabel(c.container)}"`;
  const middle = `id="${escapeLabel(c.id)}",image="${escapeLabel(c.image)}"`;
  const tail = `name="${escapeLabel(c.name)}",namespace="${escapeLabel(c.namespace)}",pod="${escapeLabel(c.pod)}"`;
  return { head, middle, tail, plain: `{${head},${middle},${tail}}` };
}

function withExtra(l: LabelParts, extras: readonly Extra[]): string {
  let afterHead = "";
  let afterMiddle = "";
  let afterTail = "";
  for (const [k, v] of extras) {
    const pair = `,${k}="${escapeLabel(v)}"`;
    if (k < "id") afterHead += pair;
    else if (k < "name") afterMiddle += pair;
    else afterTail += pair;
  }
  return `{${l.head}${afterHead},${l.middle}${afterMiddle},${l.tail}${afterTail}}`;
}

type Disk = NonNullable<CadvisorContainer["fs"][number]["disk"]>;

/**
 * /proc/diskstats times are milliseconds; cAdvisor divides them by
 * time.Second (fsToFsStats, then `float64(fs.ReadTime) / float64(time.Second)`
 * in metrics/prometheus.go), so upstream's `*_seconds_total` of the
 * machine's disks are milliseconds / 1e9. Reproduced, so that series read
 * the same as on an upstream node.
 */
const diskMs = (ms: number) => ms / NS;

/** The tasks_state label values in upstream's order. */
const TASK_STATES = ["sleeping", "running", "stopped", "uninterruptible", "iowaiting"] as const;

/**
 * The text exposition format written straight from the view: about 28,000
 * samples for 110 pods, so no per-sample objects. Families without samples
 * are left out, as client_golang does; families come out in name order, as
 * its registry sorts them.
 */
export function renderCadvisorMetrics(view: CadvisorView | undefined, machine: MachineFacts | undefined, nowMs: number): string {
  const all = view?.containers ?? [];
  const labels = all.map(labelParts);
  const families: { name: string; head: string; lines: string[] }[] = [];
  const family = (name: string, help: string, type: "counter" | "gauge", lines: string[]) => {
    if (lines.length === 0) return;
    families.push({ name, head: `# HELP ${name} ${help}\n# TYPE ${name} ${type}`, lines });
  };
  /** One sample per container that has the value. */
  const each = (name: string, get: (c: CadvisorContainer) => number | undefined): string[] => {
    const lines: string[] = [];
    for (let i = 0; i < all.length; i++) {
      const v = get(all[i]!);
      if (v !== undefined) lines.push(`${name}${labels[i]!.plain} ${formatValue(v)}`);
    }
    return lines;
  };
  /** Samples per container with extra labels: `[extra labels, value]` pairs. */
  const eachWith = (name: string, get: (c: CadvisorContainer) => [readonly Extra[], number][]): string[] => {
    const lines: string[] = [];
    for (let i = 0; i < all.length; i++) for (const [extras, v] of get(all[i]!)) lines.push(`${name}${withExtra(labels[i]!, extras)} ${formatValue(v)}`);
    return lines;
  };
  /** One sample per container and item (device, interface). */
  const per = <T>(name: string, items: (c: CadvisorContainer) => T[], label: "device" | "interface", key: (t: T) => string, get: (t: T) => number | undefined): string[] =>
    eachWith(name, (c) => {
      const out: [readonly Extra[], number][] = [];
      for (const t of items(c)) {
        const v = get(t);
        if (v !== undefined) out.push([[[label, key(t)]], v]);
      }
      return out;
    });
  const withQuota = (c: CadvisorContainer) => (c.cgroup.spec?.cpuQuotaUs ?? 0) !== 0;
  const cpu = (c: CadvisorContainer) => c.cgroup.cpu;
  const mem = (c: CadvisorContainer) => c.cgroup.memory;
  const spec = (c: CadvisorContainer) => c.cgroup.spec;
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
  /** A /proc/diskstats counter of the machine's filesystems (cAdvisor's fsValues / ioValues of FsStats). */
  const diskFamily = (name: string, help: string, type: "counter" | "gauge", get: (d: Disk) => number) =>
    family(
      name,
      help,
      type,
      per(
        name,
        fsItems,
        "device",
        (f) => f.device,
        (f) => (f.disk ? get(f.disk) : undefined),
      ),
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
  /**
   * With KubeletPSI (cAdvisor's PressureMetrics) every cgroup has the six
   * pressure series: its *.pressure totals, else 0, as cAdvisor's PSI stats
   * stay zero where the kernel gives none (cgroup v1, a v2 cgroup without
   * the files).
   */
  const pressure = (name: string, help: string, resource: "cpu" | "memory" | "io", line: "some" | "full") => {
    if (view?.psi) counter(name, help, (c) => (c.cgroup.psi?.[resource]?.[line].total ?? 0) / 1e6);
  };

  if (machine) {
    // cAdvisor's version: the kubelet sets none of its build variables, and no Docker version.
    family("cadvisor_version_info", "A metric with a constant '1' value labeled by kernel version, OS version, docker version, cadvisor version & cadvisor revision.", "gauge", [
      `cadvisor_version_info{cadvisorRevision="",cadvisorVersion="",dockerVersion="",kernelVersion="${escapeLabel(machine.kernelVersion)}",osVersion="${escapeLabel(machine.osVersion)}"} 1`,
    ]);
  }
  counter("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", (c) => (withQuota(c) ? cpu(c)?.nrPeriods : undefined));
  counter("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", (c) => (withQuota(c) ? cpu(c)?.nrThrottled : undefined));
  counter("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", (c) =>
    withQuota(c) ? ns(cpu(c)?.throttledNanoseconds) : undefined,
  );
  // cAdvisor fills the load averages and task states from its netlink load
  // reader only, which the kubelet never turns on (cAdvisor's
  // --enable_load_reader, false, not a kubelet flag): upstream reports 0
  // for every container, and so does this agent, which has no such reader.
  gauge("container_cpu_load_average_10s", "Value of container cpu load average over the last 10 seconds.", () => 0);
  gauge("container_cpu_load_d_average_10s", "Value of container cpu load.d average over the last 10 seconds.", () => 0);
  family(
    "container_tasks_state",
    "Number of tasks in given state",
    "gauge",
    eachWith("container_tasks_state", () => TASK_STATES.map((state) => [[["state", state]], 0])),
  );
  counter("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", (c) => ns(cpu(c)?.systemNanoseconds));
  family(
    "container_cpu_usage_seconds_total",
    "Cumulative cpu time consumed in seconds.",
    "counter",
    eachWith("container_cpu_usage_seconds_total", (c) => {
      const usage = cpu(c)?.usageNanoseconds;
      return usage !== undefined && usage > 0 ? [[[["cpu", "total"]], usage / NS]] : [];
    }),
  );
  counter("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", (c) => ns(cpu(c)?.userNanoseconds));
  gauge("container_file_descriptors", "Number of open file descriptors for the container.", (c) => c.openFiles?.fds);
  fsFamily("container_fs_inodes_free", "Number of available Inodes", (f) => f.inodesFree);
  fsFamily("container_fs_inodes_total", "Number of Inodes", (f) => f.inodes);
  diskFamily("container_fs_io_current", "Number of I/Os currently in progress", "gauge", (d) => d.ioInProgress);
  diskFamily("container_fs_io_time_seconds_total", "Cumulative count of seconds spent doing I/Os", "counter", (d) => diskMs(d.ioTimeMs));
  diskFamily("container_fs_io_time_weighted_seconds_total", "Cumulative weighted I/O time in seconds", "counter", (d) => diskMs(d.weightedIoTimeMs));
  fsFamily("container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.", (f) => f.limitBytes);
  diskFamily("container_fs_read_seconds_total", "Cumulative count of seconds spent reading", "counter", (d) => diskMs(d.readTimeMs));
  ioFamily("container_fs_reads_bytes_total", "Cumulative count of bytes read", (d) => d.readBytes);
  diskFamily("container_fs_reads_merged_total", "Cumulative count of reads merged", "counter", (d) => d.readsMerged);
  diskFamily("container_fs_reads_total", "Cumulative count of reads completed", "counter", (d) => d.readsCompleted);
  diskFamily("container_fs_sector_reads_total", "Cumulative count of sector reads completed", "counter", (d) => d.sectorsRead);
  diskFamily("container_fs_sector_writes_total", "Cumulative count of sector writes completed", "counter", (d) => d.sectorsWritten);
  fsFamily("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", (f) => f.usageBytes);
  diskFamily("container_fs_write_seconds_total", "Cumulative count of seconds spent writing", "counter", (d) => diskMs(d.writeTimeMs));
  ioFamily("container_fs_writes_bytes_total", "Cumulative count of bytes written", (d) => d.writeBytes);
  diskFamily("container_fs_writes_merged_total", "Cumulative count of writes merged", "counter", (d) => d.writesMerged);
  diskFamily("container_fs_writes_total", "Cumulative count of writes completed", "counter", (d) => d.writesCompleted);
  gauge("container_last_seen", "Last time a container was seen by the exporter", () => Math.floor(nowMs / 1000));
  gauge("container_memory_cache", "Number of bytes of page cache memory.", (c) => mem(c)?.cacheBytes);
  counter("container_memory_failcnt", "Number of memory usage hits limits", (c) => mem(c)?.failcnt);
  family(
    "container_memory_failures_total",
    "Cumulative count of memory allocation failures.",
    "counter",
    eachWith("container_memory_failures_total", (c) => {
      const m = mem(c);
      if (!m) return [];
      // memory.stat's own keys for both scopes, as cAdvisor's setMemoryStats; a missing key is 0 there.
      const fault = m.statPgfault ?? 0;
      const major = m.statPgmajfault ?? 0;
      return [
        [
          [
            ["failure_type", "pgfault"],
            ["scope", "container"],
          ],
          fault,
        ],
        [
          [
            ["failure_type", "pgmajfault"],
            ["scope", "container"],
          ],
          major,
        ],
        [
          [
            ["failure_type", "pgfault"],
            ["scope", "hierarchy"],
          ],
          fault,
        ],
        [
          [
            ["failure_type", "pgmajfault"],
            ["scope", "hierarchy"],
          ],
          major,
        ],
      ];
    }),
  );
  gauge("container_memory_kernel_usage", "Size of kernel memory allocated in bytes.", (c) => mem(c)?.kernelBytes);
  gauge("container_memory_mapped_file", "Size of memory mapped files in bytes.", (c) => mem(c)?.mappedFileBytes);
  gauge("container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes", (c) => mem(c)?.maxUsageBytes);
  gauge("container_memory_rss", "Size of RSS in bytes.", (c) => mem(c)?.rssBytes);
  gauge("container_memory_swap", "Container swap usage in bytes.", (c) => (mem(c) ? (mem(c)!.swapBytes ?? 0) : undefined));
  gauge("container_memory_total_active_file_bytes", "Current total active file in bytes.", (c) => mem(c)?.activeFileBytes);
  gauge("container_memory_total_inactive_file_bytes", "Current total inactive file in bytes.", (c) => mem(c)?.inactiveFileBytes);
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
  // PSI (kernel 4.20+, CONFIG_PSI, cgroup v2): "full" is stalled, "some" is waiting.
  pressure("container_pressure_cpu_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to CPU congestion.", "cpu", "full");
  pressure("container_pressure_cpu_waiting_seconds_total", "Total time duration tasks in the container have waited due to CPU congestion.", "cpu", "some");
  pressure("container_pressure_io_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to IO congestion.", "io", "full");
  pressure("container_pressure_io_waiting_seconds_total", "Total time duration tasks in the container have waited due to IO congestion.", "io", "some");
  pressure("container_pressure_memory_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to memory congestion.", "memory", "full");
  pressure("container_pressure_memory_waiting_seconds_total", "Total time duration tasks in the container have waited due to memory congestion.", "memory", "some");
  gauge("container_processes", "Number of processes running inside the container.", (c) => c.cgroup.processes);
  family("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", "gauge", [`container_scrape_error ${view ? 0 : 1}`]);
  gauge("container_sockets", "Number of open sockets for the container.", (c) => c.openFiles?.sockets);
  gauge("container_spec_cpu_period", "CPU period of the container.", (c) => spec(c)?.cpuPeriodUs);
  gauge("container_spec_cpu_quota", "CPU quota of the container.", (c) => (withQuota(c) ? spec(c)?.cpuQuotaUs : undefined));
  gauge("container_spec_cpu_shares", "CPU share of the container.", (c) => spec(c)?.cpuShares);
  gauge("container_spec_memory_limit_bytes", "Memory limit for the container.", (c) => spec(c)?.memoryLimitBytes);
  gauge("container_spec_memory_reservation_limit_bytes", "Memory reservation limit for the container.", (c) => spec(c)?.memoryReservationBytes);
  gauge("container_spec_memory_swap_limit_bytes", "Memory swap limit for the container.", (c) => spec(c)?.memorySwapLimitBytes);
  gauge("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", (c) => c.startTimeSeconds);
  gauge("container_threads", "Number of threads running inside the container", (c) => c.cgroup.pids);
  gauge("container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero", (c) =>
    c.cgroup.pids !== undefined ? (c.cgroup.pidsMax ?? 0) : undefined,
  );
  family(
    "container_ulimits_soft",
    "Soft ulimit values for the container root process. Unlimited if -1, except priority and nice",
    "gauge",
    eachWith("container_ulimits_soft", (c) => (c.maxOpenFilesSoft !== undefined ? [[[["ulimit", "max_open_files"]], c.maxOpenFilesSoft]] : [])),
  );

  // The machine collector: its facts, and its own error gauge (1 when they could not be read).
  if (machine) {
    const m = `{boot_id="${escapeLabel(machine.bootId)}",machine_id="${escapeLabel(machine.machineId)}",system_uuid="${escapeLabel(machine.systemUuid)}"}`;
    const fact = (name: string, help: string, v: number) => family(name, help, "gauge", [`${name}${m} ${formatValue(v)}`]);
    fact("machine_cpu_cores", "Number of logical CPU cores.", machine.cores);
    fact("machine_cpu_physical_cores", "Number of physical CPU cores.", machine.physicalCores);
    fact("machine_cpu_sockets", "Number of CPU sockets.", machine.sockets);
    fact("machine_memory_bytes", "Amount of memory installed on the machine.", machine.memoryBytes);
    fact("machine_swap_bytes", "Amount of swap memory available on the machine.", machine.swapBytes);
  }
  family("machine_scrape_error", "1 if there was an error while getting machine metrics, 0 otherwise.", "gauge", [`machine_scrape_error ${machine ? 0 : 1}`]);
  families.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // One join of every line (some 20,000), not one string per family joined again.
  const out: string[] = [];
  for (const f of families) {
    out.push(f.head);
    for (const line of f.lines) out.push(line);
  }
  out.push("");
  return out.join("\n");
}

/**
 * The machine series' numbers from `/spec/` (cAdvisor's MachineInfo JSON,
 * node/machine-spec.ts), and the kernel and OS versions of the node's status.
 */
export function machineFactsFromSpec(spec: Record<string, unknown>, version: { kernelVersion: string; osImage: string }): MachineFacts {
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
    kernelVersion: version.kernelVersion,
    osVersion: version.osImage,
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
