/** Cluster mode's API client: TLS bootstrap, client certificate rotation, or the API tests inject. */
import { posix } from "node:path";
import type { AgentConfig } from "../config/index.ts";
import { createKubeApi, type KubeApi } from "../api/index.ts";
import { clientGoRateLimit } from "../api/ratelimit.ts";
import type { Credentials } from "../api/kubeconfig.ts";
import type { RestClient } from "../api/rest.ts";
import { defaultRouteIPv4, goArch } from "../node/machine.ts";
import {
  bootstrapClientCertificate,
  ClientCertificateInUse,
  ClientCertificateRotation,
  csrApi,
  CURRENT_CLIENT_PEM,
  readUsableCertificate,
  type CsrApi,
} from "../certificates/client.ts";
import { certificateValidity } from "../certificates/x509.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { Wiring } from "./wiring.ts";

/**
 * Cluster mode: the API server is a pod source and the status sink, and the
 * node registers (deps.api in tests, else the one --kubeconfig names), with
 * its client certificate rotation started. Run-once never talks to it (upstream).
 */
export async function buildCluster(
  w: Wiring,
  o: { api: KubeApi | undefined; version: string | undefined; signal: AbortSignal; random: () => number },
): Promise<Cluster | undefined> {
  const { config, stack, clock, logger } = w;
  if (config.runOnce) return undefined;
  const cluster = o.api
    ? injectedCluster(o.api, o.version)
    : config.kubeconfig
      ? await connectCluster(config, { clock, logger, version: o.version, signal: o.signal, random: o.random })
      : undefined;
  // Built before every part that asks the API server, so their connections end after those parts stopped.
  if (cluster?.clients) {
    stack.use("API client", cluster.clients.api);
    if (cluster.clients.rotation) stack.use("client certificate rotation's API client", cluster.clients.rotation);
  }
  if (cluster?.rotation) stack.use("client certificate rotation", cluster.rotation).start();
  return cluster;
}

/** Cluster mode with a given API (tests): no certificates to bootstrap or rotate, no CSRs. */
function injectedCluster(api: KubeApi, version: string | undefined): Cluster {
  return { api, events: api, heartbeat: api, internalIP: undefined, kubeletVersion: kubeletVersionOf(version) };
}

const kubeletVersionOf = (version: string | undefined): string => (version ?? "Kubernetes v0.0.0-bunlet+dev").replace(/^Kubernetes /, "");

/** Cluster mode: the API server, the CSR API when certificates are bootstrapped or rotated, the node's address from the default route, the version reported. */
export interface Cluster {
  api: KubeApi;
  /** For events: the same connection with its own rate limit (eventRecordQPS / eventBurst), as upstream's event client. */
  events: KubeApi;
  /** For the Node and its Lease: the same connection without a rate limit, as upstream's heartbeat client. */
  heartbeat: KubeApi;
  csr?: CsrApi;
  internalIP: string | undefined;
  kubeletVersion: string;
  rotation?: ClientCertificateRotation;
  /** The REST clients this agent made (none for an injected API): their connections end with the disposal stack. */
  clients?: { api: RestClient; rotation?: RestClient };
}

/**
 * The rate limits of upstream's three API clients (cmd/kubelet/app/server.go),
 * read as client-go reads a rest config (QPS 0 is 5, burst 0 is 10):
 * the main one kubeAPIQPS / kubeAPIBurst, events eventRecordQPS /
 * eventBurst, and the heartbeat (node status and lease) none, so that a
 * burst of pod work never delays a lease renewal. The heartbeat's requests
 * time out after nodeStatusUpdateFrequency (at most the lease's duration),
 * so that a hung renewal is retried before the lease runs out.
 */
export function apiClientLimits(k: AgentConfig["kubelet"]): Record<"main" | "events" | "heartbeat", { qps: number; burst: number; timeoutMs?: number }> {
  return {
    main: clientGoRateLimit(k.kubeAPIQPS, k.kubeAPIBurst),
    events: clientGoRateLimit(k.eventRecordQPS, k.eventBurst),
    heartbeat: { qps: -1, burst: 0, timeoutMs: Math.min(k.nodeStatusUpdateFrequency, k.nodeLeaseDurationSeconds * 1000) },
  };
}

/**
 * The API client for cluster mode; client-node and the REST layer load only
 * here. TLS bootstrap first when configured; with rotateCertificates the
 * client certificate is renewed while running and the client follows it.
 */
export async function connectCluster(
  config: AgentConfig,
  opts: { clock: Clock; logger: Logger; version: string | undefined; signal: AbortSignal; random: () => number },
): Promise<Cluster> {
  const { createRestClient } = await import("../api/rest.ts");
  const kubeletVersion = kubeletVersionOf(opts.version);
  const userAgent = `kubelet/${kubeletVersion} (linux/${goArch()}) bunlet`;
  if (config.bootstrapKubeconfig) {
    await bootstrapClientCertificate({
      kubeconfig: config.kubeconfig!,
      bootstrapKubeconfig: config.bootstrapKubeconfig,
      certDir: config.certDir,
      nodeName: config.nodeName,
      clock: opts.clock,
      logger: opts.logger,
      signal: opts.signal,
      userAgent,
    });
  }
  const { credentials, rotation, rotationClient } = await rotatedCredentials(config, { ...opts, userAgent });
  const limits = apiClientLimits(config.kubelet);
  const rest = createRestClient({ credentials, ...limits.main, clock: opts.clock, logger: opts.logger, userAgent });
  opts.logger.info("using the API server", { server: rest.server, node: config.nodeName });
  return {
    api: createKubeApi(rest, { contentType: config.kubelet.contentType, random: opts.random }),
    events: createKubeApi(rest.withLimits(limits.events), { contentType: config.kubelet.contentType, random: opts.random }),
    heartbeat: createKubeApi(rest.withLimits(limits.heartbeat), { contentType: config.kubelet.contentType, random: opts.random }),
    csr: csrApi(rest),
    internalIP: defaultRouteIPv4(),
    kubeletVersion,
    rotation,
    clients: { api: rest, ...(rotationClient ? { rotation: rotationClient } : {}) },
  };
}

/**
 * The kubeconfig's credentials; with rotateCertificates, the client
 * certificate comes from a holder the rotation renews (its own CSR client
 * presents the same certificate).
 */
async function rotatedCredentials(
  config: AgentConfig,
  opts: { clock: Clock; logger: Logger; random: () => number; userAgent: string },
): Promise<{ credentials: Credentials; rotation?: ClientCertificateRotation; rotationClient?: RestClient }> {
  const { createRestClient, loadCredentials } = await import("../api/rest.ts");
  const loaded = await loadCredentials(config.kubeconfig!);
  if (!config.kubelet.rotateCertificates || !loaded.cert || !loaded.key) return { credentials: loaded };
  // A certificate rotated before a restart is newer than the one the kubeconfig names.
  const fromKubeconfig = { certificatePem: loaded.cert, privateKeyPem: loaded.key };
  const stored = readUsableCertificate(posix.join(config.certDir, CURRENT_CLIENT_PEM), opts.clock.now());
  const newer = stored && certificateValidity(stored.certificatePem).notAfterMs > certificateValidity(fromKubeconfig.certificatePem).notAfterMs;
  const inUse = new ClientCertificateInUse(newer ? stored : fromKubeconfig);
  const credentials: Credentials = { ...loaded, clientCertificate: inUse };
  const rotationClient = createRestClient({ credentials, qps: 5, burst: 10, clock: opts.clock, logger: opts.logger, userAgent: opts.userAgent });
  const rotation = new ClientCertificateRotation(inUse.current(), {
    api: csrApi(rotationClient),
    nodeName: config.nodeName,
    certDir: config.certDir,
    clock: opts.clock,
    logger: opts.logger,
    random: opts.random,
    inUse,
  });
  return { credentials, rotation, rotationClient };
}
