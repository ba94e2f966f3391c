/**
 * What the agent does with every setting: one typed table over every field
 * of the config file and every flag-only flag. Each is either acted on (and
 * where), or refused: a value the agent does not act on stops it at start
 * (exit 2) with a message naming the field and why. Nothing is accepted and
 * silently ignored. The table drives the refusals at start, the notes in
 * --help and the generated table in docs/configuration.md.
 *
 * A refused field is refused only when set to something other than its config
 * file default: an upstream file that leaves it alone (or writes the default)
 * loads. `defaultGap` marks the few whose upstream default itself does
 * something this agent does not do yet; they are listed, not hidden.
 */
import { KNOWN_GATES } from "./feature-gates-1.34.ts";
import { FLAGS } from "./flag-table.ts";
import type { KubeletConfiguration, KubeletConfigurationFile } from "./kubelet-config.ts";
import { parseQuantity } from "./quantity.ts";
import { parseCpuSet } from "../util/cpuset.ts";
import { parsePolicyOptions } from "../topologymanager/policy.ts";
import { alignBySocketConfigError, cpuPolicyOptionGates, parseStaticPolicyOptions } from "./cpu-policy-options.ts";
import { reservedMemoryConfigErrors } from "./reserved-memory.ts";

const reservedCpuOf = (k: KubeletConfiguration) =>
  (k.kubeReserved["cpu"] ? parseQuantity(k.kubeReserved["cpu"]) : 0) + (k.systemReserved["cpu"] ? parseQuantity(k.systemReserved["cpu"]) : 0);

export type FieldName = Exclude<keyof KubeletConfigurationFile, "apiVersion" | "kind">;

export type Setting =
  /**
   * Acted on wherever `where` says. `refuse` returns why a value is not acted
   * on (that value then exits 2). `builtIn`: the one value acted on is how the
   * agent is built (no code reads the field); `refuse` refuses every other.
   */
  | { kind: "acted"; where: string; refuse?: (k: KubeletConfiguration) => string | undefined; builtIn?: true }
  /** Not acted on: any value but the config file default exits 2 with `why`. */
  | { kind: "refused"; why: string; defaultGap?: string };

const acted = (where: string, refuse?: (k: KubeletConfiguration) => string | undefined): Setting => (refuse ? { kind: "acted", where, refuse } : { kind: "acted", where });
const builtIn = (where: string, refuse: (k: KubeletConfiguration) => string | undefined): Setting => ({ kind: "acted", where, refuse, builtIn: true });
const refused = (why: string, defaultGap?: string): Setting => (defaultGap ? { kind: "refused", why, defaultGap } : { kind: "refused", why });

const NOT_IMPLEMENTED = "not implemented by this agent";
const only = (value: string, what: string, got: string) => (got === value ? undefined : `${JSON.stringify(got)} ${what}`);

/** Every field of the config file: upstream 1.34's 123, the few added after it, and bunlet's extensions. */
export const SETTINGS: { readonly [F in FieldName]: Setting } = {
  // Pod sources
  staticPodPath: acted("the static pod file source (src/sources/file.ts)"),
  staticPodURL: acted("the static pod URL source (src/sources/url.ts)"),
  staticPodURLHeader: acted("headers of the static pod URL source"),
  syncFrequency: acted("pod worker resync period (src/sync)"),
  fileCheckFrequency: acted("static pod file polling period"),
  httpCheckFrequency: acted("static pod URL polling period"),
  podLogsDir: acted("where container logs are written (src/runtime, src/logs)"),
  runOnce: acted("run the static pods once and exit (src/runonce)"),

  // Serving
  enableServer: acted("whether the kubelet API on `port` is served (src/server)"),
  address: acted("the kubelet API's and read-only port's listen address"),
  port: acted("the kubelet API's port"),
  readOnlyPort: acted("the read-only endpoint (0 disables it)"),
  healthzPort: acted("the healthz endpoint (0 disables it)"),
  healthzBindAddress: acted("the healthz endpoint's listen address"),
  tlsCertFile: acted("the kubelet API's serving certificate"),
  tlsPrivateKeyFile: acted("the kubelet API's serving key"),
  tlsCipherSuites: acted("the kubelet API's TLS 1.2 cipher suites"),
  tlsCurvePreferences: refused(`TLS curve preferences are ${NOT_IMPLEMENTED} (a field newer than 1.34)`),
  tlsMinVersion: acted("the kubelet API's lowest TLS version"),
  rotateCertificates: acted("client certificate rotation (src/certificates)"),
  serverTLSBootstrap: acted("serving certificate through a CSR (src/certificates)"),
  authentication: acted("who a kubelet API request is (src/server/authn.ts)"),
  authorization: acted("what a kubelet API request may do (src/server/authz.ts)"),
  enableDebuggingHandlers: acted("logs, exec, attach, port-forward and /debug on the kubelet API"),
  enableContentionProfiling: refused("block profiling is a Go runtime feature: this agent has no Go runtime"),
  enableSystemLogHandler: acted("/logs/ on the kubelet API"),
  enableSystemLogQuery: acted("node log queries on /logs/ (server/node-log-query.ts); needs the NodeLogQuery gate and enableSystemLogHandler"),
  enableProfilingHandler: acted("/debug/heap and /debug/profile on the kubelet API (default false here)"),
  enableDebugFlagsHandler: acted("PUT /debug/flags/v with a verbosity number sets the agent's log verbosity, with enableDebuggingHandlers; off: 405 (src/server/debug.ts)"),
  streamingConnectionIdleTimeout: acted("idle exec, attach and port-forward streams are closed"),

  // Runtime and images
  containerRuntimeEndpoint: acted("the CRI runtime client (src/cri)"),
  imageServiceEndpoint: acted("the CRI image client (src/cri)"),
  runtimeRequestTimeout: acted("the CRI client's request timeout"),
  serializeImagePulls: acted("one image pull at a time (src/runtime/pull-queue.ts)"),
  maxParallelImagePulls: acted("bound on parallel image pulls (src/runtime/pull-queue.ts)"),
  registryPullQPS: acted(
    'image pulls per second: a token bucket before each image pull (one token for all the credentials it tries), "pull QPS exceeded" without a token (src/runtime/pull-queue.ts)',
  ),
  registryBurst: acted("the pull rate limit's bucket size (src/runtime/pull-queue.ts)"),
  imagePullCredentialsVerificationPolicy: refused(`verifying pull credentials of pulled images (KubeletEnsureSecretPulledImages) is ${NOT_IMPLEMENTED}`),
  preloadedImagesVerificationAllowlist: refused(`verifying pull credentials of pulled images (KubeletEnsureSecretPulledImages) is ${NOT_IMPLEMENTED}`),
  imageMinimumGCAge: acted("image garbage collection (src/images/gc.ts)"),
  imageMaximumGCAge: acted("image garbage collection (src/images/gc.ts)"),
  imageGCHighThresholdPercent: acted("image garbage collection (src/images/gc.ts)"),
  imageGCLowThresholdPercent: acted("image garbage collection (src/images/gc.ts)"),
  containerLogMaxSize: acted("container log rotation (src/logs/rotation.ts)"),
  containerLogMaxFiles: acted("container log rotation (src/logs/rotation.ts)"),
  containerLogMaxWorkers: builtIn("container log rotation runs one container at a time", (k) =>
    k.containerLogMaxWorkers === 1 ? undefined : `${k.containerLogMaxWorkers}: parallel log rotation is ${NOT_IMPLEMENTED}; only 1 is`,
  ),
  containerLogMonitorInterval: acted("container log rotation period (src/logs/rotation.ts)"),
  crashLoopBackOff: acted("maxContainerRestartPeriod: the container restart back-off's maximum, with the KubeletCrashLoopBackOffMax gate (src/runtime/backoff.ts)", (k) => {
    const max = k.crashLoopBackOff.maxContainerRestartPeriod;
    if (k.featureGates["KubeletCrashLoopBackOffMax"] !== true)
      return max === undefined
        ? undefined
        : "invalid configuration: FeatureGate KubeletCrashLoopBackOffMax not enabled, CrashLoopBackOff.MaxContainerRestartPeriod must not be set";
    if (max === undefined || max < 1000 || max > 300_000)
      return `invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: ${(max ?? 0) / 1000} seconds) must be set between 1s and 300s`;
    return undefined;
  }),
  podHousekeepingPeriod: refused(`a configurable housekeeping period is ${NOT_IMPLEMENTED} (a field newer than 1.34)`),

  // Node registration, status, API client
  registerNode: acted("create and keep the Node object (src/node)"),
  registerWithTaints: acted("the registered Node's taints"),
  providerID: acted("the registered Node's provider ID"),
  nodeStatusUpdateFrequency: acted("node status computation period (src/node/controller.ts)"),
  nodeStatusReportFrequency: acted("node status report period (src/node/controller.ts)"),
  nodeLeaseDurationSeconds: acted("the node Lease (src/node/controller.ts)"),
  nodeStatusMaxImages: acted("how many images the Node status lists"),
  kubeAPIQPS: acted("main API client rate limit (src/agent/cluster.ts, src/api/ratelimit.ts)"),
  kubeAPIBurst: acted("main API client rate limit (src/agent/cluster.ts, src/api/ratelimit.ts)"),
  contentType: acted("Lease and Event requests as protobuf (the default) or JSON; other values refused (src/api)"),
  eventRecordQPS: acted("event client rate limit (src/agent/cluster.ts)"),
  eventBurst: acted("event client rate limit (src/agent/cluster.ts)"),
  configMapAndSecretChangeDetectionStrategy: builtIn("configMaps and secrets are watched (src/api/object-cache.ts)", (k) =>
    only("Watch", `is ${NOT_IMPLEMENTED}: configMaps and secrets are always watched; only "Watch" is accepted`, k.configMapAndSecretChangeDetectionStrategy),
  ),
  volumeStatsAggPeriod: acted("how long measured volume usage is reused (src/stats)"),
  volumePluginDir: refused("FlexVolume plugins are not supported by this agent"),
  enableControllerAttachDetach: builtIn(
    "the Node's controller-managed-attach-detach annotation: the attach/detach controller attaches volumes (a CSI volume whose driver requires attach waits for its VolumeAttachment)",
    (k) => (k.enableControllerAttachDetach ? undefined : `false: attaching volumes from the kubelet is ${NOT_IMPLEMENTED}`),
  ),

  // Networking and DNS
  clusterDomain: acted("pod DNS search domains (src/runtime/dns.ts)"),
  clusterDNS: acted("pod DNS servers (src/runtime/dns.ts)"),
  resolvConf: acted("pod DNS base (src/runtime/dns.ts)"),
  hairpinMode: acted(
    "validated (promiscuous-bridge, hairpin-veth or none) and otherwise without effect, as upstream 1.34, where nothing reads it with a CRI runtime: the runtime's CNI configuration (the bridge plugin's hairpinMode) governs hairpin traffic; the agent logs this at start (src/agent/node.ts)",
  ),
  podCIDR: acted(
    "handed to the runtime at start over CRI UpdateRuntimeConfig (its network plugin may use it); in cluster mode the Node's spec.podCIDRs replace it, read from the Node the API returns at registration and on each status update (src/node/pod-cidr.ts)",
  ),
  makeIPTablesUtilChains: acted(
    "KUBE-IPTABLES-HINT (mangle, both families) and KUBE-FIREWALL with the martian packet rule (filter, IPv4), rewritten when the KUBE-KUBELET-CANARY chains vanish; without a working iptables the agent logs it and starts, as upstream (src/node/iptables-chains.ts)",
  ),
  // Upstream 1.34 validates both and reads them nowhere else ("Deprecated: no longer has any effect"): the
  // KUBE-MARK-MASQ and KUBE-MARK-DROP chains they numbered went to kube-proxy with IPTablesOwnershipCleanup.
  iptablesMasqueradeBit: acted(
    "validated to 0..31 (src/config/validate.ts) and otherwise without effect, as upstream 1.34, where it is deprecated: the KUBE-MARK-MASQ chain it marked is kube-proxy's",
  ),
  iptablesDropBit: acted(
    "validated to 0..31 (src/config/validate.ts) and otherwise without effect, as upstream 1.34, where it is deprecated: the KUBE-MARK-DROP chain it marked is kube-proxy's",
  ),

  // Resources and cgroups
  maxPods: acted("Node capacity pods and admission (OutOfpods)"),
  podsPerCore: acted("Node capacity pods: min(maxPods, cores × podsPerCore), and admission (src/node/status.ts)"),
  podPidsLimit: acted("pids.max of each pod cgroup (src/cgroups)"),
  maxOpenFiles: acted(
    "the agent's own RLIMIT_NOFILE (soft and hard) at start, set before it re-executes itself without the JIT; a failure (raising the hard limit needs CAP_SYS_RESOURCE) is a warning, as upstream (src/util/rlimit.ts)",
  ),
  cgroupRoot: acted("the root of the pod cgroups (src/cgroups)"),
  cgroupsPerQOS: acted("the QoS and pod cgroup hierarchy (src/cgroups)"),
  cgroupDriver: acted("cgroupfs paths or systemd slices for the pod cgroups; a runtime that reports its driver decides (src/cgroups, src/runtime/cgroup-driver.ts)"),
  kubeletCgroups: acted(
    "the agent's own process is moved into this cgroup (created when missing, in every v1 hierarchy or on v2) at start and again every minute, with its oomScoreAdj, as upstream; a cgroupfs path whatever the cgroupDriver, as upstream; an agent outside the host's PID namespace is left where it is (src/cgroups/system-cgroups.ts)",
  ),
  systemCgroups: acted(
    'the root cgroup\'s processes but pid 1 and kernel threads are moved into this cgroup (created when missing) at start and every minute, as upstream; needs cgroupRoot, "/" is refused; a cgroupfs path whatever the cgroupDriver (src/cgroups/system-cgroups.ts)',
  ),
  systemReserved: acted("Node allocatable and admission (src/node/status.ts)"),
  kubeReserved: acted("Node allocatable and admission (src/node/status.ts)"),
  systemReservedCgroup: acted(
    'the existing cgroup (a slice with the systemd driver) that gets systemReserved as limits when enforceNodeAllocatable has "system-reserved" (cpu, memory, pid) or "system-reserved-compressible" (cpu); start fails when it does not exist (src/cgroups)',
  ),
  kubeReservedCgroup: acted(
    'the existing cgroup (a slice with the systemd driver) that gets kubeReserved as limits when enforceNodeAllocatable has "kube-reserved" (cpu, memory, pid) or "kube-reserved-compressible" (cpu); start fails when it does not exist (src/cgroups)',
  ),
  reservedSystemCPUs: acted(
    "the CPUs the static CPU manager never gives out exclusively; their count replaces the reserved cpu in Node allocatable (src/cpumanager, src/node/status.ts)",
    (k) => {
      try {
        parseCpuSet(k.reservedSystemCPUs);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    },
  ),
  enforceNodeAllocatable: acted(
    '"pods": allocatable limits on the kubepods cgroup; "system-reserved", "kube-reserved" (and their "-compressible" cpu-only forms): systemReserved / kubeReserved as limits on systemReservedCgroup / kubeReservedCgroup (src/cgroups)',
  ),
  qosReserved: acted(
    "memory=N%: the burstable and besteffort cgroups' memory limits keep N% of higher classes' requests free, with the QOSReserved gate, as upstream (src/cgroups/resources.ts)",
    (k) => {
      for (const [name, value] of Object.entries(k.qosReserved)) {
        if (name !== "memory") return `cannot reserve ${JSON.stringify(name)} resource (only memory can be reserved, as upstream)`;
        const m = /^(\d+)%$/.exec(value);
        if (!m || Number(m[1]) > 100) return `failed to parse percentage ${JSON.stringify(value)} for "memory" resource: a percentage between 0% and 100%`;
        if (k.featureGates["QOSReserved"] !== true) return "needs the QOSReserved feature gate (alpha, off by default): upstream ignores qosReserved without it";
        if (!k.cgroupsPerQOS) return "needs cgroupsPerQOS: the reservation is applied to the QoS cgroups";
      }
      return undefined;
    },
  ),
  cpuCFSQuota: acted("CFS quota of pod and container cgroups"),
  cpuCFSQuotaPeriod: acted("CFS period of pod and container cgroups"),
  cpuManagerPolicy: acted(
    '"none" (every container shares all CPUs) or "static": exclusive CPUs for Guaranteed containers with whole CPU requests, cpusets through the CRI, <root-dir>/cpu_manager_state (src/cpumanager)',
    (k) => {
      if (k.cpuManagerPolicy === "static" && k.reservedSystemCPUs === "" && reservedCpuOf(k) <= 0)
        return '"static": the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero (or reservedSystemCPUs)';
      return undefined;
    },
  ),
  cpuManagerPolicyOptions: acted(
    'with the static policy, as upstream 1.34: "full-pcpus-only" (exclusive CPUs in whole physical cores, SMTAlignmentError otherwise) and "distribute-cpus-across-numa" (beta, CPUManagerPolicyBetaOptions: a request that needs several NUMA nodes is spread evenly over them, in whole cores with full-pcpus-only) and "align-by-socket" (alpha, CPUManagerPolicyAlphaOptions: CPUs aligned at socket rather than NUMA boundary in hints and allocation; not with the single-numa-node topology manager policy, nor on hosts with more sockets than NUMA nodes); values are booleans; upstream\'s other options stop the agent naming them (src/cpumanager)',
    (k) => {
      if (Object.keys(k.cpuManagerPolicyOptions).length && k.cpuManagerPolicy !== "static")
        return `${Object.keys(k.cpuManagerPolicyOptions)[0]}: policy options need the "static" policy (upstream: None policy: received unsupported options)`;
      try {
        return alignBySocketConfigError(parseStaticPolicyOptions(k.cpuManagerPolicyOptions, cpuPolicyOptionGates(k.featureGates)), k.topologyManagerPolicy);
      } catch (err) {
        return (err as Error).message;
      }
    },
  ),
  cpuManagerReconcilePeriod: acted("how often the static CPU manager releases CPUs of finished pods and writes containers' cpusets (src/cpumanager)"),
  draManagerReconcilePeriod: refused(`dynamic resource allocation is ${NOT_IMPLEMENTED} (a field newer than 1.34)`),
  memoryManagerPolicy: acted(
    '"None" (no NUMA memory pinning) or "Static": a Guaranteed pod\'s memory and huge pages are pinned to NUMA nodes read from /sys/devices/system/node, hints go to the topology manager, containers get cpuset.mems through the CRI, <root-dir>/memory_manager_state keeps the assignments; memory that is not free fails admission with upstream\'s reason (src/memorymanager)',
    (k) =>
      k.memoryManagerPolicy === "Static" && !k.reservedMemory.some((r) => Object.keys(r.limits).includes("memory"))
        ? '"Static": [memorymanager] you should specify the system reserved memory (reservedMemory, --reserved-memory)'
        : undefined,
  ),
  reservedMemory: acted(
    "per-NUMA reserved memory of the Static memory manager: taken off each node's allocatable memory; per type it must add up to kubeReserved + systemReserved + evictionHard memory.available and name existing NUMA nodes, or the agent stops at start (exit 2); the None policy does not read it, as upstream (src/memorymanager)",
    (k) => {
      const errors = reservedMemoryConfigErrors(k.reservedMemory);
      return errors.length ? errors.join("; ") : undefined;
    },
  ),
  topologyManagerPolicy: acted(
    '"none", best-effort, restricted or single-numa-node: hints of the device manager (devices whose plugin reports NUMA nodes), the CPU manager (static) and the memory manager (Static) merged per container or pod (topologyManagerScope), devices, exclusive CPUs and pinned memory taken on the merged NUMA nodes, TopologyAffinityError (and an event) when the policy refuses, on hosts with any number of NUMA nodes up to max-allowable-numa-nodes (src/topologymanager)',
  ),
  topologyManagerScope: acted('"container" (hints merged per container) or "pod" (once for the whole pod), as upstream (src/topologymanager)'),
  topologyManagerPolicyOptions: acted(
    'prefer-closest-numa-nodes (GA: among equally wide NUMA sets the closer one by /sys/devices/system/node/nodeN/distance) and max-allowable-numa-nodes (beta, at least 8: a host with more NUMA nodes stops the agent with a policy other than "none"); any other option stops the agent naming it (src/topologymanager)',
    (k) => {
      try {
        parsePolicyOptions(k.topologyManagerPolicyOptions, k.featureGates["TopologyManagerPolicyBetaOptions"] !== false);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    },
  ),
  singleProcessOOMKill: acted(
    "cgroup v2: unset or false gives every container memory.oom.group = 1 through the CRI (an OOM kill takes the whole container), true leaves it to the kernel's one-process choice; cgroup v1 kills one process and refuses false at start, as upstream (src/cgroups/container.ts, src/node/host-checks.ts)",
  ),
  memoryThrottlingFactor: acted("memory.high of containers with the MemoryQoS gate on cgroup v2 (src/cgroups/container.ts)"),
  memoryReservationPolicy: refused(`memory reservation policies are ${NOT_IMPLEMENTED} (a field newer than 1.34)`),
  memorySwap: acted(
    'swapBehavior NoSwap ("", default: no swap above the memory limit) or LimitedSwap (Burstable containers get request/node memory × node swap in memory.swap.max, cgroup v2 only; on cgroup v1 NoSwap, as upstream) (src/cgroups/swap.ts)',
  ),
  failSwapOn: acted("start refused while /proc/swaps lists a device (src/node/host-checks.ts)"),
  failCgroupV1: acted("start refused on a cgroup v1 host (src/node/host-checks.ts)"),
  localStorageCapacityIsolation: acted("ephemeral-storage limits and eviction (src/eviction/local-storage.ts)"),
  userNamespaces: acted(
    "idsPerPod (a multiple of 65536, default 65536): the size of each hostUsers: false pod's UID/GID range, cut from the \"kubelet\" user's /etc/subuid and /etc/subgid range or 65536..2^32; housekeeping releases the ranges of pods that no longer exist, as upstream (src/userns/manager.ts)",
  ),
  oomScoreAdj: acted("the agent's own /proc/self/oom_score_adj at start; a failure is a warning, as upstream (src/node/host-checks.ts)"),
  protectKernelDefaults: acted(
    "upstream's kernel tunables (vm/overcommit_memory 1, vm/panic_on_oom 0, kernel/panic 10, kernel/panic_on_oops 1, kernel/keys/root_maxkeys 1000000, kernel/keys/root_maxbytes 25000000) read at start; true: one that differs stops the agent with upstream's message for each; false (the default): each that differs is written, and one that cannot be written stops the agent (in a user namespace with the KubeletInUserNamespace gate it is logged and ignored), as upstream (src/node/host-checks.ts)",
  ),
  kernelMemcgNotification: refused(`memcg threshold notifications are ${NOT_IMPLEMENTED}: memory eviction polls`),
  allowedUnsafeSysctls: acted("sysctls pods may set at admission (src/node/sysctls.ts)"),
  seccompDefault: acted("RuntimeDefault seccomp for containers without a profile (src/runtime/security.ts)"),

  // Eviction
  evictionHard: acted("the eviction manager and Node allocatable (src/eviction)"),
  evictionSoft: acted("the eviction manager (src/eviction)"),
  evictionSoftGracePeriod: acted("the eviction manager (src/eviction)"),
  evictionMinimumReclaim: acted("the eviction manager (src/eviction)"),
  evictionPressureTransitionPeriod: acted("the eviction manager's pressure conditions"),
  evictionMaxPodGracePeriod: acted("grace period of soft evictions"),
  mergeDefaultEvictionSettings: acted("evictionHard gets the default thresholds it lacks (src/config/defaults.ts)"),

  // Graceful node shutdown
  shutdownGracePeriod: acted("graceful node shutdown (src/shutdown)"),
  shutdownGracePeriodCriticalPods: acted("graceful node shutdown (src/shutdown)"),
  shutdownGracePeriodByPodPriority: acted("graceful node shutdown by priority (src/shutdown)"),

  // Observability
  logging: acted("log verbosity (src/util/log.ts); lines are written unbuffered, within any flushFrequency", (k) => {
    const l = k.logging;
    if (l.format !== "text") return `format ${JSON.stringify(l.format)}: ${NOT_IMPLEMENTED}; only "text" is`;
    if (l.vmodule.length) return `vmodule: per-file verbosity is ${NOT_IMPLEMENTED}`;
    // kubeadm writes infoBufferSize "0" for both formats: zero is the default, acted on as unbuffered output.
    const routed = Object.values(l.options).some((o) => o?.splitStream === true || (o?.infoBufferSize !== undefined && Number(parseQuantity(String(o.infoBufferSize))) !== 0));
    if (routed) return `options: split streams and info buffers are ${NOT_IMPLEMENTED}`;
    return undefined;
  }),
  tracing: refused(`OpenTelemetry tracing is ${NOT_IMPLEMENTED}`),
  showHiddenMetricsForVersion: refused(`hidden metrics are ${NOT_IMPLEMENTED}`),
  featureGates: acted("checked against 1.34's gates; see the feature gate rules (src/config/settings.ts)", (k) => gateProblems(k.featureGates)[0]),

  // bunlet extensions
  offlineAutonomy: acted("the local pod checkpoint and offline start (src/sources/pod-checkpoint.ts)"),
  imagePreloadDir: acted("image tarballs imported at start (src/images)"),
};

/**
 * Flags without a config file field (upstream KubeletFlags) that this agent
 * acts on; flags that set a field follow that field's row in SETTINGS, and
 * refused flag-only flags carry their reason in the flag table.
 */
export const FLAG_ONLY_ACTED: Readonly<Record<string, string>> = {
  config: "the KubeletConfiguration file (src/config/load-file.ts)",
  kubeconfig: "cluster mode: the API server client (src/api)",
  "bootstrap-kubeconfig": "TLS bootstrap of the client certificate (src/certificates)",
  "cert-dir": "where certificates are written (src/certificates, src/server)",
  "cloud-provider": '"" (no cloud provider); "external" is refused',
  "hostname-override": "the node name",
  "node-ip": "the node's InternalIP and the pods' host IP",
  "node-labels": "labels of the registered Node",
  "root-dir": "where pod files and volumes live",
  "config-dir": "drop-in directories: refused unless empty",
  help: "prints the flags",
  version: "prints the version",
};

/**
 * Feature gates a 1.34 kubelet reads whose non-default value this agent acts
 * on. Every other gate the kubelet reads is refused at any value but its 1.34
 * default; gates the kubelet does not read are accepted (they change nothing
 * on a node, upstream either).
 */
export const ACTED_GATES: Readonly<Record<string, string>> = {
  EventedPLEG: "container events drive the PLEG where the runtime streams them (src/pleg; on unless false, unlike upstream's alpha default); false relists every second",
  CPUManagerPolicyAlphaOptions:
    "true makes the alpha cpuManagerPolicyOptions available: align-by-socket is acted on, distribute-cpus-across-cores is refused naming it (src/config/cpu-policy-options.ts)",
  CPUManagerPolicyBetaOptions: "false refuses the beta cpuManagerPolicyOptions (distribute-cpus-across-numa) as upstream (src/config/cpu-policy-options.ts)",
  InPlacePodVerticalScaling: "in-place pod resize (src/allocation); false turns it off",
  KubeletCrashLoopBackOffMax: "crashLoopBackOff.maxContainerRestartPeriod caps the container restart back-off (src/runtime/backoff.ts)",
  ReduceDefaultCrashLoopBackOffDecay: "the container restart back-off starts at 1 s and stops at 1 minute instead of 10 s and 5 minutes (src/runtime/backoff.ts)",
  KubeletPSI:
    "pressure stall information (cpu/memory/io some and full) of the node, the pods container, pods and containers in /stats/summary on cgroup v2 (src/stats), and the six container_pressure_* families of /metrics/cadvisor for every cgroup, 0 where the kernel has no *.pressure file (cgroup v1), as upstream's PressureMetrics (src/metrics/cadvisor.ts); false leaves both out",
  MemoryQoS:
    "on cgroup v2: memory.min on pod and QoS cgroups from requests, memory.min and memory.high (memoryThrottlingFactor) on containers through the CRI's unified map (src/cgroups)",
  NodeLogQuery: "node log queries on /logs/ with enableSystemLogQuery (server/node-log-query.ts)",
  KubeletPodResourcesGet: "the pod resources API's Get (src/devices/podresources.ts); false refuses it as upstream",
  QOSReserved: "qosReserved memory=N% caps the burstable and besteffort cgroups (src/cgroups/resources.ts); false refuses qosReserved",
  PodLevelResources:
    "true: spec.resources (cpu, memory) decide the QoS class, admission's resource fit, the pod cgroup's shares, quota and memory limit, the limits of containers without their own, the OOM score adjustment, the downward API's default limits and eviction's requests, as upstream (src/cgroups/pod-resources.ts); the static CPU and memory managers skip such pods as upstream; false: pods with spec.resources are rejected (PodLevelResourcesNotSupported), as upstream (src/node/pod-features.ts)",
  UserNamespacesSupport:
    "true: hostUsers: false pods get a user namespace through the CRI (userns_options) where the runtime handler reports it, and fail sandbox creation with upstream's message where it does not (src/userns/index.ts); false: such pods are rejected (UserNamespacesNotSupported)",
};

/** Upstream's featuregate.Set checks, then this agent's refusals, one message per problem. */
export function gateProblems(gates: Readonly<Record<string, boolean>>): string[] {
  const out: string[] = [];
  for (const [name, value] of Object.entries(gates)) {
    if (name === "AllAlpha" || name === "AllBeta") {
      // Upstream: sets every unlocked gate of that stage. Only the default (false) is acted on here.
      if (value) out.push(`feature gate ${name}=true: turning on every ${name === "AllAlpha" ? "alpha" : "beta"} gate is not implemented by this agent`);
      continue;
    }
    const known = KNOWN_GATES.get(name);
    if (!known) {
      out.push(`unrecognized feature gate: ${name}`);
      continue;
    }
    if (known.locked && value !== known.default) {
      out.push(`cannot set feature gate ${name} to ${value}, feature is locked to ${known.default}`);
      continue;
    }
    if (value === known.default || !known.kubelet || name in ACTED_GATES) continue;
    out.push(`feature gate ${name}=${value}: not implemented by this agent; only its 1.34 default (${known.default}) is supported`);
  }
  return out;
}

/** The value a field has when the config file does not set it. */
function isDefault(field: FieldName, k: KubeletConfiguration, defaults: KubeletConfiguration): boolean {
  return canonical(k[field]) === canonical(defaults[field]);
}

function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>)
            .filter(([, x]) => x !== undefined)
            .sort(([a], [b]) => (a < b ? -1 : 1)),
        )
      : v,
  );
}

/**
 * One message per setting the agent would not act on, naming the field (and
 * its flag): the agent exits 2 with them. `defaults` is the configuration of
 * an empty config file.
 */
export function refusals(k: KubeletConfiguration, defaults: KubeletConfiguration, flagOf: (field: string) => string | undefined): string[] {
  const out: string[] = [];
  for (const field of Object.keys(SETTINGS) as FieldName[]) {
    const s = SETTINGS[field];
    const flag = flagOf(field);
    const name = `field ${JSON.stringify(field)}${flag ? ` (--${flag})` : ""}`;
    if (s.kind === "refused") {
      if (!isDefault(field, k, defaults)) out.push(`${name}: ${s.why}; leave it unset (default ${canonical(defaults[field]) ?? "unset"})`);
    } else if (field === "featureGates") {
      for (const p of gateProblems(k.featureGates)) out.push(`${name}: ${p}`);
    } else {
      const why = s.refuse?.(k);
      if (why !== undefined) out.push(`${name}: ${why}`);
    }
  }
  return out;
}

/** The --help note of a flag setting `field`: empty when acted on without conditions. */
export function helpNote(field: string | undefined): string | undefined {
  const top = field?.split(".")[0] as FieldName | undefined;
  const s = top ? SETTINGS[top] : undefined;
  if (!s) return undefined;
  if (s.kind === "refused") return `not acted on: a non-default value exits 2 (${s.why})`;
  if (s.builtIn) return "only the default is acted on: other values exit 2";
  return undefined;
}

/** The generated part of docs/configuration.md: every field and flag, acted on (where) or refused (why). */
export function settingsMarkdown(): string {
  const cell = (s: string) => s.replace(/\|/g, "\\|");
  const flagsOf = (field: string) =>
    FLAGS.filter((f) => f.field?.split(".")[0] === field)
      .map((f) => `--${f.name}`)
      .join(", ");
  const rows = (Object.keys(SETTINGS) as FieldName[]).map((field) => {
    const s = SETTINGS[field];
    const what =
      s.kind === "acted"
        ? `acted on: ${s.where}${s.refuse ? "; other values refused (see the message)" : ""}`
        : `**refused** unless default: ${s.why}${s.defaultGap ? ` (gap: ${s.defaultGap})` : ""}`;
    return `| \`${field}\` | ${flagsOf(field)} | ${cell(what)} |`;
  });
  const flagRows = FLAGS.filter((f) => !f.field).map(
    (f) => `| \`--${f.name}\` | ${cell(f.refused ? `**refused** unless default: ${f.refused}` : `acted on: ${FLAG_ONLY_ACTED[f.name] ?? "?"}`)} |`,
  );
  const gates = Object.entries(ACTED_GATES).map(([g, where]) => `- \`${g}\`: ${where}`);
  return [
    "| Field | Flags | What the agent does |",
    "| --- | --- | --- |",
    ...rows,
    "",
    "| Flag-only flag | What the agent does |",
    "| --- | --- |",
    ...flagRows,
    "",
    `Feature gates are checked against the ${KNOWN_GATES.size} gates a 1.34 kubelet knows: an unknown name exits 2, and so does a gate locked to its default set to the other value, as upstream. Gates the kubelet's code does not read are accepted (they change nothing on a node). Gates it reads are refused at any value but their 1.34 default, except these, which are acted on:`,
    "",
    ...gates,
    "",
  ].join("\n");
}
