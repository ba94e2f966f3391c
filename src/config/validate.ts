/**
 * Checks on the merged configuration (file, defaults and flags), after
 * upstream pkg/kubelet/apis/config/validation ValidateKubeletConfiguration:
 * ranges, enumerations and the relations between fields. The schema has
 * already checked types and formats; these checks run after flags are merged
 * because a flag can break them as well as the file.
 */
import { isIP } from "node:net";
import type { KubeletConfiguration } from "./kubelet-config.ts";
import { parseQuantity } from "./quantity.ts";
import { sysctlPatternProblem } from "./sysctl-names.ts";
import { tlsOptionProblems } from "./tls-options.ts";

/** Returns one message per problem: `field "port" (--port): must be ...`. */
export function validateKubeletConfiguration(k: KubeletConfiguration): string[] {
  const errs: string[] = [];
  const field = (name: string, flag?: string) => `field ${JSON.stringify(name)}${flag ? ` (--${flag})` : ""}`;
  const check = (ok: boolean, name: string, flag: string | undefined, msg: string) => {
    if (!ok) errs.push(`${field(name, flag)}: ${msg}`);
  };
  const range = (value: number, min: number, max: number, name: string, flag?: string) =>
    check(value >= min && value <= max, name, flag, `must be between ${min} and ${max}, got ${value}`);
  const nonNegative = (value: number, name: string, flag?: string) => check(value >= 0, name, flag, `must not be negative, got ${value}`);
  const positive = (value: number, name: string, flag?: string) => check(value > 0, name, flag, `must be greater than 0, got ${value}`);
  const oneOf = (value: string, allowed: readonly string[], name: string, flag?: string) =>
    check(allowed.includes(value), name, flag, `must be one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}, got ${JSON.stringify(value)}`);
  const ip = (value: string, name: string, flag?: string) => check(isIP(value) !== 0, name, flag, `expected an IP address, got ${JSON.stringify(value)}`);

  // upstream validation_linux.go: the per-pod user namespace size.
  const idsPerPod = k.userNamespaces.idsPerPod;
  if (idsPerPod < 65536) check(false, "userNamespaces.idsPerPod", undefined, "must not be less than 65536");
  else if (idsPerPod % 65536 !== 0) check(false, "userNamespaces.idsPerPod", undefined, "must be a multiple of 65536");
  else check(idsPerPod <= 2 ** 32 - 1, "userNamespaces.idsPerPod", undefined, `must not be more than ${2 ** 32 - 1}`);

  // Serving
  range(k.port, 1, 65535, "port", "port");
  if (k.readOnlyPort !== 0) range(k.readOnlyPort, 1, 65535, "readOnlyPort", "read-only-port");
  if (k.healthzPort !== 0) range(k.healthzPort, 1, 65535, "healthzPort", "healthz-port");
  ip(k.address, "address", "address");
  ip(k.healthzBindAddress, "healthzBindAddress", "healthz-bind-address");
  oneOf(k.authorization.mode, ["AlwaysAllow", "Webhook"], "authorization.mode", "authorization-mode");
  errs.push(...tlsOptionProblems(k.tlsMinVersion, k.tlsCipherSuites));
  k.clusterDNS.forEach((s, i) => ip(s, `clusterDNS[${i}]`, "cluster-dns"));
  // Upstream: the log query needs its feature gate and the system log handler it extends.
  if (k.enableSystemLogQuery) {
    check(k.featureGates["NodeLogQuery"] === true, "enableSystemLogQuery", undefined, "needs the NodeLogQuery feature gate (featureGates: {NodeLogQuery: true})");
    check(k.enableSystemLogHandler, "enableSystemLogQuery", undefined, "needs enableSystemLogHandler");
  }

  // Periods the agent's loops run on
  positive(k.syncFrequency, "syncFrequency", "sync-frequency");
  positive(k.fileCheckFrequency, "fileCheckFrequency", "file-check-frequency");
  positive(k.httpCheckFrequency, "httpCheckFrequency", "http-check-frequency");
  positive(k.runtimeRequestTimeout, "runtimeRequestTimeout", "runtime-request-timeout");
  positive(k.offlineAutonomy.maxAge, "offlineAutonomy.maxAge");
  positive(k.nodeStatusUpdateFrequency, "nodeStatusUpdateFrequency", "node-status-update-frequency");
  positive(k.nodeLeaseDurationSeconds, "nodeLeaseDurationSeconds");

  // Runtime and images
  check(k.containerRuntimeEndpoint !== "", "containerRuntimeEndpoint", "container-runtime-endpoint", "is required");
  range(k.imageGCHighThresholdPercent, 0, 100, "imageGCHighThresholdPercent", "image-gc-high-threshold");
  range(k.imageGCLowThresholdPercent, 0, 100, "imageGCLowThresholdPercent", "image-gc-low-threshold");
  check(
    k.imageGCLowThresholdPercent < k.imageGCHighThresholdPercent,
    "imageGCLowThresholdPercent",
    "image-gc-low-threshold",
    `must be less than imageGCHighThresholdPercent (${k.imageGCHighThresholdPercent}), got ${k.imageGCLowThresholdPercent}`,
  );
  check(k.imageMaximumGCAge === 0 || k.imageMaximumGCAge > k.imageMinimumGCAge, "imageMaximumGCAge", undefined, "must be 0 (disabled) or greater than imageMinimumGCAge");
  nonNegative(k.registryPullQPS, "registryPullQPS", "registry-qps");
  nonNegative(k.registryBurst, "registryBurst", "registry-burst");
  if (k.maxParallelImagePulls !== undefined) {
    check(k.maxParallelImagePulls >= 1, "maxParallelImagePulls", undefined, `must be at least 1, got ${k.maxParallelImagePulls}`);
    check(!k.serializeImagePulls || k.maxParallelImagePulls <= 1, "maxParallelImagePulls", undefined, "must be 1 or unset when serializeImagePulls is true");
  }
  k.allowedUnsafeSysctls.forEach((s, i) => {
    const problem = sysctlPatternProblem(s);
    check(problem === undefined, `allowedUnsafeSysctls[${i}]`, "allowed-unsafe-sysctls", problem ?? "");
  });
  oneOf(
    k.imagePullCredentialsVerificationPolicy,
    ["", "NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages", "AlwaysVerify"],
    "imagePullCredentialsVerificationPolicy",
  );
  check(k.containerLogMaxFiles > 1, "containerLogMaxFiles", "container-log-max-files", `must be at least 2, got ${k.containerLogMaxFiles}`);
  check(parseQuantity(k.containerLogMaxSize) > 0, "containerLogMaxSize", "container-log-max-size", `must be greater than 0, got ${JSON.stringify(k.containerLogMaxSize)}`);
  positive(k.containerLogMaxWorkers, "containerLogMaxWorkers");
  check(k.containerLogMonitorInterval >= 3000, "containerLogMonitorInterval", undefined, "must be at least 3s");

  // API client and events
  nonNegative(k.kubeAPIQPS, "kubeAPIQPS", "kube-api-qps");
  nonNegative(k.kubeAPIBurst, "kubeAPIBurst", "kube-api-burst");
  nonNegative(k.eventRecordQPS, "eventRecordQPS", "event-qps");
  nonNegative(k.eventBurst, "eventBurst", "event-burst");
  check(k.nodeStatusMaxImages >= -1, "nodeStatusMaxImages", "node-status-max-images", `must be -1 (no limit) or more, got ${k.nodeStatusMaxImages}`);
  oneOf(k.configMapAndSecretChangeDetectionStrategy, ["Get", "Cache", "Watch"], "configMapAndSecretChangeDetectionStrategy");
  // The two encodings the API server speaks; upstream's client fails on any other at start.
  oneOf(k.contentType, ["application/vnd.kubernetes.protobuf", "application/json"], "contentType", "kube-api-content-type");

  // Networking
  oneOf(k.hairpinMode, ["promiscuous-bridge", "hairpin-veth", "none"], "hairpinMode", "hairpin-mode");
  range(k.iptablesMasqueradeBit, 0, 31, "iptablesMasqueradeBit");
  range(k.iptablesDropBit, 0, 31, "iptablesDropBit");

  // Resources and cgroups
  nonNegative(k.maxPods, "maxPods", "max-pods");
  nonNegative(k.podsPerCore, "podsPerCore", "pods-per-core");
  nonNegative(k.maxOpenFiles, "maxOpenFiles", "max-open-files");
  range(k.oomScoreAdj, -1000, 1000, "oomScoreAdj", "oom-score-adj");
  oneOf(k.cgroupDriver, ["cgroupfs", "systemd"], "cgroupDriver", "cgroup-driver");
  check(k.systemCgroups === "" || k.cgroupRoot !== "", "systemCgroups", "system-cgroups", "requires cgroupRoot (--cgroup-root) to be set");
  check(k.systemCgroups === "" || k.systemCgroups.replace(/\/+/g, "/") !== "/", "systemCgroups", "system-cgroups", 'system container cannot be root ("/")');
  check(
    k.cgroupsPerQOS || k.enforceNodeAllocatable.length === 0,
    "enforceNodeAllocatable",
    "enforce-node-allocatable",
    "must be empty unless cgroupsPerQOS (--cgroups-per-qos) is true",
  );
  const levels = ["none", "pods", "system-reserved", "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible"];
  k.enforceNodeAllocatable.forEach((l, i) => oneOf(l, levels, `enforceNodeAllocatable[${i}]`, "enforce-node-allocatable"));
  for (const level of ["system-reserved", "system-reserved-compressible"])
    check(
      !k.enforceNodeAllocatable.includes(level) || k.systemReservedCgroup !== "",
      "systemReservedCgroup",
      "system-reserved-cgroup",
      `must be specified when ${JSON.stringify(level)} is contained in enforceNodeAllocatable (--enforce-node-allocatable)`,
    );
  for (const level of ["kube-reserved", "kube-reserved-compressible"])
    check(
      !k.enforceNodeAllocatable.includes(level) || k.kubeReservedCgroup !== "",
      "kubeReservedCgroup",
      "kube-reserved-cgroup",
      `must be specified when ${JSON.stringify(level)} is contained in enforceNodeAllocatable (--enforce-node-allocatable)`,
    );
  check(
    !k.enforceNodeAllocatable.includes("none") || k.enforceNodeAllocatable.length === 1,
    "enforceNodeAllocatable",
    "enforce-node-allocatable",
    '"none" cannot be combined with other levels',
  );
  range(k.cpuCFSQuotaPeriod, 1, 1000, "cpuCFSQuotaPeriod", "cpu-cfs-quota-period");
  oneOf(k.cpuManagerPolicy, ["none", "static"], "cpuManagerPolicy", "cpu-manager-policy");
  oneOf(k.memoryManagerPolicy, ["None", "Static"], "memoryManagerPolicy", "memory-manager-policy");
  oneOf(k.topologyManagerPolicy, ["none", "best-effort", "restricted", "single-numa-node"], "topologyManagerPolicy", "topology-manager-policy");
  oneOf(k.topologyManagerScope, ["container", "pod"], "topologyManagerScope", "topology-manager-scope");
  oneOf(k.memorySwap.swapBehavior, ["", "NoSwap", "LimitedSwap"], "memorySwap.swapBehavior");
  check(k.memoryThrottlingFactor > 0 && k.memoryThrottlingFactor <= 1, "memoryThrottlingFactor", undefined, `must be in (0, 1], got ${k.memoryThrottlingFactor}`);

  // Graceful shutdown
  nonNegative(k.shutdownGracePeriod, "shutdownGracePeriod");
  nonNegative(k.shutdownGracePeriodCriticalPods, "shutdownGracePeriodCriticalPods");
  check(k.shutdownGracePeriodCriticalPods <= k.shutdownGracePeriod, "shutdownGracePeriodCriticalPods", undefined, "must not be greater than shutdownGracePeriod");
  check(
    k.shutdownGracePeriodByPodPriority.length === 0 || (k.shutdownGracePeriod === 0 && k.shutdownGracePeriodCriticalPods === 0),
    "shutdownGracePeriodByPodPriority",
    undefined,
    "cannot be combined with shutdownGracePeriod or shutdownGracePeriodCriticalPods",
  );

  oneOf(k.logging.format, ["text", "json"], "logging.format", "logging-format");
  return errs;
}
