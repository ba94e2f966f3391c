export { parseCriLine, type CriLogEntry } from "../logs/cri-line.ts";
/** The agent's HTTP servers: healthz (10248), read-only (10255) and the authenticated kubelet API (10250). */
export { healthzApp, syncLoopCheck, type HealthCheck } from "./healthz.ts";
export { readOnlyApp } from "./readonly.ts";
export { serveTls, type ServeTlsOptions, type TlsBindings, type TlsServerHandle } from "./tls.ts";
export {
  authentication,
  createAuthenticator,
  cachedTokenReview,
  bearerToken,
  userFromCertificate,
  AuthenticationError,
  ANONYMOUS_USER,
  AUTHENTICATED_GROUP,
  UNAUTHENTICATED_GROUP,
  DEFAULT_TOKEN_CACHE_TTL_MS,
  type Authenticate,
  type AuthenticationOptions,
  type KubeletEnv,
  type PeerSocket,
  type TokenReview,
  type TokenReviewResult,
  type UserInfo,
} from "./authn.ts";
export {
  authorization,
  alwaysAllow,
  webhookAuthorizer,
  requestAttributes,
  isSubpath,
  DEFAULT_AUTHORIZED_TTL_MS,
  DEFAULT_UNAUTHORIZED_TTL_MS,
  type Authorizer,
  type AuthzAttributes,
  type AuthzDecision,
  type SubjectAccessReview,
} from "./authz.ts";
export { kubeletApi, HttpError, type KubeletApiOptions } from "./kubelet-api.ts";
export { cpuAndMemoryOnly } from "./default-routes.ts";
export { readLogs, logStream, parseLogQuery, rotatedLogPaths, BadLogQuery, type ContainerLogs, type LogOptions, type ReadLogsOptions, type ResolvedLogs } from "./logs.ts";
export {
  streamingResolver,
  parseStreamingPath,
  parseStreamOptions,
  parsePorts,
  type StreamingKind,
  type StreamingResolver,
  type StreamingRuntime,
  type StreamingTarget,
  type StreamOptions,
} from "./streaming.ts";
export { streamingUpgrade, proxyStream, backendRequestHead, type StreamingUpgradeOptions, type UpgradeHandler } from "./stream-proxy.ts";
export { accessChecker, authorizeWith, type AccessDecision } from "./authz.ts";
export { authenticateWith } from "./authn.ts";
export { createSelfSignedCert, ensureSelfSignedCert, type ServingCert } from "./selfsigned.ts";
export { configzBody } from "./configz.ts";
export { DEFAULT_CONNECTION_LIMITS, HANDLER_TIMEOUT_MS, MAX_BODY_BYTES, handlerTimeout, type ConnectionLimits } from "./limits.ts";
export { startKubeletServer, servingCertificate, type KubeletServerOptions } from "./wire.ts";
