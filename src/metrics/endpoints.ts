/**
 * What the kubelet API (10250) serves under /metrics, rendered at each
 * scrape: the kubelet's own registry with the volume stats of the last
 * summary, the resource metrics, the probe metrics, and cAdvisor's
 * container and machine metrics.
 */
import type { CadvisorView } from "../stats/cadvisor.ts";
import type { StatsProvider, Summary } from "../stats/types.ts";
import type { Clock } from "../util/clock.ts";
import { cadvisorMetrics, machineFactsFromSpec } from "./cadvisor.ts";
import { resourceMetrics } from "./resource.ts";
import { renderVolumeStatsMetrics } from "./volume-stats.ts";

/** `/metrics`, `/metrics/resource`, `/metrics/probes`, `/metrics/cadvisor` (Prometheus text), served by server/kubelet-api.ts. */
export interface MetricsEndpoints {
  kubelet(): string;
  resource(): Promise<string>;
  probes(): string;
  /** `/metrics/cadvisor` (metrics/cadvisor.ts). */
  cadvisor(): Promise<string>;
}

/** A registry rendered as Prometheus text (KubeletMetrics, ProbeMetrics). */
export interface RenderedMetrics {
  render(): string;
}

/** The machine as cAdvisor's MachineInfo (node/machine-spec.ts HostMachineSpec), read at each scrape. */
export interface MachineSpecSource {
  spec(): Record<string, unknown>;
}

export interface ScrapedMetricsOptions {
  kubelet: RenderedMetrics;
  probes: RenderedMetrics;
  /** The stats collector: a fresh summary, the last one, and cAdvisor's view of the containers. */
  stats: StatsProvider & { latest(): Summary | undefined; cadvisor(opts: { sandboxImage: string }): Promise<CadvisorView> };
  /** The runtime's sandbox image, whose containers cAdvisor's metrics leave out; "" when unknown. */
  sandboxImage: string;
  machine: MachineSpecSource;
  /** What the machine facts add to the spec. */
  version: { kernelVersion: string; osImage: string };
  clock: Pick<Clock, "now">;
}

export class ScrapedMetrics implements MetricsEndpoints {
  constructor(private readonly o: ScrapedMetricsOptions) {}

  kubelet(): string {
    return this.o.kubelet.render() + renderVolumeStatsMetrics(this.o.stats.latest());
  }

  resource(): Promise<string> {
    return resourceMetrics(this.o.stats);
  }

  probes(): string {
    return this.o.probes.render();
  }

  cadvisor(): Promise<string> {
    const { stats, sandboxImage, machine, version, clock } = this.o;
    return cadvisorMetrics(
      () => stats.cadvisor({ sandboxImage }),
      () => machineFactsFromSpec(machine.spec(), version),
      () => clock.now(),
    );
  }
}
