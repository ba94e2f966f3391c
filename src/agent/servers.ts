/** What the agent serves over HTTP: healthz, the kubelet API and the read-only port. */
import type { CriService } from "../cri/index.ts";
import type { MachineInfo } from "../node/machine.ts";
import { HostMachineSpec } from "../node/machine-spec.ts";
import type { StatsCollector } from "../stats/index.ts";
import type { KubeletMetrics } from "../metrics/kubelet.ts";
import type { ProbeMetrics } from "../metrics/probes.ts";
import { ScrapedMetrics } from "../metrics/endpoints.ts";
import type { healthzApp } from "../server/healthz.ts";
import { readOnlyApp } from "../server/readonly.ts";
import { startKubeletServer } from "../server/wire.ts";
import type { LocalStatusStore } from "../status/index.ts";
import type { Wiring } from "./wiring.ts";
import type { Cluster } from "./cluster.ts";
import type { Verbosity } from "../util/log.ts";

/** What the agent serves over HTTP: healthz (10248), the kubelet API (10250) and the read-only port (10255), each closed with the stack. */
export async function startServers(
  w: Wiring,
  o: {
    cluster: Cluster | undefined;
    hostIP: string | undefined;
    health: ReturnType<typeof healthzApp>;
    statuses: LocalStatusStore;
    stats: StatsCollector;
    cri: CriService;
    metrics: KubeletMetrics;
    probeMetrics: ProbeMetrics;
    pauseImage: string | undefined;
    machine: MachineInfo;
    /** The logger's verbosity, for PUT /debug/flags/v (enableDebugFlagsHandler). */
    verbosity?: Verbosity;
  },
): Promise<void> {
  const { config, stack, clock, logger } = w;
  const { cluster, hostIP, health, statuses, stats, cri, metrics, probeMetrics, pauseImage, machine } = o;
  const k = config.kubelet;
  if (k.healthzPort > 0) {
    const server = Bun.serve({ hostname: k.healthzBindAddress, port: k.healthzPort, fetch: health.fetch });
    stack.defer("healthz server", () => server.stop(true));
    logger.info("serving healthz", { address: `${k.healthzBindAddress}:${k.healthzPort}` });
  }
  const machineSpec = new HostMachineSpec(machine, clock);
  const scraped = new ScrapedMetrics({ kubelet: metrics, probes: probeMetrics, stats, sandboxImage: pauseImage ?? "", machine: machineSpec, version: machine, clock });
  const kubeletServer = await startKubeletServer({
    config: k,
    ...(o.verbosity ? { verbosity: o.verbosity } : {}),
    nodeName: config.nodeName,
    ...(cluster ? { api: cluster.api } : {}),
    ...(cluster?.csr ? { csr: cluster.csr } : {}),
    pods: statuses,
    stats,
    cri,
    certDir: config.certDir,
    nodeIPs: config.nodeIPs,
    nodeAddresses: config.nodeIPs.length ? config.nodeIPs : hostIP ? [hostIP] : [],
    health,
    metrics: scraped,
    spec: machineSpec,
    logger,
  });
  if (kubeletServer) stack.defer("kubelet API server", () => kubeletServer.close());
  if (k.readOnlyPort > 0) {
    const server = Bun.serve({ hostname: k.address, port: k.readOnlyPort, fetch: readOnlyApp({ statuses, health, stats, metrics: scraped, spec: machineSpec, logger }).fetch });
    stack.defer("read-only server", () => server.stop(true));
    logger.info("serving read-only port", { address: `${k.address}:${k.readOnlyPort}` });
  }
}
