/**
 * KubeletConfiguration (kubelet.config.k8s.io/v1beta1) as valibot schemas:
 * the single source of truth for the config file and the `KubeletConfiguration`
 * type the agent reads.
 *
 * Field names are the complete upstream v1beta1 set (k8s.io/kubelet
 * config/v1beta1/types.go, as of the 1.34 release plus the fields added on
 * the way to 1.35/1.36), so a real upstream config file is accepted. Unlike
 * upstream, which falls back to lenient decoding with a warning, unknown
 * fields are errors: a misspelled field should not be silently ignored.
 *
 * Conventions of the parsed output:
 * - every duration (metav1.Duration upstream) is a number of milliseconds;
 * - quantities and eviction thresholds stay strings, checked here and read
 *   with `parseQuantity` / `parseThreshold` where they are used;
 * - defaults are applied as upstream's SetDefaults_KubeletConfiguration does
 *   (see defaults.ts), so fields upstream defaults are never undefined.
 */
import * as v from "valibot";
import { applyDefaults } from "./defaults.ts";
import { bool, describe, duration, float, int32, int64, obj, opt, quantity, str, strList, strMap, threshold } from "./fields.ts";
import {
  CrashLoopBackOffConfig,
  KubeletAuthentication,
  KubeletAuthorization,
  LoggingConfiguration,
  MemoryReservation,
  MemorySwapConfiguration,
  OfflineAutonomyConfig,
  ShutdownGracePeriodByPodPriority,
  Taint,
  TracingConfiguration,
  UserNamespaces,
} from "./kubelet-config-parts.ts";

export const API_VERSION = "kubelet.config.k8s.io/v1beta1";
export const KIND = "KubeletConfiguration";

/** Eviction signals the kubelet knows (pkg/kubelet/eviction/api). */
export const EVICTION_SIGNALS = [
  "memory.available",
  "allocatableMemory.available",
  "nodefs.available",
  "nodefs.inodesFree",
  "imagefs.available",
  "imagefs.inodesFree",
  "containerfs.available",
  "containerfs.inodesFree",
  "pid.available",
] as const;
export type EvictionSignal = (typeof EVICTION_SIGNALS)[number];

const signal = () => v.picklist(EVICTION_SIGNALS, (i) => `unknown eviction signal ${describe(i.input)}, expected one of ${EVICTION_SIGNALS.join(", ")}`);
const thresholds = () => v.record(signal(), threshold(), (i) => `expected an object of eviction thresholds, got ${describe(i.input)}`);

const literal = (want: string) => v.literal(want, (i) => `expected ${JSON.stringify(want)}, got ${describe(i.input)}`);

/** The config file as written: every field optional, types and formats checked. */
export const KubeletConfigurationFileSchema = obj({
  apiVersion: literal(API_VERSION),
  kind: literal(KIND),

  // Pod sources
  staticPodPath: opt(str()),
  staticPodURL: opt(str()),
  staticPodURLHeader: opt(v.record(v.string(), strList())),
  syncFrequency: opt(duration()),
  fileCheckFrequency: opt(duration()),
  httpCheckFrequency: opt(duration()),
  podLogsDir: opt(str()),
  runOnce: opt(bool()),

  // Serving (10250, read-only port, healthz) and its TLS and auth
  enableServer: opt(bool()),
  address: opt(str()),
  port: opt(int32()),
  readOnlyPort: opt(int32()),
  healthzPort: opt(int32()),
  healthzBindAddress: opt(str()),
  tlsCertFile: opt(str()),
  tlsPrivateKeyFile: opt(str()),
  tlsCipherSuites: opt(strList()),
  tlsCurvePreferences: opt(v.array(int32())),
  tlsMinVersion: opt(str()),
  rotateCertificates: opt(bool()),
  serverTLSBootstrap: opt(bool()),
  authentication: opt(KubeletAuthentication),
  authorization: opt(KubeletAuthorization),
  enableDebuggingHandlers: opt(bool()),
  enableContentionProfiling: opt(bool()),
  enableSystemLogHandler: opt(bool()),
  enableSystemLogQuery: opt(bool()),
  enableProfilingHandler: opt(bool()),
  enableDebugFlagsHandler: opt(bool()),
  streamingConnectionIdleTimeout: opt(duration()),

  // Container runtime and images
  containerRuntimeEndpoint: opt(str()),
  imageServiceEndpoint: opt(str()),
  runtimeRequestTimeout: opt(duration()),
  serializeImagePulls: opt(bool()),
  maxParallelImagePulls: opt(int32()),
  registryPullQPS: opt(int32()),
  registryBurst: opt(int32()),
  imagePullCredentialsVerificationPolicy: opt(str()),
  preloadedImagesVerificationAllowlist: opt(strList()),
  imageMinimumGCAge: opt(duration()),
  imageMaximumGCAge: opt(duration()),
  imageGCHighThresholdPercent: opt(int32()),
  imageGCLowThresholdPercent: opt(int32()),
  containerLogMaxSize: opt(quantity()),
  containerLogMaxFiles: opt(int32()),
  containerLogMaxWorkers: opt(int32()),
  containerLogMonitorInterval: opt(duration()),
  crashLoopBackOff: opt(CrashLoopBackOffConfig),
  podHousekeepingPeriod: opt(duration()), // in upstream defaults.go after 1.35

  // Node registration, status and API client
  registerNode: opt(bool()),
  registerWithTaints: opt(v.array(Taint)),
  providerID: opt(str()),
  nodeStatusUpdateFrequency: opt(duration()),
  nodeStatusReportFrequency: opt(duration()),
  nodeLeaseDurationSeconds: opt(int32()),
  nodeStatusMaxImages: opt(int32()),
  kubeAPIQPS: opt(int32()),
  kubeAPIBurst: opt(int32()),
  contentType: opt(str()),
  eventRecordQPS: opt(int32()),
  eventBurst: opt(int32()),
  configMapAndSecretChangeDetectionStrategy: opt(str()),
  volumeStatsAggPeriod: opt(duration()),
  volumePluginDir: opt(str()),
  enableControllerAttachDetach: opt(bool()),

  // Networking and DNS
  clusterDomain: opt(str()),
  clusterDNS: opt(strList()),
  resolvConf: opt(str()),
  hairpinMode: opt(str()),
  podCIDR: opt(str()),
  makeIPTablesUtilChains: opt(bool()),
  iptablesMasqueradeBit: opt(int32()),
  iptablesDropBit: opt(int32()),

  // Resources, cgroups and resource managers
  maxPods: opt(int32()),
  podsPerCore: opt(int32()),
  podPidsLimit: opt(int64()),
  maxOpenFiles: opt(int64()),
  cgroupRoot: opt(str()),
  cgroupsPerQOS: opt(bool()),
  cgroupDriver: opt(str()),
  kubeletCgroups: opt(str()),
  systemCgroups: opt(str()),
  systemReserved: opt(v.record(v.string(), quantity())),
  kubeReserved: opt(v.record(v.string(), quantity())),
  systemReservedCgroup: opt(str()),
  kubeReservedCgroup: opt(str()),
  reservedSystemCPUs: opt(str()),
  enforceNodeAllocatable: opt(strList()),
  qosReserved: opt(strMap()),
  cpuCFSQuota: opt(bool()),
  cpuCFSQuotaPeriod: opt(duration()),
  cpuManagerPolicy: opt(str()),
  cpuManagerPolicyOptions: opt(strMap()),
  cpuManagerReconcilePeriod: opt(duration()),
  draManagerReconcilePeriod: opt(duration()),
  memoryManagerPolicy: opt(str()),
  reservedMemory: opt(v.array(MemoryReservation)),
  topologyManagerPolicy: opt(str()),
  topologyManagerScope: opt(str()),
  topologyManagerPolicyOptions: opt(strMap()),
  singleProcessOOMKill: opt(bool()),
  memoryThrottlingFactor: opt(float()),
  memoryReservationPolicy: opt(str()),
  memorySwap: opt(MemorySwapConfiguration),
  failSwapOn: opt(bool()),
  failCgroupV1: opt(bool()),
  localStorageCapacityIsolation: opt(bool()),
  userNamespaces: opt(UserNamespaces),
  oomScoreAdj: opt(int32()),
  protectKernelDefaults: opt(bool()),
  kernelMemcgNotification: opt(bool()),
  allowedUnsafeSysctls: opt(strList()),
  seccompDefault: opt(bool()),

  // Eviction
  evictionHard: opt(thresholds()),
  evictionSoft: opt(thresholds()),
  evictionSoftGracePeriod: opt(v.record(signal(), duration())),
  evictionMinimumReclaim: opt(thresholds()),
  evictionPressureTransitionPeriod: opt(duration()),
  evictionMaxPodGracePeriod: opt(int32()),
  mergeDefaultEvictionSettings: opt(bool()),

  // Graceful node shutdown
  shutdownGracePeriod: opt(duration()),
  shutdownGracePeriodCriticalPods: opt(duration()),
  shutdownGracePeriodByPodPriority: opt(v.array(ShutdownGracePeriodByPodPriority)),

  // Observability and feature gates
  logging: opt(LoggingConfiguration),
  tracing: opt(TracingConfiguration),
  showHiddenMetricsForVersion: opt(str()),
  featureGates: opt(v.record(v.string(), bool())),

  // bunlet extension (not in upstream's KubeletConfiguration): keep running pods while the API server is unreachable
  offlineAutonomy: opt(OfflineAutonomyConfig),
  // bunlet extension: image tarballs imported into the runtime at start (air-gapped nodes)
  imagePreloadDir: opt(str()),
});

/** The config file as written (durations already in milliseconds), before defaults. */
export type KubeletConfigurationFile = v.InferOutput<typeof KubeletConfigurationFileSchema>;

/** The config file with upstream defaults applied. */
export const KubeletConfigurationSchema = v.pipe(KubeletConfigurationFileSchema, v.transform(applyDefaults));

/**
 * The kubelet configuration the agent runs with: the file (or nothing) with
 * upstream defaults applied and command-line flags merged. Durations are
 * milliseconds (`Milliseconds`); quantities and thresholds are strings.
 */
export type KubeletConfiguration = v.InferOutput<typeof KubeletConfigurationSchema>;
