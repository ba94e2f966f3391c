/**
 * The rule, over every field and flag: each is acted on (and the code reads
 * it) or refused at start by name. A field added to the schema without a row
 * in SETTINGS and a sample here does not compile; the runtime checks below
 * catch what types cannot (a schema key missing from the table, a flag with
 * no disposition, an "acted" field no code outside src/config reads).
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { KNOWN_GATES } from "./feature-gates-1.34.ts";
import { FLAGS } from "./flag-table.ts";
import { loadConfig, type ConfigResult } from "./index.ts";
import { KubeletConfigurationFileSchema } from "./kubelet-config.ts";
import { ACTED_GATES, FLAG_ONLY_ACTED, SETTINGS, settingsMarkdown, type FieldName } from "./settings.ts";

/** Upstream k8s.io/kubelet config/v1beta1 KubeletConfiguration at v0.34.12: its 123 JSON field names. */
const UPSTREAM_1_34 = `enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency httpCheckFrequency staticPodURL
staticPodURLHeader address port readOnlyPort tlsCertFile tlsPrivateKeyFile tlsCipherSuites tlsMinVersion rotateCertificates
serverTLSBootstrap authentication authorization registryPullQPS registryBurst imagePullCredentialsVerificationPolicy
preloadedImagesVerificationAllowlist eventRecordQPS eventBurst enableDebuggingHandlers enableContentionProfiling healthzPort
healthzBindAddress oomScoreAdj clusterDomain clusterDNS streamingConnectionIdleTimeout nodeStatusUpdateFrequency
nodeStatusReportFrequency nodeLeaseDurationSeconds imageMinimumGCAge imageMaximumGCAge imageGCHighThresholdPercent
imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups systemCgroups cgroupRoot cgroupsPerQOS cgroupDriver
cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions cpuManagerReconcilePeriod memoryManagerPolicy
topologyManagerPolicy topologyManagerScope topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode maxPods
podCIDR podPidsLimit resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages maxOpenFiles contentType kubeAPIQPS
kubeAPIBurst serializeImagePulls maxParallelImagePulls evictionHard evictionSoft evictionSoftGracePeriod
evictionPressureTransitionPeriod evictionMaxPodGracePeriod evictionMinimumReclaim mergeDefaultEvictionSettings podsPerCore
enableControllerAttachDetach protectKernelDefaults makeIPTablesUtilChains iptablesMasqueradeBit iptablesDropBit featureGates
failSwapOn memorySwap containerLogMaxSize containerLogMaxFiles containerLogMaxWorkers containerLogMonitorInterval
configMapAndSecretChangeDetectionStrategy systemReserved kubeReserved reservedSystemCPUs showHiddenMetricsForVersion
systemReservedCgroup kubeReservedCgroup enforceNodeAllocatable allowedUnsafeSysctls volumePluginDir providerID
kernelMemcgNotification logging enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod
shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff reservedMemory enableProfilingHandler
enableDebugFlagsHandler seccompDefault memoryThrottlingFactor registerWithTaints registerNode tracing
localStorageCapacityIsolation containerRuntimeEndpoint imageServiceEndpoint failCgroupV1 userNamespaces`.split(/\s+/);

/**
 * One value per field that differs from its config file default. An acted
 * field must load with it; a refused one must be refused by name. For acted
 * fields that refuse some values, `REFUSED_VALUE` holds one of those.
 */
const SAMPLE: { readonly [F in FieldName]: unknown } = {
  staticPodPath: "/etc/kubernetes/manifests",
  staticPodURL: "http://127.0.0.1:8080/pods",
  staticPodURLHeader: { Authorization: ["Bearer abc"] },
  syncFrequency: "30s",
  fileCheckFrequency: "10s",
  httpCheckFrequency: "10s",
  podLogsDir: "/data/pod-logs",
  runOnce: true,
  enableServer: false,
  address: "127.0.0.1",
  port: 10260,
  readOnlyPort: 10255,
  healthzPort: 0,
  healthzBindAddress: "0.0.0.0",
  tlsCertFile: "/pki/kubelet.crt",
  tlsPrivateKeyFile: "/pki/kubelet.key",
  tlsCipherSuites: ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
  tlsCurvePreferences: [29],
  tlsMinVersion: "VersionTLS13",
  rotateCertificates: true,
  serverTLSBootstrap: true,
  authentication: { anonymous: { enabled: true } },
  authorization: { mode: "AlwaysAllow" },
  enableDebuggingHandlers: false,
  enableContentionProfiling: true,
  enableSystemLogHandler: false,
  enableSystemLogQuery: true,
  enableProfilingHandler: true,
  enableDebugFlagsHandler: false,
  streamingConnectionIdleTimeout: "1h",
  containerRuntimeEndpoint: "unix:///run/other.sock",
  imageServiceEndpoint: "unix:///run/images.sock",
  runtimeRequestTimeout: "1m",
  serializeImagePulls: false,
  maxParallelImagePulls: 1,
  registryPullQPS: 2,
  registryBurst: 4,
  imagePullCredentialsVerificationPolicy: "AlwaysVerify",
  preloadedImagesVerificationAllowlist: ["registry.k8s.io/pause"],
  imageMinimumGCAge: "5m",
  imageMaximumGCAge: "24h",
  imageGCHighThresholdPercent: 90,
  imageGCLowThresholdPercent: 70,
  containerLogMaxSize: "20Mi",
  containerLogMaxFiles: 3,
  containerLogMaxWorkers: 4,
  containerLogMonitorInterval: "20s",
  crashLoopBackOff: { maxContainerRestartPeriod: "1m" },
  podHousekeepingPeriod: "5s",
  registerNode: false,
  registerWithTaints: [{ key: "dedicated", value: "edge", effect: "NoSchedule" }],
  providerID: "aws:///us-east-1a/i-1",
  nodeStatusUpdateFrequency: "20s",
  nodeStatusReportFrequency: "1m",
  nodeLeaseDurationSeconds: 60,
  nodeStatusMaxImages: 10,
  kubeAPIQPS: 10,
  kubeAPIBurst: 20,
  contentType: "application/json",
  eventRecordQPS: 10,
  eventBurst: 20,
  configMapAndSecretChangeDetectionStrategy: "Get",
  volumeStatsAggPeriod: "2m",
  volumePluginDir: "/opt/flex",
  enableControllerAttachDetach: false,
  clusterDomain: "cluster.local",
  clusterDNS: ["10.96.0.10"],
  resolvConf: "/run/resolv.conf",
  hairpinMode: "hairpin-veth",
  podCIDR: "10.244.0.0/24",
  makeIPTablesUtilChains: false,
  iptablesMasqueradeBit: 13,
  iptablesDropBit: 16,
  maxPods: 50,
  podsPerCore: 10,
  podPidsLimit: 1024,
  maxOpenFiles: 4096,
  cgroupRoot: "/bunlet",
  cgroupsPerQOS: false,
  cgroupDriver: "systemd",
  kubeletCgroups: "/kubelet",
  systemCgroups: "/system",
  systemReserved: { cpu: "100m" },
  kubeReserved: { memory: "256Mi" },
  systemReservedCgroup: "/system.slice",
  kubeReservedCgroup: "/kube.slice",
  reservedSystemCPUs: "0",
  enforceNodeAllocatable: ["none"],
  qosReserved: { memory: "50%" },
  cpuCFSQuota: false,
  cpuCFSQuotaPeriod: "50ms",
  cpuManagerPolicy: "static",
  cpuManagerPolicyOptions: { "full-pcpus-only": "true" },
  cpuManagerReconcilePeriod: "5s",
  draManagerReconcilePeriod: "30s",
  memoryManagerPolicy: "Static",
  reservedMemory: [{ numaNode: 0, limits: { memory: "1Gi" } }],
  topologyManagerPolicy: "single-numa-node",
  topologyManagerScope: "pod",
  topologyManagerPolicyOptions: { "prefer-closest-numa-nodes": "true" },
  singleProcessOOMKill: true,
  memoryThrottlingFactor: 0.8,
  memoryReservationPolicy: "Reserve",
  memorySwap: { swapBehavior: "LimitedSwap" },
  failSwapOn: false,
  failCgroupV1: true,
  localStorageCapacityIsolation: false,
  userNamespaces: { idsPerPod: 131072 },
  oomScoreAdj: -500,
  protectKernelDefaults: true,
  kernelMemcgNotification: true,
  allowedUnsafeSysctls: ["kernel.msg*"],
  seccompDefault: true,
  evictionHard: { "memory.available": "200Mi" },
  evictionSoft: { "memory.available": "300Mi" },
  evictionSoftGracePeriod: { "memory.available": "1m" },
  evictionMinimumReclaim: { "imagefs.available": "2Gi" },
  evictionPressureTransitionPeriod: "1m",
  evictionMaxPodGracePeriod: 30,
  mergeDefaultEvictionSettings: true,
  shutdownGracePeriod: "30s",
  shutdownGracePeriodCriticalPods: "10s",
  shutdownGracePeriodByPodPriority: [{ priority: 0, shutdownGracePeriodSeconds: 10 }],
  logging: { verbosity: 4 },
  tracing: { endpoint: "localhost:4317" },
  showHiddenMetricsForVersion: "1.33",
  featureGates: { InPlacePodVerticalScaling: false },
  offlineAutonomy: { enabled: false },
  imagePreloadDir: "/var/lib/images",
};

/** For acted fields that act on some values only: a value they refuse, and (in SAMPLE or ACTED_VALUE) one they act on. */
const REFUSED_VALUE: Partial<Record<FieldName, unknown>> = {
  containerLogMaxWorkers: 4,
  configMapAndSecretChangeDetectionStrategy: "Get",
  enableControllerAttachDetach: false,
  cpuManagerPolicy: "static", // without reserved CPU
  cpuManagerPolicyOptions: { "align-by-socket": "true" },
  reservedSystemCPUs: "3-1",
  qosReserved: { memory: "50%" }, // without the QOSReserved gate
  crashLoopBackOff: { maxContainerRestartPeriod: "1m" }, // without the KubeletCrashLoopBackOffMax gate
  memoryManagerPolicy: "Static", // without reservedMemory
  reservedMemory: [{ numaNode: 0, limits: { cpu: "1" } }],
  topologyManagerPolicyOptions: { "align-by-socket": "true" },
  logging: { format: "json" },
  featureGates: { ContainerCheckpoint: false },
};
/** A value other than the default that those fields act on, where SAMPLE holds the refused one. */
const ACTED_VALUE: Partial<Record<FieldName, unknown>> = {
  containerLogMaxWorkers: 1,
  configMapAndSecretChangeDetectionStrategy: "Watch",
  enableControllerAttachDetach: true,
};

const HEAD = { apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration" };
const load = (fields: Record<string, unknown>, argv: string[] = []): ConfigResult =>
  loadConfig(["--config=/k.json", ...argv], {
    readFile: (p) => {
      if (p === "/k.json") return JSON.stringify({ ...HEAD, ...fields });
      throw Object.assign(new Error(`ENOENT: ${p}`), { code: "ENOENT" });
    },
    hostname: () => "n1",
    cwd: () => "/",
  });
const errorOf = (r: ConfigResult) => (r.kind === "error" ? r.message : `loaded (${r.kind})`);

// Fields every related sample needs to load beside it (upstream's cross-field checks).
const COMPANIONS: Partial<Record<FieldName, Record<string, unknown>>> = {
  tlsCertFile: { tlsPrivateKeyFile: "/pki/kubelet.key" },
  tlsPrivateKeyFile: { tlsCertFile: "/pki/kubelet.crt" },
  tlsMinVersion: {},
  cgroupsPerQOS: { enforceNodeAllocatable: [] },
  shutdownGracePeriodCriticalPods: { shutdownGracePeriod: "30s" },
  enableSystemLogQuery: { featureGates: { NodeLogQuery: true } },
  systemCgroups: { cgroupRoot: "/" },
  shutdownGracePeriodByPodPriority: {},
  imageGCLowThresholdPercent: {},
  cpuManagerPolicy: { reservedSystemCPUs: "0" },
  cpuManagerPolicyOptions: { cpuManagerPolicy: "static", reservedSystemCPUs: "0" },
  qosReserved: { featureGates: { QOSReserved: true } },
  crashLoopBackOff: { featureGates: { KubeletCrashLoopBackOffMax: true } },
  memoryManagerPolicy: { reservedMemory: [{ numaNode: 0, limits: { memory: "1Gi" } }] },
};

describe("the field table", () => {
  test("the schema has every upstream 1.34 field, and the table exactly the schema's fields", () => {
    expect(UPSTREAM_1_34.length).toBe(123);
    const schema = Object.keys(KubeletConfigurationFileSchema.entries).filter((k) => k !== "apiVersion" && k !== "kind");
    expect(UPSTREAM_1_34.filter((f) => !schema.includes(f))).toEqual([]);
    expect(Object.keys(SETTINGS).sort()).toEqual([...schema].sort());
    expect(Object.keys(SAMPLE).sort()).toEqual([...schema].sort());
  });

  test.each(Object.keys(SETTINGS) as FieldName[])("%s is acted on or refused by name", (field) => {
    const s = SETTINGS[field];
    const result = load({ [field]: SAMPLE[field], ...COMPANIONS[field] });
    const named = new RegExp(`^not acted on by this agent: field "${field}"`, "m");
    if (s.kind === "refused") {
      expect(s.why.length).toBeGreaterThan(10);
      expect(errorOf(result)).toMatch(named);
      return;
    }
    expect(s.where.length).toBeGreaterThan(5);
    if (field in REFUSED_VALUE) {
      expect(errorOf(load({ [field]: REFUSED_VALUE[field] }))).toMatch(named);
      const ok = field in ACTED_VALUE ? ACTED_VALUE[field] : SAMPLE[field];
      expect(errorOf(load({ [field]: ok, ...COMPANIONS[field] }))).toBe("loaded (run)");
    } else {
      expect(errorOf(result)).toBe("loaded (run)");
    }
  });

  test("an acted field is read by code outside src/config", () => {
    const sources: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const p = join(dir, name);
        if (statSync(p).isDirectory()) {
          if (name !== "config" && name !== "gen") walk(p);
        } else if (p.endsWith(".ts") && !p.endsWith(".test.ts")) sources.push(readFileSync(p, "utf8"));
      }
    };
    walk(new URL("..", import.meta.url).pathname);
    const all = sources.join("\n");
    // Acted on inside src/config itself: merged into evictionHard there; checked there; validated there, and
    // without other effect in upstream 1.34 too.
    const inConfig = new Set(["mergeDefaultEvictionSettings", "featureGates", "iptablesMasqueradeBit", "iptablesDropBit"]);
    const unread = (Object.keys(SETTINGS) as FieldName[]).filter(
      (f) => SETTINGS[f].kind === "acted" && !(SETTINGS[f] as { builtIn?: true }).builtIn && !inConfig.has(f) && !new RegExp(`\\b${f}\\b`).test(all),
    );
    expect(unread).toEqual([]);
    // A built-in value is only honest when every other value is refused.
    for (const s of Object.values(SETTINGS)) if (s.kind === "acted" && s.builtIn) expect(s.refuse).toBeDefined();
  });
});

describe("the flags", () => {
  test("every flag sets a field of the table, is refused, or is an acted flag-only setting", () => {
    const orphan = FLAGS.filter((f) => {
      if (f.refused) return false;
      if (f.field) return !(f.field.split(".")[0]! in SETTINGS);
      return !(f.name in FLAG_ONLY_ACTED);
    }).map((f) => f.name);
    expect(orphan).toEqual([]);
    expect(Object.keys(FLAG_ONLY_ACTED).filter((n) => !FLAGS.some((f) => f.name === n))).toEqual([]);
  });

  test.each(FLAGS.filter((f) => f.refused).map((f) => f.name))("--%s exits 2 unless given its default", (name) => {
    const def = FLAGS.find((f) => f.name === name)!;
    const value = def.type === "" ? "true" : def.type === "int32" ? "7" : def.type === "duration" ? "1m" : "/x";
    expect(errorOf(load({}, [`--${name}=${value}`]))).toContain(`flag --${name}: not acted on by this agent`);
  });

  test("a flag of a refused field is named with the field", () => {
    expect(errorOf(load({}, ["--volume-plugin-dir=/flex"]))).toContain('field "volumePluginDir" (--volume-plugin-dir): FlexVolume plugins are not supported');
  });

  test("--kubelet-cgroups and --system-cgroups load; systemCgroups needs cgroupRoot and is never the root, as upstream", () => {
    expect(errorOf(load({}, ["--kubelet-cgroups=/kube", "--system-cgroups=/system", "--cgroup-root=/"]))).toBe("loaded (run)");
    expect(errorOf(load({}, ["--system-cgroups=/system"]))).toContain('field "systemCgroups" (--system-cgroups): requires cgroupRoot (--cgroup-root) to be set');
    expect(errorOf(load({ systemCgroups: "/", cgroupRoot: "/" }))).toContain('field "systemCgroups" (--system-cgroups): system container cannot be root ("/")');
  });

  test("reserved levels of enforceNodeAllocatable need their cgroup named, as upstream's validation", () => {
    expect(errorOf(load({ enforceNodeAllocatable: ["pods", "system-reserved"] }))).toContain(
      'field "systemReservedCgroup" (--system-reserved-cgroup): must be specified when "system-reserved" is contained in enforceNodeAllocatable',
    );
    expect(errorOf(load({ enforceNodeAllocatable: ["kube-reserved-compressible"] }))).toContain(
      'field "kubeReservedCgroup" (--kube-reserved-cgroup): must be specified when "kube-reserved-compressible" is contained in enforceNodeAllocatable',
    );
    expect(errorOf(load({ enforceNodeAllocatable: ["pods", "system-reserved", "kube-reserved"], systemReservedCgroup: "/system.slice", kubeReservedCgroup: "/kube.slice" }))).toBe(
      "loaded (run)",
    );
    // static with nothing reserved: upstream's container manager refuses it; here it is refused at start.
    expect(errorOf(load({}, ["--cpu-manager-policy=static"]))).toContain("the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero");
    expect(errorOf(load({ kubeReserved: { cpu: "100m" } }, ["--cpu-manager-policy=static"]))).toBe("loaded (run)");
    expect(errorOf(load({}, ["--cpu-manager-policy=static", "--reserved-cpus=0"]))).toBe("loaded (run)");
    expect(errorOf(load({}, ["--cpu-manager-policy-options=full-pcpus-only=true"]))).toContain('policy options need the "static" policy');
    const cpuStatic = ["--cpu-manager-policy=static", "--reserved-cpus=0"];
    expect(errorOf(load({}, [...cpuStatic, "--cpu-manager-policy-options=distribute-cpus-across-numa=true", "--cpu-manager-policy-options=full-pcpus-only=true"]))).toBe(
      "loaded (run)",
    );
    expect(errorOf(load({ featureGates: { CPUManagerPolicyBetaOptions: false } }, [...cpuStatic, "--cpu-manager-policy-options=distribute-cpus-across-numa=true"]))).toContain(
      'CPU Manager Policy Beta-level Options not enabled, but option "distribute-cpus-across-numa" provided',
    );
    const alpha = { featureGates: { CPUManagerPolicyAlphaOptions: true } };
    expect(errorOf(load(alpha, [...cpuStatic, "--cpu-manager-policy-options=align-by-socket=true"]))).toBe("loaded (run)");
    expect(errorOf(load(alpha, [...cpuStatic, "--cpu-manager-policy-options=align-by-socket=true", "--topology-manager-policy=single-numa-node"]))).toContain(
      "Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option",
    );
    expect(errorOf(load(alpha, [...cpuStatic, "--cpu-manager-policy-options=distribute-cpus-across-cores=true"]))).toContain(
      '"distribute-cpus-across-cores": this CPU manager policy option is not implemented by this agent',
    );
    const gate = { featureGates: { QOSReserved: true } };
    expect(errorOf(load(gate, ["--qos-reserved=cpu=50%"]))).toContain('field "qosReserved" (--qos-reserved): cannot reserve "cpu" resource');
    expect(errorOf(load({ ...gate, qosReserved: { memory: "150%" } }))).toContain("failed to parse percentage");
    expect(errorOf(load({ ...gate, cgroupsPerQOS: false, enforceNodeAllocatable: [] }, ["--qos-reserved=memory=50%"]))).toContain("needs cgroupsPerQOS");
    expect(errorOf(load(gate, ["--qos-reserved=memory=50%"]))).toBe("loaded (run)");
  });

  test("iptablesMasqueradeBit and iptablesDropBit load as upstream 1.34 (deprecated, without effect), and only in 0..31", () => {
    const r = load({ iptablesMasqueradeBit: 13, iptablesDropBit: 16 });
    expect(r.kind === "run" ? [r.config.kubelet.iptablesMasqueradeBit, r.config.kubelet.iptablesDropBit, r.warnings] : errorOf(r)).toEqual([13, 16, []]);
    expect(errorOf(load({ iptablesMasqueradeBit: 32 }))).toContain("iptablesMasqueradeBit");
    expect(errorOf(load({ iptablesDropBit: -1 }))).toContain("iptablesDropBit");
  });

  test("--cloud-provider=external is refused", () => {
    expect(errorOf(load({}, ["--cloud-provider=external"]))).toContain("flag --cloud-provider: external cloud providers");
  });
});

describe("feature gates against 1.34's list", () => {
  test("the list is 1.34's: known defaults and stages", () => {
    expect(KNOWN_GATES.size).toBe(205);
    expect(KNOWN_GATES.get("PodLevelResources")).toEqual({ default: true, stage: "Beta", locked: false, kubelet: true });
    expect(KNOWN_GATES.get("UserNamespacesSupport")).toEqual({ default: true, stage: "Beta", locked: false, kubelet: true });
    expect(KNOWN_GATES.get("NodeSwap")).toEqual({ default: true, stage: "GA", locked: true, kubelet: true });
    expect(KNOWN_GATES.get("CustomCPUCFSQuotaPeriod")?.kubelet).toBe(true);
    for (const name of Object.keys(ACTED_GATES)) expect(KNOWN_GATES.get(name)?.kubelet).toBe(true);
  });

  test.each([
    [{ NoSuchGate: true }, "unrecognized feature gate: NoSuchGate"],
    [{ NodeSwap: false }, "cannot set feature gate NodeSwap to false, feature is locked to true"],
    [{ ContainerCheckpoint: false }, "feature gate ContainerCheckpoint=false: not implemented by this agent; only its 1.34 default (true) is supported"],
    [{ TopologyManagerPolicyAlphaOptions: true }, "feature gate TopologyManagerPolicyAlphaOptions=true: not implemented"],
    [{ AllAlpha: true }, "feature gate AllAlpha=true"],
  ])("%p exits 2: %s", (gates, message) => {
    expect(errorOf(load({ featureGates: gates }))).toContain(`field "featureGates" (--feature-gates): ${message}`);
    expect(
      errorOf(
        load({}, [
          `--feature-gates=${Object.entries(gates)
            .map(([k, v]) => `${k}=${v}`)
            .join(",")}`,
        ]),
      ),
    ).toContain(message);
  });

  test.each([
    [{ InPlacePodVerticalScaling: false }], // acted on
    [{ MemoryQoS: true }], // acted on
    [{ KubeletPSI: true }], // its default
    [{ KubeletPSI: false }], // acted on: no psi in the summary
    [{ APIResponseCompression: false }], // not read by a kubelet, upstream either
    [{ AllAlpha: false, AllBeta: false }],
  ])("%p loads", (gates) => {
    expect(errorOf(load({ featureGates: gates }))).toBe("loaded (run)");
  });
});

test("docs/configuration.md holds the generated settings table (bun scripts/config-docs.ts rewrites it)", () => {
  const doc = readFileSync(new URL("../../docs/configuration.md", import.meta.url), "utf8");
  const section = /<!-- BEGIN GENERATED SETTINGS[^\n]*-->\n([\s\S]*?)<!-- END GENERATED SETTINGS -->/.exec(doc);
  expect(section?.[1]).toBe(settingsMarkdown());
});

describe("crashLoopBackOff with KubeletCrashLoopBackOffMax, as upstream's validation", () => {
  test("set without the gate, unset with it (defaulted to 300s), in range 1s-300s", () => {
    expect(errorOf(load({ crashLoopBackOff: { maxContainerRestartPeriod: "1m" } }))).toContain(
      "invalid configuration: FeatureGate KubeletCrashLoopBackOffMax not enabled, CrashLoopBackOff.MaxContainerRestartPeriod must not be set",
    );
    expect(errorOf(load({ featureGates: { KubeletCrashLoopBackOffMax: true } }))).toBe("loaded (run)");
    expect(errorOf(load({ featureGates: { KubeletCrashLoopBackOffMax: true }, crashLoopBackOff: { maxContainerRestartPeriod: "500ms" } }))).toContain(
      "CrashLoopBackOff.MaxContainerRestartPeriod (got: 0.5 seconds) must be set between 1s and 300s",
    );
    expect(errorOf(load({ featureGates: { KubeletCrashLoopBackOffMax: true }, crashLoopBackOff: { maxContainerRestartPeriod: "6m" } }))).toContain("(got: 360 seconds)");
    expect(errorOf(load({ featureGates: { ReduceDefaultCrashLoopBackOffDecay: true } }))).toBe("loaded (run)");
  });
});
