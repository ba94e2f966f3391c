/**
 * `/metrics/probes`: upstream's prober metrics (pkg/kubelet/prober), a
 * counter of probe runs by type and result and a histogram of their
 * durations, per container. A pod's series go when the pod goes.
 */
import type { ProbeRun, ProbeRunSink } from "../prober/manager.ts";
import { alpha, Registry } from "./registry.ts";
import { podUid } from "../pods/identity.ts";

const typeName = { liveness: "Liveness", readiness: "Readiness", startup: "Startup" } as const;
const resultName = { success: "successful", failure: "failed", unknown: "unknown" } as const;

export class ProbeMetrics implements ProbeRunSink {
  private readonly registry = new Registry();
  private readonly total = this.registry.counter("prober_probe_total", alpha("Cumulative number of a liveness, readiness or startup probe for a container by result."), [
    "probe_type",
    "result",
    "container",
    "pod",
    "namespace",
    "pod_uid",
  ]);
  private readonly duration = this.registry.histogram("prober_probe_duration_seconds", alpha("Duration in seconds for a probe response."), [
    "probe_type",
    "container",
    "pod",
    "namespace",
  ]);

  private readonly podNames = new Map<string, { pod: string; namespace: string }>();

  observe(run: ProbeRun): void {
    const pod = run.pod.metadata.name ?? "";
    const namespace = run.pod.metadata.namespace ?? "default";
    this.podNames.set(podUid(run.pod), { pod, namespace });
    const probeType = typeName[run.type];
    this.total.inc({ probe_type: probeType, result: resultName[run.result], container: run.container, pod, namespace, pod_uid: podUid(run.pod) });
    this.duration.observe({ probe_type: probeType, container: run.container, pod, namespace }, run.durationMs / 1000);
  }

  forgetPod(uid: string): void {
    this.total.removeWhere((l) => l["pod_uid"] === uid);
    const names = this.podNames.get(uid);
    if (names) this.duration.removeWhere((l) => l["pod"] === names.pod && l["namespace"] === names.namespace);
    this.podNames.delete(uid);
  }

  render(): string {
    return this.registry.render();
  }
}
