/**
 * Every flag the upstream kubelet (1.34) accepts, and what each one sets.
 * Flags that correspond to a config file field set that field (upstream has
 * deprecated them in favour of the file but still honours them); the rest
 * are flag-only settings (upstream KubeletFlags).
 */
import { formatDuration, parseDuration } from "./duration.ts";
import { agent, bool, checkSignal, dur, int, list, map, percentCheck, quantityCheck, quote, refusedFlag, str, thresholds } from "./flag-builders.ts";
import type { EvictionSignal } from "./kubelet-config.ts";
import { firstUse, parseBool, parseInt, parseList, parsePairs, type FlagDef } from "./flags.ts";
import { isQuantity, parseQuantity } from "./quantity.ts";
import { checkIP, checkNodeLabel, parseNodeIPs, parseTaintSpec } from "./validators.ts";

export const FLAGS: readonly FlagDef[] = [
  // Config and API server
  agent("config", "string", "config", "Path to a KubeletConfiguration file (YAML or JSON). Flags override the values in it.", (t, raw) => {
    t.agent.configFile = raw;
  }),
  {
    name: "config-dir",
    type: "string",
    group: "config",
    help: "Directory of drop-in config files. Not supported yet: must be empty.",
    parse: (raw) => {
      if (raw !== "") throw new Error("drop-in config directories are not supported yet");
      return () => {};
    },
  },
  agent("kubeconfig", "string", "config", "Path to a kubeconfig file for the API server. Without it the kubelet runs standalone.", (t, raw) => {
    t.agent.kubeconfig = raw || undefined;
  }),
  agent("bootstrap-kubeconfig", "string", "config", "Path to a kubeconfig used to obtain a client certificate when --kubeconfig does not exist yet.", (t, raw) => {
    t.agent.bootstrapKubeconfig = raw || undefined;
  }),
  agent(
    "cert-dir",
    "string",
    "config",
    "Directory for TLS certificates. Ignored when --tls-cert-file and --tls-private-key-file are set.",
    (t, raw) => {
      t.agent.certDir = raw;
    },
    { showDefault: (t) => quote(t.agent.certDir) },
  ),
  bool("rotate-certificates", "rotateCertificates", "config", "Rotate the client certificate through the certificates API as it nears expiry."),
  bool("rotate-server-certificates", "serverTLSBootstrap", "config", "Request and rotate the serving certificate through the certificates API."),
  int("kube-api-qps", "kubeAPIQPS", "config", "QPS for requests to the API server; 0 is 5 (client-go's default). Events and the node's status and lease have their own limits."),
  int("kube-api-burst", "kubeAPIBurst", "config", "Burst for requests to the API server."),
  str("kube-api-content-type", "contentType", "config", "Content type of requests sent to the API server."),
  int("event-qps", "eventRecordQPS", "config", "Limit of event creations per second; 0 is 5 (client-go's default)."),
  int("event-burst", "eventBurst", "config", "Burst of event creations allowed above --event-qps."),
  {
    name: "cloud-provider",
    type: "string",
    group: "config",
    help: 'Cloud provider: only "" (none) is acted on; "external" exits 2.',
    parse: (raw) => {
      if (raw !== "") throw new Error("external cloud providers (the uninitialized taint, addresses from the cloud controller) are not implemented by this agent");
      return (t) => {
        t.agent.cloudProvider = raw;
      };
    },
  },
  refusedFlag("lock-file", "string", "config", "Path of a lock file shared with other kubelets.", "", "lock files are not implemented by this agent"),
  refusedFlag("exit-on-lock-contention", "", "config", "Exit when the lock file is contended.", "false", "lock files are not implemented by this agent"),

  // Node identity and registration
  agent("hostname-override", "string", "node", "Node name to use instead of the host name.", (t, raw) => {
    t.agent.hostnameOverride = raw || undefined;
  }),
  {
    name: "node-ip",
    type: "string",
    group: "node",
    help: "IP address of the node, or a comma-separated IPv4/IPv6 pair.",
    parse: (raw) => {
      const ips = parseNodeIPs(raw);
      return (t) => {
        t.agent.nodeIPs = ips;
      };
    },
  },
  {
    name: "node-labels",
    type: "<key=value pairs>",
    group: "node",
    help: "Labels to add when registering the node. 'kubernetes.io' labels are limited to the ones a kubelet may set.",
    parse: (raw) => {
      const pairs = parsePairs(raw);
      for (const [k, v] of pairs) {
        const err = checkNodeLabel(k, v);
        if (err) throw new Error(err);
      }
      return (t) => {
        Object.assign(t.agent.nodeLabels, Object.fromEntries(pairs));
      };
    },
  },
  bool("register-node", "registerNode", "node", "Register the node with the API server (only with --kubeconfig)."),
  {
    name: "register-with-taints",
    type: "<key=value:effect,...>",
    group: "node",
    field: "registerWithTaints",
    help: "Taints to register the node with, comma-separated <key>=<value>:<effect>.",
    parse: (raw) => {
      const taints = parseList(raw).map(parseTaintSpec);
      return (t) => {
        t.kubelet.registerWithTaints = taints;
      };
    },
  },
  str("provider-id", "providerID", "node", "Unique identifier of the node in a machine database (cloud provider ID)."),
  dur("node-status-update-frequency", "nodeStatusUpdateFrequency", "node", "How often the kubelet computes node status."),
  int("node-status-max-images", "nodeStatusMaxImages", "node", "Maximum number of images reported in the node status; -1 for no limit."),
  agent(
    "root-dir",
    "string",
    "node",
    "Directory for the kubelet's files (volumes, plugins, pod data).",
    (t, raw) => {
      t.agent.rootDir = raw;
    },
    { showDefault: (t) => quote(t.agent.rootDir) },
  ),
  bool("runonce", "runOnce", "node", "Start the pods from static pod files once, then exit."),

  // Pods and the container runtime
  str("pod-manifest-path", "staticPodPath", "pods", "Directory of static pod files, or a single static pod file."),
  str("image-preload-dir", "imagePreloadDir", "pods", "bunlet: directory of image tarballs (OCI layout or docker save) imported into the runtime at start."),
  str("manifest-url", "staticPodURL", "pods", "URL of additional static pod specifications."),
  {
    name: "manifest-url-header",
    type: "<key:value pairs>",
    group: "pods",
    field: "staticPodURLHeader",
    help: "HTTP headers for --manifest-url, comma-separated key:value; repeat the flag to add more.",
    parse: (raw) => {
      const pairs = parsePairs(raw, ":");
      return (t) => {
        const h = firstUse(t, "manifest-url-header") ? {} : { ...t.kubelet.staticPodURLHeader };
        for (const [k, v] of pairs) h[k] = [...(h[k] ?? []), v];
        t.kubelet.staticPodURLHeader = h;
      };
    },
  },
  dur("sync-frequency", "syncFrequency", "pods", "Maximum period between syncs of running containers and config."),
  dur("file-check-frequency", "fileCheckFrequency", "pods", "Period between checks of static pod files for new data."),
  dur("http-check-frequency", "httpCheckFrequency", "pods", "Period between checks of --manifest-url for new data."),
  str("container-runtime-endpoint", "containerRuntimeEndpoint", "pods", "CRI runtime endpoint, e.g. unix:///run/containerd/containerd.sock."),
  str("image-service-endpoint", "imageServiceEndpoint", "pods", "CRI image service endpoint; defaults to --container-runtime-endpoint."),
  dur("runtime-request-timeout", "runtimeRequestTimeout", "pods", "Timeout of runtime requests other than pull, logs, exec and attach."),
  bool("serialize-image-pulls", "serializeImagePulls", "pods", "Pull images one at a time."),
  int("registry-qps", "registryPullQPS", "pods", "Limit of image pulls per second; 0 for no limit."),
  int("registry-burst", "registryBurst", "pods", "Burst of image pulls allowed above --registry-qps."),
  dur("minimum-image-ttl-duration", "imageMinimumGCAge", "pods", "Minimum age of an unused image before it is garbage collected."),
  int("image-gc-high-threshold", "imageGCHighThresholdPercent", "pods", "Disk usage percent above which image garbage collection always runs."),
  int("image-gc-low-threshold", "imageGCLowThresholdPercent", "pods", "Disk usage percent image garbage collection frees down to."),
  str("container-log-max-size", "containerLogMaxSize", "pods", "Maximum size of a container log file before it is rotated (e.g. 10Mi).", (s) =>
    isQuantity(s) ? null : `expected a quantity like "10Mi", got ${JSON.stringify(s)}`,
  ),
  int("container-log-max-files", "containerLogMaxFiles", "pods", "Maximum number of log files kept per container (at least 2)."),
  refusedFlag(
    "image-credential-provider-config",
    "string",
    "pods",
    "Credential provider plugin config file or directory.",
    "",
    "credential provider plugins are not implemented by this agent",
  ),
  refusedFlag(
    "image-credential-provider-bin-dir",
    "string",
    "pods",
    "Directory of credential provider plugin binaries.",
    "",
    "credential provider plugins are not implemented by this agent",
  ),
  int("max-pods", "maxPods", "pods", "Maximum number of pods on this node."),
  int("pods-per-core", "podsPerCore", "pods", "Maximum number of pods per core; 0 for no limit."),
  int("pod-max-pids", "podPidsLimit", "pods", "Maximum number of processes per pod; -1 for the node allocatable limit.", 64),
  int("max-open-files", "maxOpenFiles", "pods", "Number of files the kubelet process may open.", 64),
  str("pod-cidr", "podCIDR", "pods", "CIDR for pod IPs in standalone mode."),
  bool("seccomp-default", "seccompDefault", "pods", "Use the RuntimeDefault seccomp profile for all workloads."),
  list("allowed-unsafe-sysctls", "allowedUnsafeSysctls", "pods", "Comma-separated unsafe sysctls or patterns (ending in *) pods may set."),
  str("volume-plugin-dir", "volumePluginDir", "pods", "Directory of third-party volume plugins."),
  dur("volume-stats-agg-period", "volumeStatsAggPeriod", "pods", "Period of volume disk usage calculation."),
  bool("enable-controller-attach-detach", "enableControllerAttachDetach", "pods", "Let the attach/detach controller manage volume attachment for this node."),
  bool("local-storage-capacity-isolation", "localStorageCapacityIsolation", "pods", "Enforce ephemeral storage requests and limits."),

  // Kubelet server and its authentication
  bool("enable-server", "enableServer", "server", "Serve the kubelet API."),
  str("address", "address", "server", "IP address to serve on (0.0.0.0 or :: for all).", checkIP),
  int("port", "port", "server", "Port of the kubelet API."),
  int("read-only-port", "readOnlyPort", "server", "Port of the unauthenticated read-only API; 0 disables it."),
  int("healthz-port", "healthzPort", "server", "Port of the healthz endpoint; 0 disables it."),
  str("healthz-bind-address", "healthzBindAddress", "server", "IP address of the healthz endpoint.", checkIP),
  str("tls-cert-file", "tlsCertFile", "server", "Serving certificate file (intermediates appended)."),
  str("tls-private-key-file", "tlsPrivateKeyFile", "server", "Private key matching --tls-cert-file."),
  list("tls-cipher-suites", "tlsCipherSuites", "server", "Comma-separated TLS cipher suites."),
  str("tls-min-version", "tlsMinVersion", "server", "Minimum TLS version (VersionTLS12, VersionTLS13)."),
  {
    name: "client-ca-file",
    type: "string",
    group: "server",
    field: "authentication.x509.clientCAFile",
    help: "CA bundle that authenticates client certificates (user from CN, groups from O).",
    parse: (raw) => (t) => {
      t.kubelet.authentication.x509.clientCAFile = raw;
    },
  },
  {
    name: "anonymous-auth",
    type: "",
    isBool: true,
    group: "server",
    field: "authentication.anonymous.enabled",
    help: "Treat requests no authenticator rejected as system:anonymous.",
    showDefault: (t) => (t.kubelet.authentication.anonymous.enabled ? "true" : undefined),
    parse: (raw) => {
      const v = parseBool(raw);
      return (t) => {
        t.kubelet.authentication.anonymous.enabled = v;
      };
    },
  },
  {
    name: "authentication-token-webhook",
    type: "",
    isBool: true,
    group: "server",
    field: "authentication.webhook.enabled",
    help: "Authenticate bearer tokens with the TokenReview API.",
    showDefault: (t) => (t.kubelet.authentication.webhook.enabled ? "true" : undefined),
    parse: (raw) => {
      const v = parseBool(raw);
      return (t) => {
        t.kubelet.authentication.webhook.enabled = v;
      };
    },
  },
  {
    name: "authentication-token-webhook-cache-ttl",
    type: "duration",
    group: "server",
    field: "authentication.webhook.cacheTTL",
    help: "How long to cache token review answers.",
    showDefault: (t) => formatDuration(t.kubelet.authentication.webhook.cacheTTL),
    parse: (raw) => {
      const v = parseDuration(raw);
      return (t) => {
        t.kubelet.authentication.webhook.cacheTTL = v;
      };
    },
  },
  {
    name: "authorization-mode",
    type: "string",
    group: "server",
    field: "authorization.mode",
    help: "AlwaysAllow, or Webhook (SubjectAccessReview API).",
    showDefault: (t) => quote(t.kubelet.authorization.mode),
    parse: (raw) => (t) => {
      t.kubelet.authorization.mode = raw;
    },
  },
  {
    name: "authorization-webhook-cache-authorized-ttl",
    type: "duration",
    group: "server",
    field: "authorization.webhook.cacheAuthorizedTTL",
    help: "How long to cache 'authorized' answers.",
    showDefault: (t) => formatDuration(t.kubelet.authorization.webhook.cacheAuthorizedTTL),
    parse: (raw) => {
      const v = parseDuration(raw);
      return (t) => {
        t.kubelet.authorization.webhook.cacheAuthorizedTTL = v;
      };
    },
  },
  {
    name: "authorization-webhook-cache-unauthorized-ttl",
    type: "duration",
    group: "server",
    field: "authorization.webhook.cacheUnauthorizedTTL",
    help: "How long to cache 'unauthorized' answers.",
    showDefault: (t) => formatDuration(t.kubelet.authorization.webhook.cacheUnauthorizedTTL),
    parse: (raw) => {
      const v = parseDuration(raw);
      return (t) => {
        t.kubelet.authorization.webhook.cacheUnauthorizedTTL = v;
      };
    },
  },
  bool("enable-debugging-handlers", "enableDebuggingHandlers", "server", "Serve logs, exec, attach and port-forward endpoints."),
  bool("contention-profiling", "enableContentionProfiling", "server", "Enable block profiling, if profiling is enabled."),
  dur("streaming-connection-idle-timeout", "streamingConnectionIdleTimeout", "server", "Idle timeout of streaming connections (no effect upstream either)."),

  // DNS and networking
  list("cluster-dns", "clusterDNS", "network", "Comma-separated DNS server IPs for pods with dnsPolicy ClusterFirst.", checkIP),
  str("cluster-domain", "clusterDomain", "network", "Cluster DNS domain, added to pods' search domains."),
  str("resolv-conf", "resolvConf", "network", "Resolver configuration that pod DNS starts from; empty disables it."),
  str("hairpin-mode", "hairpinMode", "network", "promiscuous-bridge, hairpin-veth or none."),
  bool("make-iptables-util-chains", "makeIPTablesUtilChains", "network", "Create the KUBE-IPTABLES-HINT chain."),

  // Resources and cgroups
  str("cgroup-driver", "cgroupDriver", "resources", "cgroupfs or systemd."),
  str("cgroup-root", "cgroupRoot", "resources", "Root cgroup for pods; empty means the runtime's default."),
  bool("cgroups-per-qos", "cgroupsPerQOS", "resources", "Create the QoS and pod cgroup hierarchy."),
  str("kubelet-cgroups", "kubeletCgroups", "resources", "Absolute name of the cgroup to run the kubelet in."),
  str("system-cgroups", "systemCgroups", "resources", "Absolute name of the cgroup for non-kernel processes not in a cgroup."),
  refusedFlag(
    "runtime-cgroups",
    "string",
    "resources",
    "Absolute name of the cgroup to run the container runtime in.",
    "",
    "moving the container runtime into a cgroup is not implemented by this agent",
  ),
  map("system-reserved", "systemReserved", "resources", "Resources reserved for the system, e.g. cpu=200m,memory=500Mi.", quantityCheck),
  str("system-reserved-cgroup", "systemReservedCgroup", "resources", "Cgroup that --system-reserved is enforced on."),
  map("kube-reserved", "kubeReserved", "resources", "Resources reserved for Kubernetes components, e.g. cpu=200m,memory=500Mi.", quantityCheck),
  str("kube-reserved-cgroup", "kubeReservedCgroup", "resources", "Cgroup that --kube-reserved is enforced on."),
  str("reserved-cpus", "reservedSystemCPUs", "resources", "CPU list reserved for the system and Kubernetes (e.g. 0-1)."),
  {
    name: "reserved-memory",
    type: "<numa:resource=quantity,...>",
    group: "resources",
    field: "reservedMemory",
    help: "Memory reserved per NUMA node, e.g. 0:memory=1Gi,hugepages-1M=2Gi; repeat per node.",
    parse: (raw) => {
      const at = raw.indexOf(":");
      if (at < 0) throw new Error(`expected <numa node>:<resource>=<quantity>,..., got ${JSON.stringify(raw)}`);
      const numaNode = parseInt(raw.slice(0, at), 32);
      const limits = Object.fromEntries(
        parsePairs(raw.slice(at + 1)).map(([k, v]) => {
          parseQuantity(v);
          return [k, v];
        }),
      );
      return (t) => {
        t.kubelet.reservedMemory = [...(firstUse(t, "reserved-memory") ? [] : t.kubelet.reservedMemory), { numaNode, limits }];
      };
    },
  },
  list("enforce-node-allocatable", "enforceNodeAllocatable", "resources", "Node allocatable levels to enforce: none, pods, system-reserved, kube-reserved (and -compressible)."),
  map("qos-reserved", "qosReserved", "resources", "Percent of requests reserved per QoS level, e.g. memory=50%.", percentCheck),
  bool("cpu-cfs-quota", "cpuCFSQuota", "resources", "Enforce CPU limits with CFS quota."),
  dur("cpu-cfs-quota-period", "cpuCFSQuotaPeriod", "resources", "CFS quota period (cpu.cfs_period_us)."),
  str("cpu-manager-policy", "cpuManagerPolicy", "resources", "CPU manager policy: none or static."),
  map("cpu-manager-policy-options", "cpuManagerPolicyOptions", "resources", "CPU manager policy options, key=value.", undefined, false),
  dur("cpu-manager-reconcile-period", "cpuManagerReconcilePeriod", "resources", "CPU manager reconcile period."),
  str("memory-manager-policy", "memoryManagerPolicy", "resources", "Memory manager policy: None or Static."),
  str("topology-manager-policy", "topologyManagerPolicy", "resources", "none, best-effort, restricted or single-numa-node."),
  str("topology-manager-scope", "topologyManagerScope", "resources", "container or pod."),
  map("topology-manager-policy-options", "topologyManagerPolicyOptions", "resources", "Topology manager policy options, key=value.", undefined, false),
  bool("fail-swap-on", "failSwapOn", "resources", "Refuse to start if swap is enabled."),
  bool("fail-cgroupv1", "failCgroupV1", "resources", "Refuse to start on a cgroup v1 host."),
  int("oom-score-adj", "oomScoreAdj", "resources", "oom_score_adj of the kubelet process, in [-1000, 1000]."),
  bool("protect-kernel-defaults", "protectKernelDefaults", "resources", "Fail instead of changing kernel tunables."),
  bool("kernel-memcg-notification", "kernelMemcgNotification", "resources", "Use memcg notifications for memory eviction instead of polling."),

  // Eviction
  thresholds("eviction-hard", "evictionHard", "<", "Hard eviction thresholds, e.g. memory.available<1Gi,nodefs.available<10%."),
  thresholds("eviction-soft", "evictionSoft", "<", "Soft eviction thresholds, e.g. memory.available<1.5Gi."),
  {
    name: "eviction-soft-grace-period",
    type: "<signal=duration,...>",
    group: "eviction",
    field: "evictionSoftGracePeriod",
    help: "Grace periods of soft eviction thresholds, e.g. memory.available=1m30s.",
    parse: (raw) => {
      const pairs = parsePairs(raw).map(([k, v]): [string, number] => {
        const err = checkSignal(k);
        if (err) throw new Error(err);
        return [k, parseDuration(v)];
      });
      return (t) => {
        t.kubelet.evictionSoftGracePeriod = {
          ...(firstUse(t, "eviction-soft-grace-period") ? {} : t.kubelet.evictionSoftGracePeriod),
          ...(Object.fromEntries(pairs) as Partial<Record<EvictionSignal, number>>),
        };
      };
    },
  },
  thresholds("eviction-minimum-reclaim", "evictionMinimumReclaim", "=", "Minimum reclaim per signal, e.g. imagefs.available=2Gi."),
  dur("eviction-pressure-transition-period", "evictionPressureTransitionPeriod", "eviction", "How long to wait before leaving an eviction pressure condition."),
  int("eviction-max-pod-grace-period", "evictionMaxPodGracePeriod", "eviction", "Maximum grace period (seconds) for soft evictions; negative defers to the pod."),

  // Logging
  {
    name: "v",
    short: "v",
    type: "Level",
    group: "logging",
    field: "logging.verbosity",
    help: "Log verbosity level.",
    parse: (raw) => {
      const v = parseInt(raw, 32);
      if (v < 0) throw new Error(`expected a non-negative level, got ${v}`);
      return (t) => {
        t.kubelet.logging.verbosity = v;
      };
    },
  },
  {
    name: "vmodule",
    type: "pattern=N,...",
    group: "logging",
    field: "logging.vmodule",
    help: "Per-file verbosity, comma-separated pattern=N.",
    parse: (raw) => {
      const items = parsePairs(raw).map(([filePattern, n]) => ({ filePattern, verbosity: parseInt(n, 32) }));
      return (t) => {
        t.kubelet.logging.vmodule = items;
      };
    },
  },
  {
    name: "log-flush-frequency",
    type: "duration",
    group: "logging",
    field: "logging.flushFrequency",
    help: "Maximum time between log flushes.",
    showDefault: (t) => formatDuration(t.kubelet.logging.flushFrequency),
    parse: (raw) => {
      const v = parseDuration(raw);
      return (t) => {
        t.kubelet.logging.flushFrequency = v;
      };
    },
  },
  {
    name: "logging-format",
    type: "string",
    group: "logging",
    field: "logging.format",
    help: 'Log format: "text" (or "json", accepted but written as text).',
    showDefault: (t) => quote(t.kubelet.logging.format),
    parse: (raw) => (t) => {
      t.kubelet.logging.format = raw;
    },
  },
  ...(["text", "json"] as const).flatMap((fmt): FlagDef[] => [
    {
      name: `log-${fmt}-split-stream`,
      type: "",
      isBool: true,
      group: "logging",
      field: `logging.options.${fmt}.splitStream`,
      help: `[Alpha] In ${fmt} format, write errors to stderr and info to stdout.`,
      parse: (raw) => {
        const v = parseBool(raw);
        return (t) => {
          t.kubelet.logging.options = { ...t.kubelet.logging.options, [fmt]: { ...t.kubelet.logging.options[fmt], splitStream: v } };
        };
      },
    },
    {
      name: `log-${fmt}-info-buffer-size`,
      type: "quantity",
      group: "logging",
      field: `logging.options.${fmt}.infoBufferSize`,
      help: `[Alpha] In ${fmt} format with split streams, buffer this much info output.`,
      parse: (raw) => {
        parseQuantity(raw);
        return (t) => {
          t.kubelet.logging.options = { ...t.kubelet.logging.options, [fmt]: { ...t.kubelet.logging.options[fmt], infoBufferSize: raw } };
        };
      },
    },
  ]),

  // Other
  {
    name: "feature-gates",
    type: "<key=true|false,...>",
    group: "other",
    field: "featureGates",
    help: "Feature gates to turn on or off, comma-separated Name=true|false.",
    parse: (raw) => {
      const gates = parsePairs(raw).map(([k, v]): [string, boolean] => [k, parseBool(v)]);
      // Upstream (kubeletConfigFlagPrecedence) keeps the file's gates that the flag does not name.
      return (t) => {
        t.kubelet.featureGates = { ...t.kubelet.featureGates, ...Object.fromEntries(gates) };
      };
    },
  },
  { name: "help", short: "h", type: "", isBool: true, group: "other", help: "Print this help and exit.", parse: () => () => {} },
  { name: "version", type: "", isBool: true, group: "other", help: "Print the version and exit (--version=raw prints the same).", parse: () => () => {} },

  // Deprecated upstream
  refusedFlag(
    "pod-infra-container-image",
    "string",
    "deprecated",
    "The sandbox (pause) image.",
    "",
    "the container runtime's own configuration chooses the sandbox image; upstream deprecated this flag",
  ),
  refusedFlag(
    "minimum-container-ttl-duration",
    "duration",
    "deprecated",
    "Minimum age of a finished container before garbage collection.",
    "0s",
    "container garbage collection limits are not implemented by this agent; upstream deprecated this flag",
  ),
  refusedFlag(
    "maximum-dead-containers-per-container",
    "int32",
    "deprecated",
    "Old container instances to keep per container.",
    "1",
    "container garbage collection limits are not implemented by this agent; upstream deprecated this flag",
  ),
  refusedFlag(
    "maximum-dead-containers",
    "int32",
    "deprecated",
    "Old container instances to keep in total.",
    "-1",
    "container garbage collection limits are not implemented by this agent; upstream deprecated this flag",
  ),
  refusedFlag(
    "experimental-allocatable-ignore-eviction",
    "",
    "deprecated",
    "Ignore hard eviction thresholds in node allocatable.",
    "false",
    "leaving eviction thresholds out of allocatable is not implemented by this agent; upstream deprecated this flag",
  ),
  refusedFlag(
    "experimental-mounter-path",
    "string",
    "deprecated",
    "Path of a mounter binary.",
    "",
    "an external mounter is not implemented by this agent; upstream deprecated this flag",
  ),
];
