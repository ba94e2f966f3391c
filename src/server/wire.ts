/**
 * Builds the authenticated kubelet API (10250) from the configuration:
 * TLS from tlsCertFile/tlsPrivateKeyFile, x509 client certificates from
 * authentication.x509.clientCAFile, bearer tokens and authorization through
 * the API server's TokenReview and SubjectAccessReview (cluster mode), and
 * container logs resolved from the pods' statuses to their CRI log files.
 */
import { readFileSync } from "node:fs";
import { posix } from "node:path";
import type { Hono } from "hono";
import type { KubeApi } from "../api/index.ts";
import type { KubeletConfiguration } from "../config/index.ts";
import type { Pod } from "../pods/schema.ts";
import type { StatsProvider } from "../stats/types.ts";
import type { PodStatusView } from "../status/phase.ts";
import type { Logger } from "../util/log.ts";
import { authentication } from "./authn.ts";
import { alwaysAllow, authorization, webhookAuthorizer } from "./authz.ts";
import { kubeletApi, type MetricsEndpoints } from "./kubelet-api.ts";
import { rotatedLogPaths, type ContainerLogs } from "./logs.ts";
import { serveTls, type TlsServerHandle } from "./tls.ts";

export interface KubeletServerOptions {
  config: KubeletConfiguration;
  nodeName: string;
  api?: Pick<KubeApi, "reviewToken" | "reviewAccess">;
  pods: () => { pod: Pod; status: PodStatusView }[];
  stats: StatsProvider;
  health: Hono;
  metrics?: MetricsEndpoints;
  logger: Logger;
}

/** Upstream CRI log layout: <podLogsDir>/<ns>_<name>_<uid>/<container>/<restartCount>.log (+ rotated files). */
export function logsFromStatuses(podLogsDir: string, pods: KubeletServerOptions["pods"]): ContainerLogs {
  return async (namespace, name, container, previous) => {
    const entry = pods().find(({ pod }) => pod.metadata.namespace === namespace && pod.metadata.name === name);
    if (!entry) return undefined;
    const status = [...(entry.status.initContainerStatuses ?? []), ...entry.status.containerStatuses].find((c) => c.name === container);
    if (!status) return undefined;
    const restart = previous ? status.restartCount - 1 : status.restartCount;
    if (restart < 0) return undefined;
    const dir = posix.join(podLogsDir, `${namespace}_${name}_${entry.pod.metadata.uid}`, container);
    return { paths: await rotatedLogPaths(posix.join(dir, `${restart}.log`)), running: !previous && "running" in status.state };
  };
}

/** Starts 10250 when serving certificates are configured; undefined (and a log line) otherwise. */
export async function startKubeletServer(opts: KubeletServerOptions): Promise<TlsServerHandle | undefined> {
  const k = opts.config;
  if (!k.tlsCertFile || !k.tlsPrivateKeyFile) {
    opts.logger.warn("not serving the kubelet API: set tlsCertFile and tlsPrivateKeyFile (self-signed and bootstrapped certificates are not implemented yet)");
    return undefined;
  }
  const clientCA = k.authentication.x509.clientCAFile ? readFileSync(k.authentication.x509.clientCAFile, "utf8") : undefined;
  const api = opts.api;
  const webhookAuthn = k.authentication.webhook.enabled && api;
  const authn = authentication({
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
  const app = kubeletApi({
    nodeName: opts.nodeName,
    pods: opts.pods,
    stats: opts.stats,
    logs: logsFromStatuses(k.podLogsDir, opts.pods),
    health: opts.health,
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
    authn,
    authz: authorization({ nodeName: opts.nodeName, authorizer, logger: opts.logger }),
    logger: opts.logger,
  });
  const server = await serveTls({
    app,
    host: k.address,
    port: k.port,
    cert: readFileSync(k.tlsCertFile, "utf8"),
    key: readFileSync(k.tlsPrivateKeyFile, "utf8"),
    ...(clientCA ? { clientCA } : {}),
    logger: opts.logger,
  });
  opts.logger.info("serving the kubelet API", { address: `${k.address}:${server.port}` });
  return server;
}
