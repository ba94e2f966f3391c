/** Cluster mode's API client: TLS bootstrap, client certificate rotation, or the API tests inject. */
import { posix } from "node:path";
import type { AgentConfig } from "../config/index.ts";
import { createKubeApi, type KubeApi } from "../api/index.ts";
import { defaultRouteIPv4, goArch } from "../node/machine.ts";
import { bootstrapClientCertificate, ClientCertificateRotation, csrApi, CURRENT_CLIENT_PEM, readUsableCertificate, type CsrApi } from "../certificates/client.ts";
import { certificateValidity } from "../certificates/x509.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { Wiring } from "./wiring.ts";

/**
 * Cluster mode: the API server is a pod source and the status sink, and the
 * node registers (deps.api in tests, else the one --kubeconfig names), with
 * its client certificate rotation started. Run-once never talks to it (upstream).
 */
export async function buildCluster(w: Wiring, o: { api: KubeApi | undefined; version: string | undefined; signal: AbortSignal }): Promise<Cluster | undefined> {
  const { config, stack, clock, logger } = w;
  if (config.runOnce) return undefined;
  const cluster = o.api ? injectedCluster(o.api, o.version) : config.kubeconfig ? await connectCluster(config, { clock, logger, version: o.version, signal: o.signal }) : undefined;
  if (cluster?.rotation) stack.use(cluster.rotation).start();
  return cluster;
}

/** Cluster mode with a given API (tests): no certificates to bootstrap or rotate, no CSRs. */
function injectedCluster(api: KubeApi, version: string | undefined): Cluster {
  return { api, internalIP: undefined, kubeletVersion: kubeletVersionOf(version) };
}

const kubeletVersionOf = (version: string | undefined): string => (version ?? "Kubernetes v0.0.0-bunlet+dev").replace(/^Kubernetes /, "");

/** Cluster mode: the API server, the CSR API when certificates are bootstrapped or rotated, the node's address from the default route, the version reported. */
export interface Cluster {
  api: KubeApi;
  csr?: CsrApi;
  internalIP: string | undefined;
  kubeletVersion: string;
  rotation?: ClientCertificateRotation;
}

/**
 * The API client for cluster mode; client-node and the REST layer load only
 * here. TLS bootstrap first when configured; with rotateCertificates the
 * client certificate is renewed while running and the client follows it.
 */
export async function connectCluster(config: AgentConfig, opts: { clock: Clock; logger: Logger; version: string | undefined; signal: AbortSignal }): Promise<Cluster> {
  const { createRestClient, loadCredentials } = await import("../api/rest.ts");
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
  const credentials = await loadCredentials(config.kubeconfig!);
  let rotation: ClientCertificateRotation | undefined;
  if (config.kubelet.rotateCertificates && credentials.cert && credentials.key) {
    // A certificate rotated before a restart is newer than the one the kubeconfig names.
    const fromKubeconfig = { certificatePem: credentials.cert, privateKeyPem: credentials.key };
    const stored = readUsableCertificate(posix.join(config.certDir, CURRENT_CLIENT_PEM), opts.clock.now());
    const newer = stored && certificateValidity(stored.certificatePem).notAfterMs > certificateValidity(fromKubeconfig.certificatePem).notAfterMs;
    let current = newer ? stored : fromKubeconfig;
    credentials.clientCertificate = () => ({ cert: current.certificatePem, key: current.privateKeyPem });
    rotation = new ClientCertificateRotation(current, {
      api: csrApi(createRestClient({ credentials, qps: 5, burst: 10, clock: opts.clock, userAgent })),
      nodeName: config.nodeName,
      certDir: config.certDir,
      clock: opts.clock,
      logger: opts.logger,
      random: Math.random,
      onRotated: (next) => (current = next),
    });
  }
  const rest = createRestClient({ credentials, qps: config.kubelet.kubeAPIQPS, burst: config.kubelet.kubeAPIBurst, clock: opts.clock, userAgent });
  opts.logger.info("using the API server", { server: rest.server, node: config.nodeName });
  return { api: createKubeApi(rest, { contentType: config.kubelet.contentType }), csr: csrApi(rest), internalIP: defaultRouteIPv4(), kubeletVersion, rotation };
}
