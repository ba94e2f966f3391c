import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeCri } from "../cri/fake.ts";
import { FakeClock } from "../util/clock.ts";
import { instrumentCri, KubeletMetrics, runtimeOperationName } from "./kubelet.ts";
import { ProbeMetrics } from "./probes.ts";
import { Registry } from "./registry.ts";
import { renderResourceMetrics } from "./resource.ts";
import type { Pod } from "../pods/schema.ts";

/** Parses exposition text into `name{labels}` → value, so tests read like the scrape. */
function samples(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^(\S+?(?:\{.*\})?) (\S+)(?: \d+)?$/.exec(line);
    if (!m) throw new Error(`not exposition format: ${line}`);
    out.set(m[1]!, m[2]!);
  }
  return out;
}

describe("registry", () => {
  test("counters, gauges and histograms render in the text format with escaped labels", () => {
    const r = new Registry();
    const c = r.counter("x_total", "Things.\nMore.", ["kind"]);
    c.inc({ kind: 'a"b\\c' });
    c.inc({ kind: 'a"b\\c' }, 2);
    r.gauge("g", "A gauge").set({}, 1.5);
    const h = r.histogram("h_seconds", "H", [], [0.1, 1]);
    h.observe({}, 0.05);
    h.observe({}, 0.5);
    h.observe({}, 5);
    const text = r.render();
    expect(text).toContain("# HELP x_total Things.\\nMore.\n# TYPE x_total counter\n");
    const s = samples(text);
    expect(s.get('x_total{kind="a\\"b\\\\c"}')).toBe("3");
    expect(s.get("g")).toBe("1.5");
    expect(s.get('h_seconds_bucket{le="0.1"}')).toBe("1");
    expect(s.get('h_seconds_bucket{le="1"}')).toBe("2");
    expect(s.get('h_seconds_bucket{le="+Inf"}')).toBe("3");
    expect(s.get("h_seconds_count")).toBe("3");
    expect(Number(s.get("h_seconds_sum"))).toBeCloseTo(5.55);
  });

  test("refuses undeclared labels, duplicate names and decreasing counters", () => {
    const r = new Registry();
    const c = r.counter("a_total", "A", ["x"]);
    expect(() => c.inc({ y: "1" } as never)).toThrow('metric label "y" is not declared');
    expect(() => c.inc({}, -1)).toThrow("cannot decrease");
    expect(() => r.gauge("a_total", "again")).toThrow("registered twice");
    expect(() => r.gauge("bad-name", "x")).toThrow("invalid metric name");
  });
});

describe("kubelet metrics", () => {
  const procRoot = () => {
    const dir = mkdtempSync(join(tmpdir(), "proc-"));
    mkdirSync(join(dir, "self/fd"), { recursive: true });
    for (const fd of ["0", "1", "2"]) writeFileSync(join(dir, "self/fd", fd), "");
    // pid (comm with spaces) state ... utime=250 stime=150 ... vsize rss
    const fields = Array.from({ length: 50 }, () => "0");
    fields[11] = "250";
    fields[12] = "150";
    fields[20] = "123456789";
    fields[21] = "1000";
    writeFileSync(join(dir, "self/stat"), `42 (bun kubelet) ${fields.join(" ")}`);
    return dir;
  };

  test("upstream names: runtime operations, PLEG, pod worker, pod start, running pods, process figures", async () => {
    const m = new KubeletMetrics({
      nodeName: "n1",
      processStartMs: 1_700_000_000_000,
      procRoot: procRoot(),
      runtime: { runtimeCounts: () => ({ pods: 2, containers: { running: 3, exited: 1 } }) },
    });
    const now = 0;
    const fake = new FakeCri({ clock: new FakeClock(0) });
    const cri = instrumentCri(fake, m, { now: () => now });
    await cri.version();
    fake.failNext("listPodSandbox", "Unavailable");
    await cri.listPodSandbox().catch(() => {});
    m.plegRelist(12, 1000);
    m.podWorkerStep("create", 250);
    m.podStarted(1000, 3500);
    m.containerStarted("container");
    m.containerStarted("init_container", "RunContainerError");
    m.devicePluginRegistered("example.com/dev");
    m.devicePluginAllocated("example.com/dev", 20);
    const s = samples(m.render());
    expect(s.get('kubelet_node_name{node="n1"}')).toBe("1");
    expect(s.get('kubelet_runtime_operations_total{operation_type="version"}')).toBe("1");
    expect(s.get('kubelet_runtime_operations_total{operation_type="list_podsandbox"}')).toBe("1");
    expect(s.get('kubelet_runtime_operations_errors_total{operation_type="list_podsandbox"}')).toBe("1");
    expect(s.get('kubelet_runtime_operations_duration_seconds_count{operation_type="version"}')).toBe("1");
    expect(s.get("kubelet_pleg_relist_duration_seconds_count")).toBe("1");
    expect(s.get("kubelet_pleg_relist_interval_seconds_sum")).toBe("1");
    expect(s.get('kubelet_pod_worker_duration_seconds_sum{operation_type="create"}')).toBe("0.25");
    expect(s.get("kubelet_pod_start_duration_seconds_sum")).toBe("2.5");
    expect(s.get('kubelet_pod_start_duration_seconds_bucket{le="3"}')).toBe("1");
    expect(s.get("kubelet_started_pods_total")).toBe("1");
    expect(s.get('kubelet_started_containers_total{container_type="container"}')).toBe("1");
    expect(s.get('kubelet_started_containers_errors_total{container_type="init_container",code="RunContainerError"}')).toBe("1");
    expect(s.get('kubelet_device_plugin_registration_total{resource_name="example.com/dev"}')).toBe("1");
    expect(s.get('kubelet_device_plugin_alloc_duration_seconds_sum{resource_name="example.com/dev"}')).toBe("0.02");
    expect(s.get("kubelet_running_pods")).toBe("2");
    expect(s.get('kubelet_running_containers{container_state="running"}')).toBe("3");
    expect(s.get("process_cpu_seconds_total")).toBe("4");
    expect(s.get("process_resident_memory_bytes")).toBe(String(1000 * 4096));
    expect(s.get("process_virtual_memory_bytes")).toBe("123456789");
    expect(s.get("process_open_fds")).toBe("3");
    expect(s.get("process_start_time_seconds")).toBe("1700000000");
  });

  test("as upstream's scrape: [ALPHA] in the HELP of kubelet_* (component-base), none on process_*; types; histogram buckets", () => {
    const m = new KubeletMetrics({ nodeName: "n1", processStartMs: 0, procRoot: procRoot(), runtime: { runtimeCounts: () => ({ pods: 0, containers: {} }) } });
    m.plegRelist(1, 1);
    m.podWorkerStep("sync", 1);
    m.podStarted(0, 1);
    const text = m.render();
    const help = [...text.matchAll(/^# HELP (\S+) (.*)$/gm)].map((x) => [x[1]!, x[2]!] as const);
    for (const [name, h] of help) {
      if (name.startsWith("kubelet_")) expect(h.startsWith("[ALPHA] ")).toBe(true);
      else expect(h.startsWith("[")).toBe(false);
    }
    expect(text).toContain("# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox\n# TYPE kubelet_running_pods gauge");
    expect(text).toContain("# TYPE kubelet_pod_worker_duration_seconds histogram");
    expect(text).toContain("# TYPE kubelet_runtime_operations_total counter");
    const les = (name: string) => [...text.matchAll(new RegExp(`^${name}_bucket\\{(?:[^}]*,)?le="([^"]+)"\\}`, "gm"))].map((x) => x[1]);
    const DEF = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"];
    expect(les("kubelet_pleg_relist_duration_seconds")).toEqual(DEF);
    expect(les("kubelet_pleg_relist_interval_seconds")).toEqual(DEF);
    expect(les("kubelet_pod_worker_duration_seconds")).toEqual(DEF);
    expect(les("kubelet_pod_start_duration_seconds")).toEqual(
      [0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600].map(String).concat("+Inf"),
    );
  });

  test("operation names follow upstream's instrumented service", () => {
    expect(runtimeOperationName("runPodSandbox")).toBe("run_podsandbox");
    expect(runtimeOperationName("podSandboxStatus")).toBe("podsandbox_status");
    expect(runtimeOperationName("listContainerStats")).toBe("list_container_stats");
    expect(runtimeOperationName("execSync")).toBe("exec_sync");
  });
});

describe("resource and probe metrics", () => {
  test("/metrics/resource reads the summary: node, pod and container CPU seconds with reading times, working sets, start times", () => {
    const time = "2026-01-01T00:00:10Z";
    const text = renderResourceMetrics({
      node: { nodeName: "n1", startTime: time, cpu: { time, usageCoreNanoSeconds: 5e9 }, memory: { time, workingSetBytes: 1000 } },
      pods: [
        {
          podRef: { name: "web", namespace: "default", uid: "u1" },
          startTime: time,
          cpu: { time, usageCoreNanoSeconds: 2e9 },
          memory: { time, workingSetBytes: 300 },
          containers: [{ name: "app", startTime: "2026-01-01T00:00:00Z", cpu: { time, usageCoreNanoSeconds: 1.5e9 }, memory: { time, workingSetBytes: 200 } }],
        },
      ],
    } as never);
    expect(text).toContain(`node_cpu_usage_seconds_total 5 ${Date.parse(time)}`);
    // Working sets carry the time of their reading too, and the HELP its stability level, as upstream.
    expect(text).toContain(`node_memory_working_set_bytes 1000 ${Date.parse(time)}`);
    expect(text).toContain(`pod_memory_working_set_bytes{namespace="default",pod="web"} 300 ${Date.parse(time)}`);
    expect(text).toContain("# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds\n");
    const s = samples(text);
    expect(s.get("node_memory_working_set_bytes")).toBe("1000");
    expect(s.get('container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"}')).toBe("1.5");
    expect(s.get('container_memory_working_set_bytes{container="app",namespace="default",pod="web"}')).toBe("200");
    expect(s.get('container_start_time_seconds{container="app",namespace="default",pod="web"}')).toBe(String(Date.parse("2026-01-01T00:00:00Z") / 1000));
    expect(s.get('pod_cpu_usage_seconds_total{namespace="default",pod="web"}')).toBe("2");
    expect(s.get('pod_memory_working_set_bytes{namespace="default",pod="web"}')).toBe("300");
    expect(s.get("resource_scrape_error")).toBe("0");
    expect(samples(renderResourceMetrics(undefined)).get("resource_scrape_error")).toBe("1");
  });

  test("/metrics/probes counts runs by type and result and forgets a pod that is gone", () => {
    const pm = new ProbeMetrics();
    const pod = { metadata: { name: "web", namespace: "default", uid: "u1" }, spec: { containers: [] } } as unknown as Pod;
    pm.observe({ type: "readiness", pod, container: "app", result: "success", durationMs: 20 });
    pm.observe({ type: "readiness", pod, container: "app", result: "success", durationMs: 20 });
    pm.observe({ type: "liveness", pod, container: "app", result: "failure", durationMs: 5 });
    let s = samples(pm.render());
    expect(s.get('prober_probe_total{probe_type="Readiness",result="successful",container="app",pod="web",namespace="default",pod_uid="u1"}')).toBe("2");
    expect(s.get('prober_probe_total{probe_type="Liveness",result="failed",container="app",pod="web",namespace="default",pod_uid="u1"}')).toBe("1");
    expect(s.get('prober_probe_duration_seconds_count{probe_type="Readiness",container="app",pod="web",namespace="default"}')).toBe("2");
    pm.forgetPod("u1");
    s = samples(pm.render());
    expect([...s.keys()].filter((k) => k.includes('pod="web"'))).toEqual([]);
  });
});
