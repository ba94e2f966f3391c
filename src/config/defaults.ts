/**
 * Upstream defaults, mirroring pkg/kubelet/apis/config/v1beta1/defaults.go
 * (SetDefaults_KubeletConfiguration) line for line. Go's decoder cannot tell
 * an absent non-pointer field from its zero value, so upstream defaults
 * `port: 0`, `syncFrequency: 0s` or `address: ""` as if they were absent:
 * those fields use `||` here. Pointer fields (`*bool`, `*int32`) keep an
 * explicit zero: those use `??`.
 *
 * Fields upstream leaves unset get their Go zero value ("", false, 0, empty
 * list or map) so that readers never meet `undefined`, except where unset
 * means something of its own (maxParallelImagePulls, singleProcessOOMKill,
 * tracing).
 */
import type { EvictionSignal, KubeletConfiguration, KubeletConfigurationFile } from "./kubelet-config.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;

/**
 * Linux defaults for evictionHard (pkg/kubelet/eviction/defaults_linux.go),
 * applied when the config file sets no evictionHard at all (cmd/kubelet/app
 * loadConfigFile) and merged under a given map when
 * mergeDefaultEvictionSettings is true.
 */
export function defaultEvictionHard(): Partial<Record<EvictionSignal, string>> {
  return {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
    "imagefs.inodesFree": "5%",
  };
}

export function applyDefaults(c: KubeletConfigurationFile) {
  const gates = c.featureGates ?? {};
  const authn = c.authentication;
  const authz = c.authorization;
  const logging = c.logging;
  return {
    ...c,
    enableServer: c.enableServer ?? true,
    staticPodPath: c.staticPodPath ?? "",
    staticPodURL: c.staticPodURL ?? "",
    staticPodURLHeader: c.staticPodURLHeader ?? {},
    syncFrequency: c.syncFrequency || 1 * MINUTE,
    fileCheckFrequency: c.fileCheckFrequency || 20 * SECOND,
    httpCheckFrequency: c.httpCheckFrequency || 20 * SECOND,
    podLogsDir: c.podLogsDir || "/var/log/pods",
    runOnce: c.runOnce ?? false,

    address: c.address || "0.0.0.0",
    port: c.port || 10250,
    readOnlyPort: c.readOnlyPort ?? 0,
    healthzPort: c.healthzPort ?? 10248,
    healthzBindAddress: c.healthzBindAddress || "127.0.0.1",
    tlsCertFile: c.tlsCertFile ?? "",
    tlsPrivateKeyFile: c.tlsPrivateKeyFile ?? "",
    tlsCipherSuites: c.tlsCipherSuites ?? [],
    tlsCurvePreferences: c.tlsCurvePreferences ?? [],
    tlsMinVersion: c.tlsMinVersion ?? "",
    rotateCertificates: c.rotateCertificates ?? false,
    serverTLSBootstrap: c.serverTLSBootstrap ?? false,
    authentication: {
      x509: { clientCAFile: authn?.x509?.clientCAFile ?? "" },
      webhook: { enabled: authn?.webhook?.enabled ?? true, cacheTTL: authn?.webhook?.cacheTTL || 2 * MINUTE },
      anonymous: { enabled: authn?.anonymous?.enabled ?? false },
    },
    authorization: {
      mode: authz?.mode || "Webhook",
      webhook: {
        cacheAuthorizedTTL: authz?.webhook?.cacheAuthorizedTTL || 5 * MINUTE,
        cacheUnauthorizedTTL: authz?.webhook?.cacheUnauthorizedTTL || 30 * SECOND,
      },
    },
    enableDebuggingHandlers: c.enableDebuggingHandlers ?? true,
    enableContentionProfiling: c.enableContentionProfiling ?? false,
    enableSystemLogHandler: c.enableSystemLogHandler ?? true,
    enableSystemLogQuery: c.enableSystemLogQuery ?? false,
    // Upstream: true. A JS heap snapshot holds the agent's secrets, unlike Go's pprof: off unless asked for (server/debug.ts).
    enableProfilingHandler: c.enableProfilingHandler ?? false,
    enableDebugFlagsHandler: c.enableDebugFlagsHandler ?? true,
    streamingConnectionIdleTimeout: c.streamingConnectionIdleTimeout || 4 * 60 * MINUTE,

    containerRuntimeEndpoint: c.containerRuntimeEndpoint || "unix:///run/containerd/containerd.sock",
    /** Empty means: the same as containerRuntimeEndpoint. */
    imageServiceEndpoint: c.imageServiceEndpoint ?? "",
    runtimeRequestTimeout: c.runtimeRequestTimeout || 2 * MINUTE,
    // Upstream: true unless maxParallelImagePulls allows two or more pulls.
    serializeImagePulls: c.serializeImagePulls ?? (c.maxParallelImagePulls === undefined || c.maxParallelImagePulls < 2),
    registryPullQPS: c.registryPullQPS ?? 5,
    registryBurst: c.registryBurst || 10,
    imagePullCredentialsVerificationPolicy: c.imagePullCredentialsVerificationPolicy || (gates["KubeletEnsureSecretPulledImages"] ? "NeverVerifyPreloadedImages" : ""),
    preloadedImagesVerificationAllowlist: c.preloadedImagesVerificationAllowlist ?? [],
    imageMinimumGCAge: c.imageMinimumGCAge || 2 * MINUTE,
    imageMaximumGCAge: c.imageMaximumGCAge ?? 0,
    imageGCHighThresholdPercent: c.imageGCHighThresholdPercent ?? 85,
    imageGCLowThresholdPercent: c.imageGCLowThresholdPercent ?? 80,
    containerLogMaxSize: c.containerLogMaxSize || "10Mi",
    containerLogMaxFiles: c.containerLogMaxFiles ?? 5,
    containerLogMaxWorkers: c.containerLogMaxWorkers ?? 1,
    containerLogMonitorInterval: c.containerLogMonitorInterval ?? 10 * SECOND,
    crashLoopBackOff: {
      maxContainerRestartPeriod: c.crashLoopBackOff?.maxContainerRestartPeriod ?? (gates["KubeletCrashLoopBackOffMax"] ? 300 * SECOND : undefined),
    },
    podHousekeepingPeriod: c.podHousekeepingPeriod ?? 2 * SECOND,
    // bunlet extension: a week of checkpoint age covers a long weekend offline
    offlineAutonomy: {
      enabled: c.offlineAutonomy?.enabled ?? true,
      maxAge: c.offlineAutonomy?.maxAge ?? 168 * 60 * MINUTE,
    },
    imagePreloadDir: c.imagePreloadDir ?? "",

    registerNode: c.registerNode ?? true,
    registerWithTaints: c.registerWithTaints ?? [],
    providerID: c.providerID ?? "",
    // Upstream: if only nodeStatusUpdateFrequency is set, the report frequency follows it.
    nodeStatusReportFrequency: c.nodeStatusReportFrequency || c.nodeStatusUpdateFrequency || 5 * MINUTE,
    nodeStatusUpdateFrequency: c.nodeStatusUpdateFrequency || 10 * SECOND,
    nodeLeaseDurationSeconds: c.nodeLeaseDurationSeconds || 40,
    nodeStatusMaxImages: c.nodeStatusMaxImages ?? 50,
    kubeAPIQPS: c.kubeAPIQPS ?? 50,
    kubeAPIBurst: c.kubeAPIBurst || 100,
    contentType: c.contentType || "application/vnd.kubernetes.protobuf",
    eventRecordQPS: c.eventRecordQPS ?? 50,
    eventBurst: c.eventBurst || 100,
    configMapAndSecretChangeDetectionStrategy: c.configMapAndSecretChangeDetectionStrategy || "Watch",
    volumeStatsAggPeriod: c.volumeStatsAggPeriod || 1 * MINUTE,
    volumePluginDir: c.volumePluginDir || "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
    enableControllerAttachDetach: c.enableControllerAttachDetach ?? true,

    clusterDomain: c.clusterDomain ?? "",
    clusterDNS: c.clusterDNS ?? [],
    /** Empty disables DNS configuration from a resolv.conf. */
    resolvConf: c.resolvConf ?? "/etc/resolv.conf",
    hairpinMode: c.hairpinMode || "promiscuous-bridge",
    podCIDR: c.podCIDR ?? "",
    makeIPTablesUtilChains: c.makeIPTablesUtilChains ?? true,
    iptablesMasqueradeBit: c.iptablesMasqueradeBit ?? 14,
    iptablesDropBit: c.iptablesDropBit ?? 15,

    maxPods: c.maxPods || 110,
    podsPerCore: c.podsPerCore ?? 0,
    // Upstream: unset or negative means -1, the node allocatable PID limit.
    podPidsLimit: c.podPidsLimit === undefined || c.podPidsLimit < 0 ? -1 : c.podPidsLimit,
    maxOpenFiles: c.maxOpenFiles || 1_000_000,
    /** Empty means the container runtime's default (upstream documents it as "/"). */
    cgroupRoot: c.cgroupRoot ?? "",
    cgroupsPerQOS: c.cgroupsPerQOS ?? true,
    cgroupDriver: c.cgroupDriver || "cgroupfs",
    kubeletCgroups: c.kubeletCgroups ?? "",
    systemCgroups: c.systemCgroups ?? "",
    systemReserved: c.systemReserved ?? {},
    kubeReserved: c.kubeReserved ?? {},
    systemReservedCgroup: c.systemReservedCgroup ?? "",
    kubeReservedCgroup: c.kubeReservedCgroup ?? "",
    reservedSystemCPUs: c.reservedSystemCPUs ?? "",
    enforceNodeAllocatable: c.enforceNodeAllocatable ?? ["pods"],
    qosReserved: c.qosReserved ?? {},
    cpuCFSQuota: c.cpuCFSQuota ?? true,
    cpuCFSQuotaPeriod: c.cpuCFSQuotaPeriod ?? 100,
    cpuManagerPolicy: c.cpuManagerPolicy || "none",
    cpuManagerPolicyOptions: c.cpuManagerPolicyOptions ?? {},
    cpuManagerReconcilePeriod: c.cpuManagerReconcilePeriod || 10 * SECOND,
    draManagerReconcilePeriod: c.draManagerReconcilePeriod || 60 * SECOND,
    memoryManagerPolicy: c.memoryManagerPolicy || "None",
    reservedMemory: c.reservedMemory ?? [],
    topologyManagerPolicy: c.topologyManagerPolicy || "none",
    topologyManagerScope: c.topologyManagerScope || "container",
    topologyManagerPolicyOptions: c.topologyManagerPolicyOptions ?? {},
    memoryThrottlingFactor: c.memoryThrottlingFactor ?? 0.9,
    memoryReservationPolicy: c.memoryReservationPolicy || "None",
    memorySwap: { swapBehavior: c.memorySwap?.swapBehavior ?? "" },
    failSwapOn: c.failSwapOn ?? true,
    failCgroupV1: c.failCgroupV1 ?? false,
    localStorageCapacityIsolation: c.localStorageCapacityIsolation ?? true,
    userNamespaces: { idsPerPod: c.userNamespaces?.idsPerPod ?? 65536 },
    oomScoreAdj: c.oomScoreAdj ?? -999,
    protectKernelDefaults: c.protectKernelDefaults ?? false,
    kernelMemcgNotification: c.kernelMemcgNotification ?? false,
    allowedUnsafeSysctls: c.allowedUnsafeSysctls ?? [],
    seccompDefault: c.seccompDefault ?? false,

    evictionHard: c.evictionHard ?? defaultEvictionHard(),
    evictionSoft: c.evictionSoft ?? {},
    evictionSoftGracePeriod: c.evictionSoftGracePeriod ?? {},
    evictionMinimumReclaim: c.evictionMinimumReclaim ?? {},
    evictionPressureTransitionPeriod: c.evictionPressureTransitionPeriod || 5 * MINUTE,
    evictionMaxPodGracePeriod: c.evictionMaxPodGracePeriod ?? 0,
    mergeDefaultEvictionSettings: c.mergeDefaultEvictionSettings ?? false,

    shutdownGracePeriod: c.shutdownGracePeriod ?? 0,
    shutdownGracePeriodCriticalPods: c.shutdownGracePeriodCriticalPods ?? 0,
    shutdownGracePeriodByPodPriority: c.shutdownGracePeriodByPodPriority ?? [],

    logging: {
      format: logging?.format || "text",
      flushFrequency: logging?.flushFrequency || 5 * SECOND,
      verbosity: logging?.verbosity ?? 0,
      vmodule: logging?.vmodule ?? [],
      options: logging?.options ?? {},
    },
    showHiddenMetricsForVersion: c.showHiddenMetricsForVersion ?? "",
    featureGates: { ...gates },
  };
}

/**
 * The defaults the kubelet starts from when no --config is given
 * (cmd/kubelet/app/options applyLegacyDefaults): they preserve the old flag
 * defaults, which are less strict than the config file's. One deliberate
 * difference from upstream: the unauthenticated read-only port stays off
 * (upstream opens 10255) — secure by default, as the CIS benchmark asks;
 * `--read-only-port=10255` opens it.
 */
export function applyLegacyDefaults(k: KubeletConfiguration): void {
  k.authentication.anonymous.enabled = true;
  k.authentication.webhook.enabled = false;
  k.authorization.mode = "AlwaysAllow";
}

/** After flags are merged: mergeDefaultEvictionSettings fills in the signals the config left out. */
export function mergeEvictionDefaults(k: KubeletConfiguration): void {
  if (k.mergeDefaultEvictionSettings) k.evictionHard = { ...defaultEvictionHard(), ...k.evictionHard };
}
