/**
 * The kubelet metrics that matter to operators, under upstream's names and
 * labels (pkg/kubelet/metrics), so existing dashboards and alerts work:
 * pod start duration, PLEG relist duration and interval, runtime operation
 * durations and errors, pod worker duration, running pods and containers,
 * started pods and containers; plus the process figures client_golang's
 * process collector exports.
 */
import { readFileSync, readdirSync } from "node:fs";
import type { CriService } from "../cri/index.ts";
import { alpha, exponentialBuckets, Registry, type Counter, type Histogram } from "./registry.ts";
import type { Clock } from "../util/clock.ts";

/** What the agent's subsystems report; each method is one event. A no-op implementation serves tests that do not look. */
export interface KubeletMetricsSink {
  podStarted(firstSeenMs: number, runningMs: number): void;
  plegRelist(durationMs: number, intervalMs: number | undefined): void;
  podWorkerStep(operation: "create" | "update" | "sync" | "kill" | "remove", durationMs: number): void;
  containerStarted(containerType: "container" | "init_container" | "ephemeral_container", error?: string): void;
  /** A device plugin asked to register (valid or not), as upstream counts it. */
  devicePluginRegistered(resource: string): void;
  /** One Allocate call to a device plugin and how long it took. */
  devicePluginAllocated(resource: string, durationMs: number): void;
}

export const noMetrics: KubeletMetricsSink = {
  podStarted: () => {},
  plegRelist: () => {},
  podWorkerStep: () => {},
  containerStarted: () => {},
  devicePluginRegistered: () => {},
  devicePluginAllocated: () => {},
};

/** Pods with a running sandbox and containers by state in the runtime (kubelet_running_pods, kubelet_running_containers), read at scrape time. */
export interface RuntimeCounts {
  runtimeCounts(): { pods: number; containers: Record<string, number> };
}

export interface KubeletMetricsOptions {
  nodeName: string;
  runtime: RuntimeCounts;
  /** Milliseconds since the epoch when the process started. */
  processStartMs: number;
  /** /proc root, injected for tests. */
  procRoot?: string;
}

const POD_START_BUCKETS = [0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600];

export class KubeletMetrics implements KubeletMetricsSink {
  readonly registry = new Registry();
  private readonly podStartDuration: Histogram;
  private readonly plegRelistDuration: Histogram;
  private readonly plegRelistInterval: Histogram;
  private readonly podWorkerDuration: Histogram<"operation_type">;
  readonly runtimeOperationsDuration: Histogram<"operation_type">;
  readonly runtimeOperations: Counter<"operation_type">;
  readonly runtimeOperationsErrors: Counter<"operation_type">;
  private readonly startedPods: Counter;
  private readonly startedContainers: Counter<"container_type">;
  private readonly startedContainersErrors: Counter<"container_type" | "code">;
  private readonly devicePluginRegistrations: Counter<"resource_name">;
  private readonly devicePluginAllocDuration: Histogram<"resource_name">;

  constructor(opts: KubeletMetricsOptions) {
    const r = this.registry;
    r.gaugeFn("kubelet_node_name", alpha("The node's name. The count is always 1."), () => [{ labels: { node: opts.nodeName }, value: 1 }]);
    this.podStartDuration = r.histogram(
      "kubelet_pod_start_duration_seconds",
      alpha("Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run"),
      [],
      POD_START_BUCKETS,
    );
    this.plegRelistDuration = r.histogram("kubelet_pleg_relist_duration_seconds", alpha("Duration in seconds for relisting pods in PLEG."));
    this.plegRelistInterval = r.histogram("kubelet_pleg_relist_interval_seconds", alpha("Interval in seconds between relisting in PLEG."));
    this.podWorkerDuration = r.histogram(
      "kubelet_pod_worker_duration_seconds",
      alpha("Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync"),
      ["operation_type"],
    );
    this.runtimeOperations = r.counter("kubelet_runtime_operations_total", alpha("Cumulative number of runtime operations by operation type."), ["operation_type"]);
    this.runtimeOperationsDuration = r.histogram(
      "kubelet_runtime_operations_duration_seconds",
      alpha("Duration in seconds of runtime operations. Broken down by operation type."),
      ["operation_type"],
      exponentialBuckets(0.005, 2.5, 14),
    );
    this.runtimeOperationsErrors = r.counter("kubelet_runtime_operations_errors_total", alpha("Cumulative number of runtime operation errors by operation type."), [
      "operation_type",
    ]);
    r.gaugeFn("kubelet_running_pods", alpha("Number of pods that have a running pod sandbox"), () => [{ value: opts.runtime.runtimeCounts().pods }]);
    r.gaugeFn("kubelet_running_containers", alpha("Number of containers currently running"), () =>
      Object.entries(opts.runtime.runtimeCounts().containers).map(([state, value]) => ({ labels: { container_state: state }, value })),
    );
    this.startedPods = r.counter("kubelet_started_pods_total", alpha("Cumulative number of pods started"));
    this.startedContainers = r.counter("kubelet_started_containers_total", alpha("Cumulative number of containers started"), ["container_type"]);
    this.startedContainersErrors = r.counter("kubelet_started_containers_errors_total", alpha("Cumulative number of errors when starting containers"), ["container_type", "code"]);
    this.devicePluginRegistrations = r.counter(
      "kubelet_device_plugin_registration_total",
      alpha("Cumulative number of device plugin registrations. Broken down by resource name."),
      ["resource_name"],
    );
    this.devicePluginAllocDuration = r.histogram(
      "kubelet_device_plugin_alloc_duration_seconds",
      alpha("Duration in seconds to serve a device plugin Allocation request. Broken down by resource name."),
      ["resource_name"],
    );
    registerProcessMetrics(r, opts.processStartMs, opts.procRoot ?? "/proc");
  }

  devicePluginRegistered(resource: string): void {
    this.devicePluginRegistrations.inc({ resource_name: resource });
  }

  devicePluginAllocated(resource: string, durationMs: number): void {
    this.devicePluginAllocDuration.observe({ resource_name: resource }, durationMs / 1000);
  }

  podStarted(firstSeenMs: number, runningMs: number): void {
    this.podStartDuration.observe({}, Math.max(0, runningMs - firstSeenMs) / 1000);
    this.startedPods.inc();
  }

  plegRelist(durationMs: number, intervalMs: number | undefined): void {
    this.plegRelistDuration.observe({}, durationMs / 1000);
    if (intervalMs !== undefined) this.plegRelistInterval.observe({}, intervalMs / 1000);
  }

  podWorkerStep(operation: "create" | "update" | "sync" | "kill" | "remove", durationMs: number): void {
    this.podWorkerDuration.observe({ operation_type: operation }, durationMs / 1000);
  }

  containerStarted(containerType: "container" | "init_container" | "ephemeral_container", error?: string): void {
    if (error === undefined) this.startedContainers.inc({ container_type: containerType });
    else this.startedContainersErrors.inc({ container_type: containerType, code: error });
  }

  render(): string {
    return this.registry.render();
  }
}

/** Upstream's operation names (instrumented_services.go): snake case, "pod_sandbox" written "podsandbox". */
export function runtimeOperationName(method: string): string {
  return method.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`).replace("pod_sandbox", "podsandbox");
}

/**
 * Wraps every promise-returning CRI call with the runtime operation
 * metrics; streams and synchronous members pass through untouched.
 */
export function instrumentCri(
  cri: CriService,
  metrics: Pick<KubeletMetrics, "runtimeOperations" | "runtimeOperationsDuration" | "runtimeOperationsErrors">,
  clock: Pick<Clock, "now">,
): CriService {
  return new Proxy(cri, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== "function" || typeof prop !== "string" || prop === "close") return value;
      const operation = runtimeOperationName(prop);
      return (...args: unknown[]) => {
        const started = clock.now();
        const result = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (!(result instanceof Promise)) return result;
        metrics.runtimeOperations.inc({ operation_type: operation });
        return result.then(
          (v) => (metrics.runtimeOperationsDuration.observe({ operation_type: operation }, (clock.now() - started) / 1000), v),
          (err: unknown) => {
            metrics.runtimeOperationsDuration.observe({ operation_type: operation }, (clock.now() - started) / 1000);
            metrics.runtimeOperationsErrors.inc({ operation_type: operation });
            throw err;
          },
        );
      };
    },
  });
}

function registerProcessMetrics(r: Registry, startMs: number, procRoot: string): void {
  const stat = () => {
    // /proc/self/stat: fields after the command (which may contain spaces) start after the last ')'.
    const text = readFileSync(`${procRoot}/self/stat`, "utf8");
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  };
  const clockTicks = 100; // USER_HZ; Linux reports 100 on every architecture we ship
  const pageSize = 4096;
  r.counterFn("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", () => {
    const f = stat();
    return [{ value: (Number(f[11]) + Number(f[12])) / clockTicks }];
  });
  r.gaugeFn("process_resident_memory_bytes", "Resident memory size in bytes.", () => [{ value: Number(stat()[21]) * pageSize }]);
  r.gaugeFn("process_virtual_memory_bytes", "Virtual memory size in bytes.", () => [{ value: Number(stat()[20]) }]);
  r.gaugeFn("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", () => [{ value: startMs / 1000 }]);
  r.gaugeFn("process_open_fds", "Number of open file descriptors.", () => {
    try {
      return [{ value: readdirSync(`${procRoot}/self/fd`).length }];
    } catch {
      return [];
    }
  });
}
