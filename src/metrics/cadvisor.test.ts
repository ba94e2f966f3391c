// /metrics/cadvisor over the stats collector on fixture cgroup trees (v1
// and v2): upstream cAdvisor's names, types, HELP, units and label sets for
// the machine, the pods parent, a pod, its sandbox and its containers.
import { afterEach, describe, expect, test } from "bun:test";
import { createStatsCollector, type StatsCollector } from "../stats/collector.ts";
import { FakeNode, POD_NET_DEV, StatsFakeCri, BUSYBOX } from "../stats/testutil.ts";
import type { PodRef } from "../pods/identity.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { machineFactsFromSpec, renderCadvisorMetrics } from "./cadvisor.ts";

const web: PodRef = { uid: "uid-web", name: "web", namespace: "default" };
const PAUSE = "registry.k8s.io/pause:3.9";
const machine = machineFactsFromSpec(
  {
    num_cores: 2,
    num_physical_cores: 1,
    num_sockets: 1,
    memory_capacity: 8e9,
    swap_capacity: 0,
    boot_id: "b",
    machine_id: "m",
    system_uuid: "u",
  },
  { kernelVersion: "6.18.0", osImage: "Debian GNU/Linux 12 (bookworm)" },
);

/** Exposition text as `name{labels}` → value, and `name` → TYPE / HELP. */
function parse(text: string) {
  const samples = new Map<string, number>();
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line.startsWith("# TYPE ")) {
      const [, , name, type] = line.split(" ");
      types.set(name!, type!);
    } else if (line.startsWith("# HELP ")) {
      const rest = line.slice(7);
      help.set(rest.slice(0, rest.indexOf(" ")), rest.slice(rest.indexOf(" ") + 1));
    } else if (line) {
      const m = /^(\S+?(?:\{.*\})?) (\S+)$/.exec(line);
      if (!m) throw new Error(`not exposition format (or a timestamp): ${line}`);
      samples.set(m[1]!, Number(m[2]));
    }
  }
  return { samples, types, help };
}

const sel = (name: string, labels: Record<string, string>) =>
  `${name}{${Object.entries(labels)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}="${v}"`)
    .join(",")}}`;

let node: FakeNode;
let pods: PodRef[] = [];
let collector: StatsCollector;
// The 110-pod fixture is some 10,000 files: removing them takes seconds on a busy machine.
afterEach(async () => {
  await collector?.[Symbol.asyncDispose]();
  node?.cleanup();
}, 60_000);

/** `psi`: KubeletPSI, on by default (agent.ts passes the gate). */
async function setup(version: "v1" | "v2", psi = true) {
  node = new FakeNode(version);
  const clock = new FakeClock(1_700_000_000_000);
  const cri = new StatsFakeCri(clock, node.layerDir);
  const ids = await cri.addPod(web, ["app", "sidecar"]);
  pods = [web];
  cri.numbers.set(ids.containers[0]!, { layerBytes: 12345 });
  node.addPodCgroup(web.uid);
  node.addPodProcess(web.uid, 4242, "net:[4026532999]", POD_NET_DEV);
  node.addBlockDevice("8:0", "sda");
  collector = createStatsCollector({
    nodeName: "n1",
    rootDir: node.rootDir,
    fsRoot: node.fsRoot,
    cgroupRoot: "/kubepods",
    podCgroups: { podCgroupPath: node.podCgroup },
    cri,
    pods: { activePods: () => pods.map((metadata) => ({ metadata })) },
    podLogsDir: node.podLogsDir,
    clock,
    logger: memoryLogger(0).logger,
    psi,
  });
  return { ids, clock, cri };
}

const V1_APP = {
  "cpuacct.usage": "3000000000\n",
  "cpuacct.stat": "user 200\nsystem 100\n",
  "cpu.stat": "nr_periods 10\nnr_throttled 4\nthrottled_time 200000000\n",
  "cpu.cfs_period_us": "100000\n",
  "cpu.cfs_quota_us": "50000\n",
  "cpu.shares": "512\n",
  "memory.usage_in_bytes": "5000000\n",
  "memory.stat":
    "cache 0\nrss 0\npgfault 300\npgmajfault 3\ntotal_cache 1000\ntotal_rss 4000\ntotal_mapped_file 10\ntotal_swap 0\ntotal_pgfault 900\ntotal_pgmajfault 9\ntotal_inactive_file 500\ntotal_active_file 400\n",
  "memory.limit_in_bytes": "67108864\n",
  "memory.kmem.usage_in_bytes": "123904\n",
  "memory.max_usage_in_bytes": "6000000\n",
  "memory.memsw.limit_in_bytes": "9223372036854771712\n",
  "memory.soft_limit_in_bytes": "33554432\n",
  "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
  "memory.failcnt": "7\n",
  "blkio.throttle.io_service_bytes_recursive": "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 12288\n8:0 Total 12288\nTotal 12288\n",
  "pids.current": "3\n",
  "pids.max": "max\n",
  "cgroup.procs": "100\n101\n",
};

const V2_APP = {
  "cpu.stat": "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\nnr_periods 10\nnr_throttled 4\nthrottled_usec 200000\n",
  "cpu.max": "50000 100000\n",
  "cpu.weight": "20\n",
  "memory.current": "5000000\n",
  "memory.stat": "anon 4000\nfile 1000\nkernel 123904\nfile_mapped 10\ninactive_file 500\nactive_file 400\npgfault 300\npgmajfault 3\n",
  "memory.max": "67108864\n",
  "memory.peak": "6000000\n",
  "memory.min": "33554432\n",
  "memory.swap.max": "max\n",
  "cpu.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\n",
  "memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=40000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=30000\n",
  "io.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=7000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=6000\n",
  "memory.events": "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n",
  "memory.swap.current": "0\n",
  "io.stat": "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n",
  "pids.current": "3\n",
  "pids.max": "max\n",
  "cgroup.procs": "100\n101\n",
};

for (const version of ["v1", "v2"] as const) {
  describe(`cgroup ${version}`, () => {
    test("a CPU-limited container: upstream's series, units, types and labels; pod, sandbox, QoS and machine series", async () => {
      const { ids } = await setup(version);
      const podPath = node.podCgroup(web);
      const appId = node.addContainerCgroup(web, ids.containers[0]!, version === "v1" ? V1_APP : V2_APP);
      node.addContainerCgroup(web, ids.sandbox);
      // The sidecar has no quota.
      node.addContainerCgroup(web, ids.containers[1]!, version === "v1" ? { "cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n" } : { "cpu.max": "max 100000\n" });

      const text = renderCadvisorMetrics(await collector.cadvisor({ sandboxImage: PAUSE }), machine, 1_700_000_005_000);
      const { samples, types, help } = parse(text);
      const app = { container: "app", id: appId, image: BUSYBOX, name: ids.containers[0]!, namespace: "default", pod: "web" };
      const get = (name: string, extra: Record<string, string> = {}) => samples.get(sel(name, { ...app, ...extra }));

      expect(get("container_cpu_usage_seconds_total", { cpu: "total" })).toBe(3);
      expect(get("container_cpu_user_seconds_total")).toBe(2);
      expect(get("container_cpu_system_seconds_total")).toBe(1);
      expect(get("container_cpu_cfs_periods_total")).toBe(10);
      expect(get("container_cpu_cfs_throttled_periods_total")).toBe(4);
      expect(get("container_cpu_cfs_throttled_seconds_total")).toBe(0.2);
      expect(get("container_spec_cpu_quota")).toBe(50000);
      expect(get("container_spec_cpu_period")).toBe(100000);
      expect(get("container_spec_cpu_shares")).toBe(version === "v1" ? 512 : 500);
      expect(get("container_spec_memory_limit_bytes")).toBe(67108864);
      expect(get("container_memory_usage_bytes")).toBe(5000000);
      expect(get("container_memory_working_set_bytes")).toBe(5000000 - 500);
      expect(get("container_memory_rss")).toBe(4000);
      expect(get("container_memory_cache")).toBe(1000);
      expect(get("container_memory_mapped_file")).toBe(10);
      expect(get("container_memory_swap")).toBe(0);
      expect(get("container_memory_failcnt")).toBe(7);
      expect(get("container_oom_events_total")).toBe(2);
      expect(get("container_fs_reads_bytes_total", { device: "/dev/sda" })).toBe(4096);
      expect(get("container_fs_writes_bytes_total", { device: "/dev/sda" })).toBe(8192);
      expect(get("container_processes")).toBe(2);
      expect(get("container_threads")).toBe(3);
      expect(get("container_threads_max")).toBe(0);
      expect(get("container_last_seen")).toBe(1_700_000_005);
      expect(get("container_start_time_seconds")).toBeGreaterThan(0);
      const rootfs = [...samples.keys()].find((k) => k.startsWith('container_fs_usage_bytes{container="app"'));
      expect(rootfs).toBeDefined();
      expect(samples.get(rootfs!)).toBe(12345);

      // No quota: no CFS series and no quota, as upstream's condition.
      const sidecar = [...samples.keys()].filter((k) => k.includes('container="sidecar"'));
      expect(sidecar.some((k) => k.startsWith("container_cpu_cfs_"))).toBe(false);
      expect(sidecar.some((k) => k.startsWith("container_spec_cpu_quota"))).toBe(false);
      expect(sidecar.some((k) => k.startsWith("container_spec_cpu_period"))).toBe(true);

      // Pod level: container="", id = pod cgroup, pod and namespace set, no image or name.
      const pod = { container: "", id: podPath, image: "", name: "", namespace: "default", pod: "web" };
      expect(samples.get(sel("container_memory_working_set_bytes", pod))).toBeGreaterThan(0);
      expect(samples.has(sel("container_cpu_usage_seconds_total", { ...pod, cpu: "total" }))).toBe(true);
      // Sandbox: the pause image, the sandbox id, and the pod's network.
      const sandbox = { container: "", id: `${podPath}/${ids.sandbox}`, image: PAUSE, name: ids.sandbox, namespace: "default", pod: "web" };
      expect(samples.get(sel("container_network_receive_bytes_total", { ...sandbox, interface: "eth0" }))).toBe(1000);
      expect(samples.get(sel("container_network_transmit_packets_total", { ...sandbox, interface: "eth0" }))).toBe(15);
      expect(samples.get(sel("container_network_receive_errors_total", { ...sandbox, interface: "eth0" }))).toBe(1);
      expect(samples.has(sel("container_network_receive_bytes_total", { ...sandbox, interface: "lo" }))).toBe(false);
      // Machine ("/") and the pods parent.
      const root = { container: "", id: "/", image: "", name: "", namespace: "", pod: "" };
      expect(samples.get(sel("container_memory_working_set_bytes", root))).toBeGreaterThan(0);
      expect(samples.has(sel("container_memory_working_set_bytes", { ...root, id: "/kubepods" }))).toBe(true);
      expect([...samples.keys()].some((k) => k.startsWith("container_network_receive_bytes_total{") && k.includes('id="/"'))).toBe(true);
      expect(samples.get(sel("machine_cpu_cores", { boot_id: "b", machine_id: "m", system_uuid: "u" }))).toBe(2);
      expect(samples.get(sel("machine_memory_bytes", { boot_id: "b", machine_id: "m", system_uuid: "u" }))).toBe(8e9);
      expect(samples.get("container_scrape_error")).toBe(0);

      // Types and HELP as upstream's.
      expect(types.get("container_cpu_usage_seconds_total")).toBe("counter");
      expect(types.get("container_memory_working_set_bytes")).toBe("gauge");
      expect(types.get("container_oom_events_total")).toBe("counter");
      expect(types.get("container_spec_cpu_quota")).toBe("gauge");
      expect(types.get("container_network_receive_bytes_total")).toBe("counter");
      expect(help.get("container_cpu_usage_seconds_total")).toBe("Cumulative cpu time consumed in seconds.");
      expect(help.get("container_memory_working_set_bytes")).toBe("Current working set in bytes.");
      expect(help.get("container_cpu_cfs_throttled_seconds_total")).toBe("Total time duration the container has been throttled.");
      expect(help.get("machine_memory_bytes")).toBe("Amount of memory installed on the machine.");
    });

    test("memory details, limits, pressure, processes, the machine's disk and version: upstream's values, types and HELP", async () => {
      const { ids } = await setup(version);
      const appId = node.addContainerCgroup(web, ids.containers[0]!, version === "v1" ? V1_APP : V2_APP);
      // The app's processes (cgroup.procs: 100, 101): four descriptors, two of them sockets; pid 1 for the machine.
      node.addProcessFiles(100, ["/dev/null", "socket:[1234]", "pipe:[55]"], 1024);
      node.addProcessFiles(101, ["socket:[99]"], 4096);
      node.addProcessFiles(1, ["/dev/null"], "unlimited");
      // reads, merged, sectors, ms reading, writes, merged, sectors, ms writing, in flight, ms doing I/O, weighted ms
      node.setRootDisk("vda", "254:0", [3060324, 186882, 69198034, 9355140, 1691284, 2154838, 174869880, 1642667, 2, 461420, 11221221, 0, 0, 0, 0]);

      const text = renderCadvisorMetrics(await collector.cadvisor({ sandboxImage: PAUSE }), machine, 1_700_000_005_000);
      const { samples, types, help } = parse(text);
      const app = { container: "app", id: appId, image: BUSYBOX, name: ids.containers[0]!, namespace: "default", pod: "web" };
      const get = (name: string, extra: Record<string, string> = {}) => samples.get(sel(name, { ...app, ...extra }));

      // memory.stat's own pgfault / pgmajfault for both scopes, as cAdvisor.
      expect(get("container_memory_failures_total", { failure_type: "pgfault", scope: "container" })).toBe(300);
      expect(get("container_memory_failures_total", { failure_type: "pgmajfault", scope: "container" })).toBe(3);
      expect(get("container_memory_failures_total", { failure_type: "pgfault", scope: "hierarchy" })).toBe(300);
      expect(get("container_memory_failures_total", { failure_type: "pgmajfault", scope: "hierarchy" })).toBe(3);
      expect(get("container_memory_kernel_usage")).toBe(123904);
      expect(get("container_memory_max_usage_bytes")).toBe(6000000);
      expect(get("container_memory_total_active_file_bytes")).toBe(400);
      expect(get("container_memory_total_inactive_file_bytes")).toBe(500);
      expect(get("container_spec_memory_reservation_limit_bytes")).toBe(33554432);
      // v1: memsw at the kernel's "no limit"; v2: memory.swap.max "max": both 0, as specMemoryValue.
      expect(get("container_spec_memory_swap_limit_bytes")).toBe(0);

      // PSI with KubeletPSI ("full" stalled, "some" waiting, µs to seconds): v2 from the *.pressure files; on v1
      // (no such files) 0 for every cgroup, as upstream, whose PressureMetrics read cAdvisor's zero PSI stats there.
      const psi = {
        container_pressure_cpu_stalled_seconds_total: 1.5,
        container_pressure_cpu_waiting_seconds_total: 2.5,
        container_pressure_memory_stalled_seconds_total: 0.03,
        container_pressure_memory_waiting_seconds_total: 0.04,
        container_pressure_io_stalled_seconds_total: 0.006,
        container_pressure_io_waiting_seconds_total: 0.007,
      };
      const podLabels = { container: "", id: node.podCgroup(web), image: "", name: "", namespace: "default", pod: "web" };
      for (const [name, v] of Object.entries(psi)) {
        expect([name, get(name)]).toEqual([name, version === "v2" ? v : 0]);
        // The fixtures' root cgroup has no *.pressure file on either version: 0.
        expect([name, samples.get(sel(name, { container: "", id: "/", image: "", name: "", namespace: "", pod: "" }))]).toEqual([name, 0]);
      }
      // The pod's own cgroup (fixture kubepods/podtest on v2: cpu some 987654 µs, full 876543).
      expect(samples.get(sel("container_pressure_cpu_waiting_seconds_total", podLabels))).toBe(version === "v2" ? 0.987654 : 0);
      expect(samples.get(sel("container_pressure_cpu_stalled_seconds_total", podLabels))).toBe(version === "v2" ? 0.876543 : 0);

      // The load reader the kubelet never turns on: 0 for every cgroup, as upstream.
      expect(get("container_cpu_load_average_10s")).toBe(0);
      expect(get("container_cpu_load_d_average_10s")).toBe(0);
      for (const state of ["sleeping", "running", "stopped", "uninterruptible", "iowaiting"]) expect(get("container_tasks_state", { state })).toBe(0);

      // Processes of the container's own cgroup.procs; the soft open-files limit of its first process.
      expect(get("container_processes")).toBe(2);
      expect(get("container_file_descriptors")).toBe(4);
      expect(get("container_sockets")).toBe(2);
      expect(get("container_ulimits_soft", { ulimit: "max_open_files" })).toBe(1024);

      // The machine: pid 1's limit ("unlimited" is -1), the root disk's /proc/diskstats.
      const root = { container: "", id: "/", image: "", name: "", namespace: "", pod: "" };
      const atRoot = (name: string, extra: Record<string, string> = {}) => samples.get(sel(name, { ...root, ...extra }));
      expect(atRoot("container_ulimits_soft", { ulimit: "max_open_files" })).toBe(-1);
      const vda = { device: "/dev/vda" };
      expect(atRoot("container_fs_reads_total", vda)).toBe(3060324);
      expect(atRoot("container_fs_reads_merged_total", vda)).toBe(186882);
      expect(atRoot("container_fs_sector_reads_total", vda)).toBe(69198034);
      expect(atRoot("container_fs_writes_total", vda)).toBe(1691284);
      expect(atRoot("container_fs_writes_merged_total", vda)).toBe(2154838);
      expect(atRoot("container_fs_sector_writes_total", vda)).toBe(174869880);
      expect(atRoot("container_fs_io_current", vda)).toBe(2);
      // Milliseconds divided by 1e9, as cAdvisor's fsToFsStats + time.Second.
      expect(atRoot("container_fs_read_seconds_total", vda)).toBe(9355140 / 1e9);
      expect(atRoot("container_fs_write_seconds_total", vda)).toBe(1642667 / 1e9);
      expect(atRoot("container_fs_io_time_seconds_total", vda)).toBe(461420 / 1e9);
      expect(atRoot("container_fs_io_time_weighted_seconds_total", vda)).toBe(11221221 / 1e9);
      expect(atRoot("container_fs_usage_bytes", vda)).toBeGreaterThan(0);
      // Pod and QoS cgroups have no root process: no ulimit series; their own cgroup.procs is empty.
      const pod = { container: "", id: node.podCgroup(web), image: "", name: "", namespace: "default", pod: "web" };
      expect(samples.has(sel("container_ulimits_soft", { ...pod, ulimit: "max_open_files" }))).toBe(false);
      // The v2 root has no memory.max: no memory spec there (cAdvisor's HasMemory).
      expect(samples.has(sel("container_spec_memory_limit_bytes", root))).toBe(version === "v1");

      expect(samples.get("machine_scrape_error")).toBe(0);
      expect(
        samples.get(
          sel("cadvisor_version_info", { cadvisorRevision: "", cadvisorVersion: "", dockerVersion: "", kernelVersion: "6.18.0", osVersion: "Debian GNU/Linux 12 (bookworm)" }),
        ),
      ).toBe(1);

      // Types and HELP as cAdvisor v0.52's metrics/prometheus.go.
      const upstream: Record<string, [string, string]> = {
        cadvisor_version_info: ["gauge", "A metric with a constant '1' value labeled by kernel version, OS version, docker version, cadvisor version & cadvisor revision."],
        container_cpu_load_average_10s: ["gauge", "Value of container cpu load average over the last 10 seconds."],
        container_cpu_load_d_average_10s: ["gauge", "Value of container cpu load.d average over the last 10 seconds."],
        container_file_descriptors: ["gauge", "Number of open file descriptors for the container."],
        container_fs_io_current: ["gauge", "Number of I/Os currently in progress"],
        container_fs_io_time_seconds_total: ["counter", "Cumulative count of seconds spent doing I/Os"],
        container_fs_io_time_weighted_seconds_total: ["counter", "Cumulative weighted I/O time in seconds"],
        container_fs_read_seconds_total: ["counter", "Cumulative count of seconds spent reading"],
        container_fs_reads_merged_total: ["counter", "Cumulative count of reads merged"],
        container_fs_reads_total: ["counter", "Cumulative count of reads completed"],
        container_fs_sector_reads_total: ["counter", "Cumulative count of sector reads completed"],
        container_fs_sector_writes_total: ["counter", "Cumulative count of sector writes completed"],
        container_fs_write_seconds_total: ["counter", "Cumulative count of seconds spent writing"],
        container_fs_writes_merged_total: ["counter", "Cumulative count of writes merged"],
        container_fs_writes_total: ["counter", "Cumulative count of writes completed"],
        container_memory_failures_total: ["counter", "Cumulative count of memory allocation failures."],
        container_memory_kernel_usage: ["gauge", "Size of kernel memory allocated in bytes."],
        container_memory_max_usage_bytes: ["gauge", "Maximum memory usage recorded in bytes"],
        container_memory_total_active_file_bytes: ["gauge", "Current total active file in bytes."],
        container_memory_total_inactive_file_bytes: ["gauge", "Current total inactive file in bytes."],
        container_sockets: ["gauge", "Number of open sockets for the container."],
        container_spec_memory_reservation_limit_bytes: ["gauge", "Memory reservation limit for the container."],
        container_spec_memory_swap_limit_bytes: ["gauge", "Memory swap limit for the container."],
        container_tasks_state: ["gauge", "Number of tasks in given state"],
        container_ulimits_soft: ["gauge", "Soft ulimit values for the container root process. Unlimited if -1, except priority and nice"],
        machine_scrape_error: ["gauge", "1 if there was an error while getting machine metrics, 0 otherwise."],
        container_pressure_cpu_stalled_seconds_total: ["counter", "Total time duration no tasks in the container could make progress due to CPU congestion."],
        container_pressure_cpu_waiting_seconds_total: ["counter", "Total time duration tasks in the container have waited due to CPU congestion."],
        container_pressure_io_stalled_seconds_total: ["counter", "Total time duration no tasks in the container could make progress due to IO congestion."],
        container_pressure_io_waiting_seconds_total: ["counter", "Total time duration tasks in the container have waited due to IO congestion."],
        container_pressure_memory_stalled_seconds_total: ["counter", "Total time duration no tasks in the container could make progress due to memory congestion."],
        container_pressure_memory_waiting_seconds_total: ["counter", "Total time duration tasks in the container have waited due to memory congestion."],
      };
      for (const [name, [type, text]] of Object.entries(upstream)) {
        expect([name, types.get(name)]).toEqual([name, type]);
        expect([name, help.get(name)]).toEqual([name, text]);
      }
      // Families in name order, as client_golang's registry writes them.
      const order = text
        .split("\n")
        .filter((l) => l.startsWith("# TYPE "))
        .map((l) => l.split(" ")[2]!);
      expect(order).toEqual([...order].sort());
    });

    test("KubeletPSI off: no pressure families (upstream leaves PressureMetrics out)", async () => {
      const { ids } = await setup(version, false);
      node.addContainerCgroup(web, ids.containers[0]!, version === "v1" ? V1_APP : V2_APP);
      const { types } = parse(renderCadvisorMetrics(await collector.cadvisor({ sandboxImage: PAUSE }), machine, 0));
      expect(types.has("container_memory_working_set_bytes")).toBe(true);
      expect([...types.keys()].filter((n) => n.startsWith("container_pressure_"))).toEqual([]);
    });

    test("machine facts that cannot be read: machine_scrape_error 1 and no machine series", async () => {
      await setup(version);
      const { samples, types } = parse(renderCadvisorMetrics(await collector.cadvisor({ sandboxImage: PAUSE }), undefined, 0));
      expect(samples.get("machine_scrape_error")).toBe(1);
      expect(types.has("machine_cpu_cores")).toBe(false);
      expect(types.has("cadvisor_version_info")).toBe(false);
    });

    test("a pod that is gone has no series; a failed read is container_scrape_error 1", async () => {
      const { ids, clock, cri } = await setup(version);
      node.addContainerCgroup(web, ids.containers[0]!);
      const before = renderCadvisorMetrics(await collector.cadvisor({ sandboxImage: PAUSE }), machine, 0);
      expect(before).toContain('pod="web"');
      // Started since the last pass (no time passes, so the pass is reused): listed at the scrape.
      const db: PodRef = { uid: "uid-db", name: "db", namespace: "prod" };
      const dbIds = await cri.addPod(db, ["pg"]);
      pods.push(db);
      node.addPodCgroup(db.uid);
      node.addContainerCgroup(db, dbIds.containers[0]!);
      const started = renderCadvisorMetrics(await collector.cadvisor({ sandboxImage: PAUSE }), machine, 0);
      expect(started).toContain('container="pg"');
      pods.splice(0, 1);
      node.removePodCgroup(web.uid);
      clock.advance(60_000);
      const after = renderCadvisorMetrics(await collector.cadvisor({ sandboxImage: PAUSE }), machine, 0);
      expect(after).not.toContain('pod="web"');
      expect(after).toContain('id="/"');

      const text = renderCadvisorMetrics(undefined, undefined, 0);
      expect(parse(text).samples.get("container_scrape_error")).toBe(1);
      expect([...parse(text).samples.keys()].filter((k) => k.startsWith("container_memory"))).toEqual([]);
    });
  });
}

test("machine facts from /spec/", () => {
  expect(machine).toEqual({
    cores: 2,
    physicalCores: 1,
    sockets: 1,
    memoryBytes: 8e9,
    swapBytes: 0,
    bootId: "b",
    machineId: "m",
    systemUuid: "u",
    kernelVersion: "6.18.0",
    osVersion: "Debian GNU/Linux 12 (bookworm)",
  });
});

test("a scrape with 110 pods of two containers reports every cgroup (its time is printed, not asserted)", async () => {
  node = new FakeNode("v1");
  const clock = new FakeClock(1_700_000_000_000);
  const cri = new StatsFakeCri(clock, node.layerDir);
  pods = [];
  for (let i = 0; i < 110; i++) {
    const pod = { uid: `uid-${i}`, name: `pod-${i}`, namespace: "bench" };
    pods.push(pod);
    const ids = await cri.addPod(pod, ["app", "sidecar"]);
    node.addPodCgroup(pod.uid);
    // One process per cgroup, as on a node: pause with 3 descriptors, each
    // container's process with 12, 2 of them sockets (what is counted per scrape).
    const pause = 10_000 + i * 3;
    node.addContainerCgroup(pod, ids.sandbox, { "cgroup.procs": `${pause}\n` });
    node.addProcessFiles(pause, ["/dev/null", "/dev/null", "/dev/null"], 1048576);
    ids.containers.forEach((id, j) => {
      const pid = pause + 1 + j;
      node.addContainerCgroup(pod, id, { ...V1_APP, "cgroup.procs": `${pid}\n` });
      node.addProcessFiles(pid, [...Array.from({ length: 10 }, (_, k) => `/data/file-${k}`), "socket:[1]", "socket:[2]"], 1048576);
    });
  }
  collector = createStatsCollector({
    nodeName: "bench",
    rootDir: node.rootDir,
    fsRoot: node.fsRoot,
    cgroupRoot: "/kubepods",
    podCgroups: { podCgroupPath: node.podCgroup },
    cri,
    pods: { activePods: () => pods.map((metadata) => ({ metadata })) },
    podLogsDir: node.podLogsDir,
    clock,
    logger: memoryLogger(0).logger,
  });
  await collector.collect();
  const times: number[] = [];
  let text = "";
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    text = renderCadvisorMetrics(await collector.cadvisor({ sandboxImage: PAUSE }), machine, clock.now());
    times.push(performance.now() - t0);
  }
  const ws = text.split("\n").filter((l) => l.startsWith("container_memory_working_set_bytes{"));
  // 110 pods x (pod cgroup + sandbox + 2 containers) + "/" + "/kubepods"
  expect(ws).toHaveLength(110 * 4 + 2);
  expect(text.split("\n").filter((l) => l.startsWith("container_cpu_cfs_throttled_periods_total{"))).toHaveLength(220);
  const warm = times.slice(1).sort((a, b) => a - b);
  console.log(`/metrics/cadvisor, 110 pods x 2 containers: first ${times[0]!.toFixed(1)} ms, warm median ${warm[1]!.toFixed(1)} ms, ${(text.length / 1024).toFixed(0)} KiB`);
}, 60_000);
