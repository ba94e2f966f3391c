/**
 * Builds the authenticated kubelet API (10250) from the configuration:
 * TLS from tlsCertFile/tlsPrivateKeyFile or a self-signed certificate in
 * --cert-dir, x509 client certificates from
 * authentication.x509.clientCAFile, bearer tokens and authorization through
 * the API server's TokenReview and SubjectAccessReview (cluster mode), and
 * container logs resolved from the pods' statuses to their CRI log files,
 * and exec/attach/portForward streams proxied to the runtime's streaming
 * server on the upgrade path, behind the same authentication and
 * authorization.
 */
import { readFileSync } from "node:fs";
import { posix } from "node:path";
import type { Hono } from "hono";
import type { KubeApi } from "../api/index.ts";
import type { KubeletConfiguration } from "../config/index.ts";
import type { StatsProvider } from "../stats/types.ts";
import type { ReportedStatuses } from "../status/index.ts";
import type { Logger } from "../util/log.ts";
import { realClock, type Clock } from "../util/clock.ts";
import { createSelfSignedCert, ensureSelfSignedCert } from "./selfsigned.ts";
import { authenticateWith, createAuthenticator } from "./authn.ts";
import { accessChecker, alwaysAllow, authorizeWith, webhookAuthorizer } from "./authz.ts";
import { configzBody } from "./configz.ts";
import { kubeletApi } from "./kubelet-api.ts";
import type { MachineSpecSource, MetricsEndpoints } from "../metrics/endpoints.ts";
import { bunProfiler, type Profiler, type VerbositySetter } from "./debug.ts";
import { streamingUpgrade } from "./stream-proxy.ts";
import { streamingResolver, type StreamingRuntime } from "./streaming.ts";
import { rotatedLogPaths, type ContainerLogs } from "./logs.ts";
import { journalctl, type Journal } from "./node-log-query.ts";
import { serveTls, type TlsServerHandle } from "./tls.ts";
import { tlsServerOptions } from "../config/tls-options.ts";
import type { CsrApi } from "../certificates/client.ts";
import { manageServingCertificate } from "../certificates/serving.ts";

export interface KubeletServerOptions {
  config: KubeletConfiguration;
  nodeName: string;
  api?: Pick<KubeApi, "reviewToken" | "reviewAccess">;
  /** The certificates API as the node: serverTLSBootstrap requests the serving certificate through it. */
  csr?: CsrApi;
  /** Pods with their statuses (LocalStatusStore): `/pods`, `/runningpods/`, container logs and streams. */
  pods: ReportedStatuses;
  stats: StatsProvider;
  /** exec, attach, portForward and run go to the runtime. */
  cri: StreamingRuntime;
  health: Hono;
  metrics?: MetricsEndpoints;
  /** Where `/logs/` reads (default /var/log); tests point it elsewhere. */
  nodeLogDir?: string;
  /** How NodeLogQuery reads the journal (default journalctl). */
  journal?: Journal;
  /** `/spec/`: the machine as cAdvisor's MachineInfo. */
  spec?: MachineSpecSource;
  /** The agent's log verbosity: PUT /debug/flags/v changes it (enableDebugFlagsHandler). */
  verbosity?: VerbositySetter;
  /** For /debug/heap and /debug/profile; Bun's own by default. */
  profiler?: Profiler;
  /** --cert-dir: where the self-signed serving certificate lives when no certificate files are configured. */
  certDir: string;
  /** --node-ip: SANs of the self-signed certificate. */
  nodeIPs: readonly string[];
  /** The node's InternalIP addresses as its status lists them: the IP SANs of a serving certificate from a CSR (default nodeIPs). */
  nodeAddresses?: readonly string[];
  clock?: Clock;
  logger: Logger;
}

/** Upstream CRI log layout: <podLogsDir>/<ns>_<name>_<uid>/<container>/<restartCount>.log (+ rotated files). */
export function logsFromStatuses(podLogsDir: string, pods: KubeletServerOptions["pods"]): ContainerLogs {
  return async (namespace, name, container, previous) => {
    const entry = pods.list().find(({ pod }) => pod.metadata.namespace === namespace && pod.metadata.name === name);
    if (!entry) return undefined;
    const status = [...(entry.status.initContainerStatuses ?? []), ...entry.status.containerStatuses, ...(entry.status.ephemeralContainerStatuses ?? [])].find(
      (c) => c.name === container,
    );
    if (!status) return undefined;
    const restart = previous ? status.restartCount - 1 : status.restartCount;
    if (restart < 0) return undefined;
    const dir = posix.join(podLogsDir, `${namespace}_${name}_${entry.pod.metadata.uid}`, container);
    return { paths: await rotatedLogPaths(posix.join(dir, `${restart}.log`)), running: !previous && "running" in status.state };
  };
}

/**
 * The serving certificate: tlsCertFile + tlsPrivateKeyFile when set, else
 * upstream's self-signed `<certDir>/kubelet.crt` / `kubelet.key` (made once,
 * reused). Only one of the two files set is an error, as upstream fails then.
 */
export function servingCertificate(opts: Pick<KubeletServerOptions, "config" | "certDir" | "nodeName" | "nodeIPs" | "logger"> & { now: number }): { cert: string; key: string } {
  const k = opts.config;
  if (k.tlsCertFile && k.tlsPrivateKeyFile) return { cert: readFileSync(k.tlsCertFile, "utf8"), key: readFileSync(k.tlsPrivateKeyFile, "utf8") };
  if (k.tlsCertFile || k.tlsPrivateKeyFile) {
    throw new Error(`tlsCertFile and tlsPrivateKeyFile must be set together (got ${k.tlsCertFile ? "only tlsCertFile" : "only tlsPrivateKeyFile"})`);
  }
  const made = ensureSelfSignedCert({ certDir: opts.certDir, hostname: opts.nodeName, ips: opts.nodeIPs, now: opts.now });
  opts.logger.info(made.created ? "made a self-signed serving certificate" : "using the self-signed serving certificate", { certFile: made.certFile, keyFile: made.keyFile });
  return made;
}

/** Starts 10250 unless enableServer is false: always over TLS, with the configured or a self-signed certificate. */
export async function startKubeletServer(opts: KubeletServerOptions): Promise<TlsServerHandle | undefined> {
  const k = opts.config;
  if (!k.enableServer) {
    opts.logger.info("not serving the kubelet API: enableServer is false");
    return undefined;
  }
  const clientCA = k.authentication.x509.clientCAFile ? readFileSync(k.authentication.x509.clientCAFile, "utf8") : undefined;
  const api = opts.api;
  const webhookAuthn = k.authentication.webhook.enabled && api;
  const authenticate = createAuthenticator({
    x509: clientCA !== undefined,
    ...(webhookAuthn ? { tokenReview: (token: string) => api.reviewToken(token), cacheTTLMs: k.authentication.webhook.cacheTTL } : {}),
    anonymous: k.authentication.anonymous.enabled,
    logger: opts.logger,
  });
  const authorizer =
    k.authorization.mode === "Webhook" && api
      ? webhookAuthorizer({
          subjectAccessReview: (attrs) =>
            api.reviewAccess({
              user: attrs.user.username,
              groups: attrs.user.groups,
              ...(attrs.user.uid ? { uid: attrs.user.uid } : {}),
              resourceAttributes: { verb: attrs.verb, resource: attrs.resource, subresource: attrs.subresource, name: attrs.name, version: attrs.apiVersion },
            }),
          cacheAuthorizedTTLMs: k.authorization.webhook.cacheAuthorizedTTL,
          cacheUnauthorizedTTLMs: k.authorization.webhook.cacheUnauthorizedTTL,
        })
      : alwaysAllow();
  if (k.authorization.mode === "Webhook" && !api) opts.logger.warn("authorization mode Webhook needs the API server; standalone mode allows every authenticated request");
  const checkAccess = accessChecker({ nodeName: opts.nodeName, authorizer, logger: opts.logger });
  const streaming = streamingResolver({ pods: opts.pods, cri: opts.cri });
  const app = kubeletApi({
    nodeName: opts.nodeName,
    pods: opts.pods,
    stats: opts.stats,
    logs: logsFromStatuses(k.podLogsDir, opts.pods),
    streaming,
    configz: () => configzBody(k),
    ...(opts.spec ? { spec: opts.spec } : {}),
    // Upstream serves its profiling handler only with the debugging handlers too.
    ...(k.enableDebuggingHandlers && k.enableProfilingHandler ? { profiler: opts.profiler ?? bunProfiler } : {}),
    // Upstream: /debug/flags/v with the debugging handlers on; 405 there when enableDebugFlagsHandler is false.
    ...(k.enableDebuggingHandlers && !k.enableDebugFlagsHandler ? { debugFlags: "disabled" as const } : {}),
    ...(k.enableDebuggingHandlers && k.enableDebugFlagsHandler && opts.verbosity ? { debugFlags: opts.verbosity } : {}),
    // Upstream: the node's /var/log under /logs/, with the debugging handlers and the system log handler on.
    ...(k.enableDebuggingHandlers && k.enableSystemLogHandler ? { nodeLogDir: opts.nodeLogDir ?? "/var/log" } : {}),
    // Upstream: log queries too with enableSystemLogQuery and the NodeLogQuery feature gate (config validation requires both together).
    ...(k.enableDebuggingHandlers && k.enableSystemLogHandler && k.enableSystemLogQuery && k.featureGates["NodeLogQuery"] === true
      ? { nodeLogQuery: { journal: opts.journal ?? journalctl } }
      : {}),
    health: opts.health,
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
    authn: authenticateWith(authenticate, opts.logger),
    authz: authorizeWith(checkAccess),
    logger: opts.logger,
  });
  const serve = (cert: string, key: string, holdUntilCertificate = false) =>
    serveTls({
      app,
      host: k.address,
      port: k.port,
      cert,
      key,
      holdUntilCertificate,
      ...tlsServerOptions(k.tlsMinVersion, k.tlsCipherSuites),
      ...(clientCA ? { clientCA } : {}),
      logger: opts.logger,
      upgrade: streamingUpgrade({
        authenticate,
        checkAccess,
        resolver: streaming,
        idleTimeoutMs: k.streamingConnectionIdleTimeout,
        ...(opts.clock ? { clock: opts.clock } : {}),
        logger: opts.logger,
      }),
    });
  if (k.serverTLSBootstrap && opts.csr) return serveOnceIssued(opts, opts.csr, serve);
  if (k.serverTLSBootstrap) opts.logger.warn("serverTLSBootstrap needs the API server; serving a certificate from the files or a self-signed one");
  const serving = servingCertificate({ ...opts, now: (opts.clock ?? realClock).now() });
  // (serveTls says "serving the kubelet API" with the address once it listens.)
  return serve(serving.cert, serving.key);
}

/**
 * serverTLSBootstrap: the serving certificate comes from the certificates
 * API (certificates/serving.ts) and wins over tlsCertFile, as upstream's
 * certificate manager does. Until the request is approved and signed there
 * is nothing to serve with: the port is open but every connection is
 * dropped before its handshake, as upstream fails handshakes then.
 * Renewals are served to new connections.
 */
async function serveOnceIssued(opts: KubeletServerOptions, csr: CsrApi, serve: (cert: string, key: string, hold?: boolean) => Promise<TlsServerHandle>): Promise<TlsServerHandle> {
  const clock = opts.clock ?? realClock;
  const placeholder = createSelfSignedCert({ hostname: opts.nodeName, ips: [], now: clock.now() });
  const server = await serve(placeholder.cert, placeholder.key, true);
  opts.logger.info("listening for the kubelet API; connections are refused until the serving certificate is issued", { address: `${opts.config.address}:${server.port}` });
  const stop = new AbortController();
  const manager = manageServingCertificate({
    api: csr,
    nodeName: opts.nodeName,
    altNames: [opts.nodeName, ...(opts.nodeAddresses ?? opts.nodeIPs)],
    certDir: opts.certDir,
    clock,
    logger: opts.logger,
    random: Math.random,
    signal: stop.signal,
    onCertificate: (cert) => server.setCertificate(cert.certificatePem, cert.privateKeyPem),
  });
  const close = async () => {
    stop.abort();
    manager[Symbol.dispose]();
    await server.close();
  };
  return { port: server.port, host: server.host, setCertificate: server.setCertificate, close, [Symbol.asyncDispose]: close };
}
