/**
 * The whole agent on one page: builds every subsystem from the config and
 * runs until `signal` aborts. Stopping closes servers, stops the loop and
 * waits for in-flight pod work, and leaves pods running (an agent restart
 * adopts them).
 */
import { mkdirSync } from "node:fs";
import { posix } from "node:path";
import { parseQuantity, type AgentConfig } from "./config/index.ts";
import type { CriService } from "./cri/index.ts";
import { createKubeApi, type KubeApi } from "./api/index.ts";
import { admitPod } from "./node/admission.ts";
import { admitPodFeatures, appArmorEnabled } from "./node/pod-features.ts";
import { CSI_PLUGIN_TYPE, CsiDrivers, PluginWatcher } from "./csi/index.ts";
import { DeviceManager, servePodResources } from "./devices/index.ts";
import { renderVolumeStatsMetrics } from "./metrics/volume-stats.ts";
import { sysctlAllowlist } from "./node/sysctls.ts";
import { NodeController } from "./node/controller.ts";
import { allocatableAmounts, enforcedAllocatable, nodeFacts, reservedMilliCpu } from "./node/status.ts";
import { defaultRouteIPv4, goArch, readMachineInfo, type MachineInfo } from "./node/machine.ts";
import { readMachineSpec } from "./node/machine-spec.ts";
import { ApiEventRecorder, LogEventRecorder, podEventRef, type EventRecorder } from "./events/recorder.ts";
import { createEvictionManager, type EvictionManager } from "./eviction/index.ts";
import { createImageGC, statfsBytes } from "./images/index.ts";
import { containerdImageStore } from "./images/containerd/client.ts";
import { preloadImages } from "./images/preload.ts";
import { bootstrapClientCertificate, ClientCertificateRotation, csrApi, CURRENT_CLIENT_PEM, readUsableCertificate, type CsrApi } from "./certificates/client.ts";
import { certificateValidity } from "./certificates/x509.ts";
import { createLogRotation } from "./logs/index.ts";
import { createStatsCollector, type StatsCollector } from "./stats/index.ts";
import {
  chooseCgroupDriver,
  containerLinuxResources,
  containerSwapResources,
  createPodCgroups,
  detectCgroupLayout,
  nodeCgroupFs,
  readSwapHost,
  reservedEnforcements,
  type PodCgroups,
  type ReservedEnforcement,
} from "./cgroups/index.ts";
import { runtimeCgroupDriver } from "./runtime/cgroup-driver.ts";
import type { Pod } from "./pods/schema.ts";
import { EventedPleg } from "./pleg/evented.ts";
import { GenericPleg, type Pleg } from "./pleg/generic.ts";
import { createProbeManager } from "./prober/index.ts";
import { instrumentCri, KubeletMetrics } from "./metrics/kubelet.ts";
import { ProbeMetrics } from "./metrics/probes.ts";
import { resourceMetrics } from "./metrics/resource.ts";
import { LivenessRestarts, ProbeVerdicts } from "./prober/verdicts.ts";
import { Requests } from "./util/requests.ts";
import { MirrorPods } from "./mirror/index.ts";
import { cadvisorMetrics, machineFactsFromSpec } from "./metrics/cadvisor.ts";
import { podDirs } from "./pods/dirs.ts";
import { CriPodRuntime } from "./runtime/manager.ts";
import { PullQueue } from "./runtime/pull-queue.ts";
import { Backoff, crashLoopLimits } from "./runtime/backoff.ts";
import { readHostDns } from "./runtime/dns.ts";
import { healthzApp, syncLoopCheck } from "./server/healthz.ts";
import { readOnlyApp } from "./server/readonly.ts";
import { startKubeletServer } from "./server/wire.ts";
import { ApiServerSource } from "./sources/apiserver.ts";
import { offlineCheckpoint } from "./sources/pod-checkpoint.ts";
import { FileCheckpointStore } from "./checkpoint/index.ts";
import { AllocationManager } from "./allocation/index.ts";
import { createCpuManager, CpuManagerError, parseCpuSet, readCpuTopology, type CpuManager } from "./cpumanager/index.ts";
import { FileSource } from "./sources/file.ts";
import { UrlSource } from "./sources/url.ts";
import { PodConfig } from "./sources/podconfig.ts";
import type { PodSource } from "./sources/types.ts";
import { ApiStatusManager, reportedContainer } from "./status/api.ts";
import { isApiPod } from "./pods/source.ts";
import { LocalStatusStore, type StatusSink } from "./status/index.ts";
import { PodWorkers } from "./sync/podworkers.ts";
import { HostPodSyncer } from "./sync/pod-syncer.ts";
import { PodHost } from "./sync/pod-host.ts";
import { PodWorkersView } from "./sync/view.ts";
import { createVolumeManager } from "./volumes/wire.ts";
import type { Mounter } from "./volumes/mount.ts";
import { noServiceEnv, serviceEnvFrom, WatchedServices } from "./services/index.ts";
import { ApiRuntimeClasses, defaultRuntimeClasses } from "./runtimeclass/index.ts";
import { recordFirstSnapshots, runOnce, type RunOnceReport } from "./runonce/index.ts";
import { OomWatcher, tryOpenKmsg } from "./oom/index.ts";
import { NodeShutdownManager, shutdownGroups, type ShutdownTrigger } from "./shutdown/index.ts";
import { SyncLoop } from "./sync/syncloop.ts";
import { bunHeap, GcPacer, type Heap } from "./memory/gc-pacer.ts";
import { realClock, type Clock } from "./util/clock.ts";
import { StartupConfigError, errorMessage } from "./util/errors.ts";
import type { Logger } from "./util/log.ts";
import { podRef, podUid } from "./pods/identity.ts";
import { runtimeCounts } from "./pleg/counts.ts";
import type { ActivePods, PodStopper } from "./pods/active.ts";
import type { VolumeManager } from "./volumes/index.ts";
import type { PodObjects } from "./api/objects.ts";
import { RuntimePodsView } from "./pleg/view.ts";
import { sandboxImageOf, waitForRuntime } from "./cri/runtime-info.ts";
import { dedicatedImageFs } from "./images/imagefs.ts";
import { everyMs } from "./util/every.ts";
import { podCgroupHousekeeping } from "./cgroups/housekeeping.ts";
import { NodeRegistration } from "./node/registration.ts";

export interface AgentDeps {
  logger: Logger;
  signal: AbortSignal;
  /** `Kubernetes v1.34.0-bunlet+<build>`; the node reports the part after "Kubernetes ". */
  version?: string;
  clock?: Clock;
  /** Injected for tests; by default a gRPC client to the configured endpoint. */
  cri?: CriService;
  /** Injected for tests: the API server (cluster mode), instead of the one --kubeconfig names. */
  api?: KubeApi;
  /** Injected for tests: mounts for volumes (and the shared root directory); mount(8) by default. */
  mounter?: Mounter;
  /** What says the node is shutting down (main.ts: logind, or SIGTERM without systemd). */
  nodeShutdown?: ShutdownTrigger;
  /** Numbers in [0, 1) for jitter; Math.random by default. */
  random?: () => number;
  /** The JavaScript heap the GC pacer watches; Bun's by default. */
  heap?: Heap;
}

/** Runs until `signal` aborts; with runOnce, until the static pods run or fail, and returns their report. */
export async function runAgent(config: AgentConfig, deps: AgentDeps): Promise<RunOnceReport | undefined> {
  const { logger, signal } = deps;
  const clock = deps.clock ?? realClock;
  const k = config.kubelet;
  logger.info("starting node agent", { node: config.nodeName, mode: config.kubeconfig ? "cluster" : "standalone" });

  await using stack = new AsyncDisposableStack();
  mkdirSync(config.rootDir, { recursive: true, mode: 0o750 });
  // The CRI client, wrapped to time every call for the metrics (kubelet, resource, prober); the running pods and
  // containers they report are the PLEG's, which serves runtimePods once built. Image tarballs are preloaded.
  const runtimeConnection = await connectRuntime(stack, { config, cri: deps.cri, clock, logger, signal });
  if (!runtimeConnection) return undefined;
  const { cri, metrics, probeMetrics, runtimePods } = runtimeConnection;

  // Cluster mode: the API server is a pod source and the status sink, and the node registers. Run-once never talks to it (upstream).
  const cluster = config.runOnce
    ? undefined
    : deps.api
      ? injectedCluster(deps.api, deps.version)
      : config.kubeconfig
        ? await connectCluster(config, { clock, logger, version: deps.version, signal })
        : undefined;
  if (cluster?.rotation) stack.use(cluster.rotation).start();
  const hostIP = config.nodeIPs[0] ?? cluster?.internalIP;

  // The node's cgroups: the driver, kubepods and the QoS classes (cgroupsPerQOS), node allocatable on kubepods, swap.
  const { machine, podCgroups, podsCgroupParent, nodeAllocatable, swapHost } = await buildNodeCgroups({ config, cri, logger });
  const nodeId = { nodeName: config.nodeName, nodeIPs: config.nodeIPs, nodeLabels: config.nodeLabels, kubeletVersion: cluster?.kubeletVersion ?? "" };
  const facts = nodeFacts(nodeId, machine, k);
  const recorder = cluster
    ? new ApiEventRecorder({ api: cluster.api, nodeName: config.nodeName, qps: k.eventRecordQPS, burst: k.eventBurst, clock, logger })
    : new LogEventRecorder(logger);
  // Cluster mode: API copies of static pods, made once the node controller (built later) registered the Node
  // (its UID also owns CSINode); the prober reads mirrors' statuses.
  const nodeRegistration = new NodeRegistration();
  const mirrors = cluster ? new MirrorPods({ api: cluster.api, nodeName: config.nodeName, nodeUid: () => nodeRegistration.uid(), logger }) : undefined;
  // Probes: liveness and startup failures restart that container (through the pod workers, built later); readiness feeds the statuses.
  const { syncRequests, restarts, verdicts } = buildProber(stack, { cri, recorder, probeMetrics, mirrors, clock, logger });
  // Local checkpoints, offline autonomy, CSI drivers and the volume manager (with the configMaps and secrets pods reference).
  const { checkpoints, autonomy, csiDrivers, pluginWatcher, volumes, podObjects } = await buildVolumes(stack, {
    config,
    cluster,
    mounter: deps.mounter,
    nodeAllocatable,
    nodeLabels: facts.labels,
    nodeRegistration,
    recorder,
    clock,
    logger,
  });
  // In-place resize (InPlacePodVerticalScaling, on by default since 1.33): allocations checkpointed under rootDir/checkpoints.
  const allocation =
    k.featureGates["InPlacePodVerticalScaling"] === false
      ? undefined
      : new AllocationManager({
          store: checkpoints,
          logger,
          allocatable: () => ({ cpu: nodeAllocatable.cpu, memory: nodeAllocatable.memory }),
          admit: (pod, others) => admitPod(pod, others, facts),
        });
  const nodeStatusRequests = new Requests<void>(); // served by the node controller, when there is one
  const statuses = new LocalStatusStore();
  // Disposed after the pod workers (the stack unwinds in reverse): the last statuses they write get a short flush.
  const apiStatus = cluster
    ? stack.use(new ApiStatusManager({ api: cluster.api, hostIPs: () => (hostIP ? [hostIP] : []), clock, logger, local: statuses, mirrorOf: (pod) => mirrors?.mirrorOf(pod) }))
    : undefined;
  const statusSink = apiStatus ?? statuses;
  // Pod sources: static pods (file, URL) and, in cluster mode, the API server's pods for this node; their
  // merge (PodConfig) says when every source delivered, which the device manager and orphan cleanup wait for.
  const { sources, podConfig } = await buildPodSources(stack, { config, cri, cluster, mirrors, apiStatus, autonomy, clock, logger });
  // The pod workers are built last on the pod path (their admission asks eviction and shutdown); what the
  // subsystems built before them ask of them goes through this view, which the workers serve.
  const pods = new PodWorkersView();
  // The CPU manager (cpuManagerPolicy): exclusive CPUs for Guaranteed containers, kept in <rootDir>/cpu_manager_state.
  const cpuManager = stack.use(buildCpuManager({ config, cri, pods, podConfig, clock, logger }));
  // Device plugins register on <rootDir>/device-plugins/kubelet.sock; their devices are extended resources of the node.
  const devices = stack.use(
    new DeviceManager({
      dir: posix.join(config.rootDir, "device-plugins"),
      clock,
      logger,
      onChange: () => nodeStatusRequests.request(),
      sourcesReady: () => podConfig.allSourcesReady(),
      metrics,
    }),
  );
  await devices.start();
  // Service environment variables come from one watch of every Service (cluster mode only, as upstream).
  const services = cluster ? stack.use(new WatchedServices({ api: cluster.api, clock, logger })).start() : undefined;
  // The pods' host side (volumes, pod cgroups, pod files, log directories) and the runtime facade over the CRI.
  const { podHost, runtime, crashLoop } = buildPodRuntime({
    config,
    cri,
    cluster,
    hostIP,
    machine,
    nodeAllocatable,
    swapHost,
    podsCgroupParent,
    podCgroups,
    pods,
    volumes,
    podObjects,
    services,
    devices,
    cpuManager,
    restarts,
    verdicts,
    allocation,
    recorder,
    metrics,
    clock,
    logger,
  });

  // Node resources: stats every 10s feed eviction; images and logs are collected and rotated.
  const { stats, pauseImage, imageGC, logRotation, eviction } = await buildNodeResources(stack, {
    config,
    podsCgroupParent,
    podCgroups,
    pods,
    cri,
    volumes,
    recorder,
    containerGC: () => runtime.garbageCollect(),
    clock,
    logger,
  });
  // Graceful node shutdown: pods stop by priority group within their budgets when deps.nodeShutdown says so.
  const nodeShutdown = buildNodeShutdown({ config, trigger: deps.nodeShutdown, pods, recorder, nodeStatusRequests, clock, logger });
  // Admission (node shutdown, pressure, sysctls, pod features, devices, CPUs, resources), the pod syncer,
  // the pod workers that serve `pods`, and the PLEG that wakes them.
  const { workers, pleg } = buildPodWorkers(stack, {
    config,
    cri,
    facts,
    nodeShutdown,
    eviction,
    devices,
    cpuManager,
    allocation,
    runtime,
    podHost,
    statusSink,
    verdicts,
    syncRequests,
    pods,
    runtimePods,
    metrics,
    recorder,
    random: deps.random ?? Math.random,
    clock,
    logger,
  });
  // The pod resources API (v1) on <rootDir>/pod-resources/kubelet.sock: which devices each container holds.
  const podResources = await servePodResources({
    dir: posix.join(config.rootDir, "pod-resources"),
    devices,
    pods: workers,
    getEnabled: k.featureGates["KubeletPodResourcesGet"] !== false, // beta, on by default since 1.34
    logger,
  });
  stack.defer(() => podResources.close());
  // Kernel OOM kills as events (upstream's OOM watcher): SystemOOM on the node, OOMKilling on this node's pods.
  if (!config.runOnce) startOomWatcher(stack, { config, statuses, recorder, clock, logger });
  // Cluster mode: the Node object, its status and its Lease.
  if (cluster && config.registerNode) {
    startNodeController(stack, {
      config,
      api: cluster.api,
      cri,
      nodeId,
      machine,
      hostIP,
      pleg,
      eviction,
      nodeShutdown,
      devices,
      nodeStatusRequests,
      nodeRegistration,
      csiDrivers,
      recorder,
      clock,
      logger,
    });
  }
  await pluginWatcher.start();
  const once = config.runOnce ? recordFirstSnapshots(sources, { clock }) : undefined;
  const syncLoop = stack.use(
    new SyncLoop({
      sources: once?.sources ?? sources,
      removeOrphans: !once,
      podConfig,
      workers,
      pleg,
      runtime,
      backoff: crashLoop,
      clock,
      logger,
      ...(mirrors ? { mirrors } : {}),
      housekeepingTasks: housekeepingTasks({ clock, logger, heap: deps.heap ?? bunHeap, podCgroups, workers, pleg, podConfig, volumes, allocation, devices }),
    }),
  );

  const health = healthzApp([
    { name: "ping", check: () => ({ ok: true }) },
    { name: "log", check: () => ({ ok: true }) },
    syncLoopCheck({ lastIteration: () => syncLoop.lastIteration(), pleg: () => pleg.healthy(), now: () => clock.now(), thresholdMs: 2 * k.syncFrequency + 60_000 }),
  ]);
  cpuManager.start();
  if (once) {
    syncLoop.start();
    const pods = await once.firstPods().catch((err: unknown) => errorMessage(err));
    if (typeof pods === "string") return { results: [], error: pods };
    const report = await runOnce({ pods, status: (uid) => statuses.get(uid), clock, logger, signal });
    logger.info("run-once finished; pods keep running", { pods: report.results.length, failed: report.results.filter((r) => !r.ok).length });
    return report;
  }
  await startServers(stack, { config, cluster, hostIP, health, statuses, stats, cri, metrics, probeMetrics, pauseImage, machine, clock, logger });

  syncLoop.start();
  stats.start(10_000);
  imageGC.start();
  logRotation.start(k.containerLogMonitorInterval);
  eviction.start(10_000);
  logger.info("syncLoop started", { staticPodPath: k.staticPodPath || "(none)" });
  await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
  logger.info("stopping node agent; pods keep running");
  return undefined;
}

/** The pod sources (static files, URL, the API server's pods for this node) and their merge, each source disposed with the stack. */
async function buildPodSources(
  stack: AsyncDisposableStack,
  o: {
    config: AgentConfig;
    cri: CriService;
    cluster: Cluster | undefined;
    mirrors: MirrorPods | undefined;
    apiStatus: ApiStatusManager | undefined;
    autonomy: ReturnType<typeof offlineCheckpoint>;
    clock: Clock;
    logger: Logger;
  },
): Promise<{ sources: PodSource[]; podConfig: PodConfig }> {
  const { config, cri, cluster, mirrors, apiStatus, autonomy, clock, logger } = o;
  const k = config.kubelet;
  const sources: PodSource[] = [];
  // The pods the runtime has at startup: a static pod running under the UID this agent computed before it
  // computed the upstream kubelet's keeps it (sources/defaults.ts staticPodUid), so an upgrade restarts nothing.
  const runtimePodUids: ReadonlySet<string> | undefined =
    k.staticPodPath || k.staticPodURL
      ? await cri.listPodSandbox().then(
          (sandboxes) => new Set(sandboxes.map((s) => s.metadata?.uid ?? "").filter((uid) => uid !== "")),
          (err: unknown) => {
            logger.warn("could not list the runtime's pods; static pods get the upstream kubelet's UIDs", { err });
            return undefined;
          },
        )
      : undefined;
  if (k.staticPodPath) {
    sources.push(stack.use(new FileSource({ path: k.staticPodPath, nodeName: config.nodeName, checkFrequencyMs: k.fileCheckFrequency, clock, logger, runtimePodUids })));
  }
  if (k.staticPodURL) {
    sources.push(
      stack.use(
        new UrlSource({ url: k.staticPodURL, headers: k.staticPodURLHeader, nodeName: config.nodeName, checkFrequencyMs: k.httpCheckFrequency, clock, logger, runtimePodUids }),
      ),
    );
  }
  if (cluster) {
    sources.push(
      stack.use(
        new ApiServerSource({
          api: cluster.api,
          nodeName: config.nodeName,
          clock,
          logger,
          onMirrorPods: (pods) => (mirrors?.observe(pods), apiStatus?.mirrorsChanged()),
          ...(autonomy ? { checkpoint: autonomy } : {}),
        }),
      ),
    );
  }
  const podConfig = new PodConfig(sources.map((s) => s.name));
  return { sources, podConfig };
}

/** The CPU manager (cpuManagerPolicy): exclusive CPUs for Guaranteed containers, kept in <rootDir>/cpu_manager_state. */
function buildCpuManager(o: { config: AgentConfig; cri: CriService; pods: ActivePods; podConfig: Pick<PodConfig, "allSourcesReady">; clock: Clock; logger: Logger }): CpuManager {
  const { config, cri, pods, podConfig, clock, logger } = o;
  const k = config.kubelet;
  try {
    return createCpuManager({
      rootDir: config.rootDir,
      policy: k.cpuManagerPolicy === "static" ? "static" : "none",
      policyOptions: k.cpuManagerPolicyOptions,
      topology: k.cpuManagerPolicy === "static" ? readCpuTopology("/sys") : { cpus: [] },
      reservedSystemCpus: parseCpuSet(k.reservedSystemCPUs),
      reservedMilliCpu: reservedMilliCpu(k),
      cri,
      pods,
      sourcesReady: () => podConfig.allSourcesReady(),
      reconcilePeriodMs: k.cpuManagerReconcilePeriod,
      clock,
      logger,
    });
  } catch (err) {
    // upstream: the container manager fails and the kubelet does not start.
    if (err instanceof CpuManagerError) throw new Error(`failed to initialize the CPU manager: ${err.message}`);
    throw err;
  }
}

/**
 * The pod's host side (volumes, the pod cgroup with the QoS totals, pod files,
 * log directories) and the runtime facade over the CRI, with where its
 * sandbox and container configs come from and what decides a start; the
 * crash-loop backoff is also the syncLoop's (housekeeping forgets old entries).
 */
function buildPodRuntime(o: {
  config: AgentConfig;
  cri: CriService;
  cluster: Cluster | undefined;
  hostIP: string | undefined;
  machine: MachineInfo;
  nodeAllocatable: ReturnType<typeof allocatableAmounts>;
  swapHost: ReturnType<typeof readSwapHost>;
  podsCgroupParent: string;
  podCgroups: PodCgroups | undefined;
  pods: ActivePods;
  volumes: VolumeManager;
  podObjects: PodObjects;
  services: WatchedServices | undefined;
  devices: DeviceManager;
  cpuManager: Pick<CpuManager, "cpusetFor">;
  restarts: LivenessRestarts;
  verdicts: Pick<ProbeVerdicts, "isStarted">;
  allocation: AllocationManager | undefined;
  recorder: EventRecorder;
  metrics: KubeletMetrics;
  clock: Clock;
  logger: Logger;
}): { podHost: PodHost; runtime: CriPodRuntime; crashLoop: Backoff } {
  const { config, cri, cluster, hostIP, machine, nodeAllocatable, swapHost, podsCgroupParent, podCgroups, pods, volumes, podObjects, services, devices, cpuManager } = o;
  // MemoryQoS (alpha gate) acts on cgroup v2 only, as upstream's enforceMemoryQoS.
  const memoryQoS = config.kubelet.featureGates["MemoryQoS"] === true && swapHost.cgroupVersion === "v2";
  const { restarts, verdicts, allocation, recorder, metrics, clock, logger } = o;
  const k = config.kubelet;
  // The pods' host side: volumes, pod cgroups, pod files and log directories (set up and torn down by the pod syncer).
  const podHost = new PodHost({
    podLogsDir: k.podLogsDir,
    podsCgroupParent,
    clusterDomain: k.clusterDomain,
    recorder,
    volumes,
    podDirs: podDirs(config.rootDir),
    ...(podCgroups
      ? {
          cgroups: {
            // Upstream syncPod: QoS totals first, so the new pod's share is counted, then the pod's own cgroup.
            ensurePod: async (pod: Pod): Promise<string> => {
              // The pod counts once: it is among the active pods from its second sync on.
              await podCgroups.updateQos([...pods.activePods().filter((p) => podUid(p) !== podUid(pod)), pod]);
              return podCgroups.ensurePod(pod);
            },
            removePod: (uid: string) => podCgroups.removePod(uid),
          },
        }
      : {}),
  });
  // The runtime facade: the CRI, where sandbox and container configs come from, and what decides a start.
  const crashLoop = Backoff.crashLoop(
    clock,
    crashLoopLimits({
      reducedDecay: k.featureGates["ReduceDefaultCrashLoopBackOffDecay"] === true,
      // Set (defaulted to 300 s) only with the KubeletCrashLoopBackOffMax gate; validated in config/settings.ts.
      maxContainerRestartPeriodMs: k.featureGates["KubeletCrashLoopBackOffMax"] === true ? k.crashLoopBackOff.maxContainerRestartPeriod : undefined,
    }),
  );
  const runtime = new CriPodRuntime({
    cri,
    clock,
    logger,
    recorder,
    metrics,
    host: podHost,
    config: {
      node: {
        podLogsDir: k.podLogsDir,
        podsCgroupParent,
        hostDns: readHostDns(k.resolvConf, logger),
        resolvConfDisabled: k.resolvConf === "",
        clusterDns: k.clusterDNS,
        clusterDomain: k.clusterDomain,
        seccompProfileRoot: posix.join(config.rootDir, "seccomp"),
        seccompDefault: k.seccompDefault,
      },
      hostIP,
      resources: (pod, container) => {
        const cpusetCpus = cpuManager.cpusetFor(pod, container);
        const base = containerLinuxResources(pod, container, {
          memoryCapacityBytes: machine.memoryBytes,
          cpuCFSQuota: k.cpuCFSQuota,
          cpuCFSQuotaPeriodUs: k.cpuCFSQuotaPeriod * 1000,
          // Upstream's default on cgroup v2: an OOM kill takes the whole container (singleProcessOOMKill: true opts out).
          oomGroup: swapHost.cgroupVersion === "v2" && k.singleProcessOOMKill !== true,
          // MemoryQoS on cgroup v2 only (upstream's enforceMemoryQoS): memory.min and memory.high in the unified map.
          ...(memoryQoS ? { memoryQoS: { throttlingFactor: k.memoryThrottlingFactor, allocatableMemoryBytes: nodeAllocatable.memory } } : {}),
        });
        const swap = containerSwapResources(k.memorySwap.swapBehavior, pod, container, base.memoryLimitInBytes, swapHost);
        const unified = { ...base.unified, ...swap.unified };
        return {
          ...base,
          ...(cpusetCpus ? { cpusetCpus } : {}),
          ...swap,
          ...(Object.keys(unified).length > 0 ? { unified } : {}),
        };
      },
      podObjects, // env references and pull secrets read the same watched cache as volumes
      nodeAllocatable: () => ({ cpuMilli: nodeAllocatable.cpu, memoryBytes: nodeAllocatable.memory, ephemeralStorageBytes: nodeAllocatable["ephemeral-storage"] }),
      serviceEnv: services ? serviceEnvFrom(services) : noServiceEnv,
      runtimeClasses: cluster ? new ApiRuntimeClasses({ api: cluster.api, clock }) : defaultRuntimeClasses,
      devices,
    },
    start: {
      crashLoop,
      imagePulls: Backoff.crashLoop(clock),
      pullQueue: PullQueue.fromConfig(k.serializeImagePulls, k.maxParallelImagePulls, { qps: k.registryPullQPS, burst: k.registryBurst, now: () => clock.now() }),
      unhealthy: (uid) => restarts.unhealthy(uid),
      started: (uid, name, id) => verdicts.isStarted(uid, name, id),
      resize: allocation,
    },
  });
  return { podHost, runtime, crashLoop };
}

/**
 * Admission (node shutdown, pressure, sysctls, pod features, devices, CPUs,
 * then the resource predicates, as upstream), the pod syncer, the pod
 * workers (which serve `pods` and the prober's sync requests) and the PLEG
 * that wakes them, each disposed with the stack.
 */
function buildPodWorkers(
  stack: AsyncDisposableStack,
  o: {
    config: AgentConfig;
    cri: CriService;
    facts: ReturnType<typeof nodeFacts>;
    nodeShutdown: NodeShutdownManager | undefined;
    eviction: Pick<EvictionManager, "admitPod">;
    devices: DeviceManager;
    cpuManager: Pick<CpuManager, "admit">;
    allocation: AllocationManager | undefined;
    runtime: CriPodRuntime;
    podHost: PodHost;
    statusSink: StatusSink;
    verdicts: ProbeVerdicts;
    syncRequests: Requests<string>;
    pods: PodWorkersView;
    runtimePods: RuntimePodsView;
    metrics: KubeletMetrics;
    recorder: EventRecorder;
    random: () => number;
    clock: Clock;
    logger: Logger;
  },
): { workers: PodWorkers; pleg: Pleg } {
  const { config, cri, facts, nodeShutdown, eviction, devices, cpuManager, allocation, runtime, podHost, statusSink, verdicts, syncRequests, pods, runtimePods } = o;
  const { metrics, recorder, random, clock, logger } = o;
  const k = config.kubelet;
  // Admission: node shutdown, then eviction (pods under pressure), sysctls, devices, then the resource checks, as upstream.
  const sysctls = sysctlAllowlist(k.allowedUnsafeSysctls);
  const podFeatureGates = {
    podLevelResources: k.featureGates["PodLevelResources"] !== false,
    userNamespacesSupport: k.featureGates["UserNamespacesSupport"] !== false,
    appArmorEnabled: appArmorEnabled(),
  };
  const admit = (pod: Pod, active: Pod[]) => {
    const shuttingDown = nodeShutdown?.admit();
    if (shuttingDown && !shuttingDown.admit) return shuttingDown;
    const underPressure = eviction.admitPod(pod);
    if (!underPressure.admit) return underPressure;
    const sysctlResult = sysctls.admit(pod);
    if (!sysctlResult.admit) return sysctlResult;
    // What the node cannot give (pod-level resources, a user namespace) is refused, never run without (node/pod-features.ts).
    const features = admitPodFeatures(pod, podFeatureGates);
    if (!features.admit) return features;
    // Devices before the resource predicates, as upstream's allocate-resources admit handler.
    const deviceResult = devices.admit(pod, active);
    if (!deviceResult.admit) return deviceResult;
    // A pod counts with what it was allocated (checkpointed; active pods come allocated), not with a resize it
    // asked for: after a restart, a pod whose resize is pending is admitted again as it runs (upstream).
    const allocated = (p: Pod) => (allocation ? allocation.allocatedPod(p) : p);
    // Exclusive CPUs after devices, as upstream's topology manager asks its hint providers.
    const cpuResult = cpuManager.admit(allocated(pod), active);
    if (!cpuResult.admit) return cpuResult;
    return admitPod(allocated(pod), active, facts);
  };
  const syncer = new HostPodSyncer({ runtime, host: podHost, status: statusSink, clock, logger, recorder, probes: verdicts, metrics, ...(allocation ? { allocation } : {}) });
  const workers: PodWorkers = stack.use(new PodWorkers({ syncer, clock, logger, resyncIntervalMs: k.syncFrequency, random, admit, requests: syncRequests, view: pods, metrics }));
  // Container events where the runtime streams them (falls back to relisting by itself where it does not);
  // featureGates EventedPLEG=false keeps the one-second relist only.
  const onRelist = (duration: number, interval: number | undefined) => metrics.plegRelist(duration, interval);
  const pleg: Pleg = stack.use(
    k.featureGates["EventedPLEG"] === false
      ? new GenericPleg({ runtime, clock, logger, onRelist, view: runtimePods })
      : new EventedPleg({ runtime, cri, clock, logger, onRelist, view: runtimePods }),
  );
  return { workers, pleg };
}

/**
 * The node's cgroups: the driver (the runtime's, where it answers through CRI
 * RuntimeConfig, else the config's; disagreeing with one set explicitly
 * exits 2), with cgroupsPerQOS kubepods, kubepods/burstable,
 * kubepods/besteffort and one cgroup per pod under cgroupRoot (systemd:
 * transient slices), node allocatable enforced on kubepods, and the host's
 * swap for containers.
 */
async function buildNodeCgroups(o: { config: AgentConfig; cri: CriService; logger: Logger }) {
  const { config, cri, logger } = o;
  const k = config.kubelet;
  const cgroupDriver = chooseCgroupDriver({
    configured: k.cgroupDriver === "systemd" ? "systemd" : "cgroupfs",
    explicit: config.cgroupDriverSet ?? false,
    runtime: await runtimeCgroupDriver(cri),
  });
  logger.info("cgroup driver", { driver: cgroupDriver.driver, from: cgroupDriver.source });
  if (cgroupDriver.driver === "systemd" && !k.cgroupsPerQOS) {
    throw new StartupConfigError(
      `cgroupDriver systemd (${cgroupDriver.source === "runtime" ? "reported by the container runtime" : "configured"}) needs cgroupsPerQOS: true: pods are placed in the kubepods.slice hierarchy the agent creates through systemd`,
    );
  }
  // cgroupsPerQOS: kubepods, kubepods/burstable, kubepods/besteffort and one cgroup per pod under cgroupRoot
  // (systemd: kubepods.slice, kubepods-burstable.slice, ... made by systemd as transient slices).
  const machine = readMachineInfo({ rootDir: config.rootDir });
  const podCgroups = k.cgroupsPerQOS
    ? createPodCgroups({
        driver: cgroupDriver.driver,
        cgroupRoot: k.cgroupRoot || "/",
        podPidsLimit: k.podPidsLimit,
        cpuCFSQuota: k.cpuCFSQuota,
        cpuCFSQuotaPeriodMs: k.cpuCFSQuotaPeriod,
        memoryQoS: k.featureGates["MemoryQoS"] === true, // upstream's alpha gate: memory.min on cgroup v2 (the writer checks the version)
        // qosReserved (checked at start: memory only, with the QOSReserved gate): burstable and besteffort memory limits.
        ...(k.qosReserved["memory"] ? { qosReservedMemoryPercent: Number.parseInt(k.qosReserved["memory"], 10) } : {}),
        logger,
      })
    : undefined;
  const podsCgroupParent = podCgroups ? podCgroups.kubepods : k.cgroupRoot;
  const nodeAllocatable = allocatableAmounts(machine, k);
  // kubepods gets capacity − reserved (upstream): the hard eviction threshold stays usable by pods until eviction acts.
  const enforced = enforcedAllocatable(machine, k);
  await podCgroups?.setupNode({
    allocatable: { cpuMilli: enforced.cpu, memoryBytes: enforced.memory },
    enforce: k.enforceNodeAllocatable.includes("pods"),
  });
  // enforceNodeAllocatable system-reserved / kube-reserved (and -compressible): the reserved amounts become limits on
  // those existing cgroups (upstream's enforceExistingCgroup); one that cannot be written stops the start.
  if (podCgroups) {
    const memoryQoSGate = k.featureGates["MemoryQoS"] === true && podCgroups.version === "v2";
    let enforcements: ReservedEnforcement[];
    try {
      enforcements = reservedEnforcements(k, memoryQoSGate);
    } catch (err) {
      throw new StartupConfigError(`enforceNodeAllocatable: ${errorMessage(err)}`);
    }
    for (const e of enforcements) {
      try {
        const path = await podCgroups.enforceExisting(e.cgroup, e.config);
        logger.info("enforced reserved limits on cgroup", { level: e.level, [e.field]: e.cgroup, path, ...e.config });
      } catch (err) {
        throw new StartupConfigError(
          `${e.field} ${JSON.stringify(e.cgroup)}: failed to enforce the ${JSON.stringify(e.level)} limits of enforceNodeAllocatable: ${errorMessage(err)}`,
        );
      }
    }
  }
  // Swap for containers (memorySwap.swapBehavior), as upstream: NoSwap unless LimitedSwap on cgroup v2 (cgroups/swap.ts).
  const swapHost = readSwapHost(detectCgroupLayout("/", nodeCgroupFs).version, machine.memoryBytes);
  if (k.memorySwap.swapBehavior === "LimitedSwap" && swapHost.cgroupVersion === "v1")
    logger.warn("memorySwap.swapBehavior LimitedSwap needs cgroup v2: on this cgroup v1 host every container gets NoSwap (memory+swap limit = memory limit), as upstream");
  else if (k.memorySwap.swapBehavior === "LimitedSwap" && !swapHost.swapController)
    logger.warn("memorySwap.swapBehavior LimitedSwap: the kernel has no swap controller (memory.swap.max); no swap limit is written, as upstream");
  return { machine, podCgroups, podsCgroupParent, nodeAllocatable, swapHost };
}

/** What housekeeping runs besides the syncLoop's own (orphans, mirror pods, GC): heap pacing, pod cgroups, orphaned pod directories. */
function housekeepingTasks(o: {
  clock: Clock;
  logger: Logger;
  heap: Heap;
  podCgroups: PodCgroups | undefined;
  workers: PodWorkers;
  pleg: Pleg;
  podConfig: PodConfig;
  volumes: Pick<VolumeManager, "cleanupOrphans">;
  allocation: AllocationManager | undefined;
  devices: Pick<DeviceManager, "removeOrphans">;
}): (() => void)[] {
  const { clock, logger, podCgroups, workers, pleg, podConfig, volumes, allocation, devices } = o;
  // Garbage is collected by heap growth, as Go's GOGC does, not by the machine's RAM (memory/gc-pacer.ts).
  const gcPacer = new GcPacer({ heap: o.heap, clock, logger });
  return [
    () => gcPacer.tick(),
    ...(podCgroups ? [everyMs(60_000, clock, () => podCgroupHousekeeping(podCgroups, workers, pleg, logger))] : []),
    // Directories (and mounts) of pods gone from the agent and the runtime, as upstream cleanupOrphanedPodDirs.
    // Only once every source delivered its pods: a restarted node must not lose emptyDirs of pods still loading.
    everyMs(60_000, clock, async () => {
      if (!pleg.hasRelisted() || !podConfig.allSourcesReady()) return;
      const known = new Set([...pleg.runtimePods().map((p) => p.uid), ...podConfig.desiredPods().map((p) => podUid(p))]);
      await volumes.cleanupOrphans((uid) => workers.has(uid) || known.has(uid));
      allocation?.removeOrphans((uid) => workers.has(uid) || known.has(uid));
      devices.removeOrphans((uid) => workers.has(uid) || known.has(uid));
    }),
  ];
}

/**
 * The CRI client (deps.cri in tests), wrapped to time every call for the
 * kubelet metrics, once the runtime answers; undefined when the agent was
 * stopped meanwhile. The metrics' running pods and containers are the
 * PLEG's, which serves `runtimePods` once built. On air-gapped nodes, image
 * tarballs go into the runtime before any pod can ask for them.
 */
async function connectRuntime(stack: AsyncDisposableStack, o: { config: AgentConfig; cri: CriService | undefined; clock: Clock; logger: Logger; signal: AbortSignal }) {
  const { config, clock, logger, signal } = o;
  const k = config.kubelet;
  const rawCri =
    o.cri ??
    (await import("./cri/client.ts")).createCriClient({
      endpoint: k.containerRuntimeEndpoint,
      ...(k.imageServiceEndpoint ? { imageEndpoint: k.imageServiceEndpoint } : {}),
      requestTimeoutMs: k.runtimeRequestTimeout,
      logger,
    });
  stack.defer(() => rawCri.close());
  const runtimePods = new RuntimePodsView();
  const metrics = new KubeletMetrics({ nodeName: config.nodeName, processStartMs: clock.now(), runtimeCounts: () => runtimeCounts(runtimePods.runtimePods()) });
  const probeMetrics = new ProbeMetrics();
  const cri = instrumentCri(rawCri, metrics, () => clock.now());
  await waitForRuntime(cri, { clock, logger, signal });
  if (signal.aborted) return undefined;
  if (k.imagePreloadDir) {
    const store = containerdImageStore(k.imageServiceEndpoint || k.containerRuntimeEndpoint);
    try {
      await preloadImages(k.imagePreloadDir, store, logger);
    } finally {
      store.close();
    }
  }
  return { cri, metrics, probeMetrics, runtimePods };
}

/** Graceful node shutdown, when shutdownGracePeriodByPodPriority (or its short form) gives groups and something says the node shuts down. */
function buildNodeShutdown(o: {
  config: AgentConfig;
  trigger: ShutdownTrigger | undefined;
  pods: ActivePods & PodStopper;
  recorder: EventRecorder;
  nodeStatusRequests: Requests<void>;
  clock: Clock;
  logger: Logger;
}): NodeShutdownManager | undefined {
  const { config, pods, recorder, nodeStatusRequests, clock, logger } = o;
  const k = config.kubelet;
  const groups = shutdownGroups(k);
  const shutdownTrigger = groups.length ? o.trigger : undefined;
  const nodeShutdown = shutdownTrigger
    ? new NodeShutdownManager({
        groups,
        pods,
        clock,
        logger,
        recorder,
        nodeName: config.nodeName,
        nodeStatusChanged: () => nodeStatusRequests.request(),
      })
    : undefined;
  if (nodeShutdown && shutdownTrigger) {
    shutdownTrigger.onShutdown(
      () => nodeShutdown.shutdown(),
      () => nodeShutdown.cancel(),
    );
  }
  return nodeShutdown;
}

/**
 * The prober: liveness and startup failures restart that container, readiness
 * feeds the statuses. It is built before the pod workers: the syncs it asks
 * for go through `syncRequests`, which the workers serve.
 */
function buildProber(
  stack: AsyncDisposableStack,
  o: { cri: CriService; recorder: EventRecorder; probeMetrics: ProbeMetrics; mirrors: MirrorPods | undefined; clock: Clock; logger: Logger },
) {
  const { cri, recorder, probeMetrics, mirrors, clock, logger } = o;
  const syncRequests = new Requests<string>();
  const restarts = new LivenessRestarts((uid) => syncRequests.request(uid));
  const prober = stack.use(
    createProbeManager({
      cri,
      clock,
      logger,
      recorder,
      onLivenessFailure: (uid, name, message, gracePeriodSeconds) => restarts.livenessFailed(uid, name, message, gracePeriodSeconds),
      onChange: (uid) => syncRequests.request(uid),
      onProbed: (run) => probeMetrics.observe(run),
      onPodRemoved: (uid) => probeMetrics.forgetPod(uid),
      // What the kubelet before this one (upstream, or this agent before a restart) reported: a ready pod stays Ready.
      lastReported: (pod, name, id) => reportedContainer(isApiPod(pod) ? pod.status : mirrors?.mirrorOf(pod)?.status, name, id),
    }),
  );
  const verdicts = new ProbeVerdicts(prober, restarts);
  return { syncRequests, restarts, verdicts };
}

/**
 * Volumes: the local checkpoint store (one node key for what is encrypted:
 * <rootDir>/checkpoints), offline autonomy's checkpoints of API pods and what
 * they reference (cluster mode), the CSI plugin watcher (started once the
 * node controller has), and the volume manager below <rootDir>/pods with the
 * configMaps and secrets pods reference.
 */
async function buildVolumes(
  stack: AsyncDisposableStack,
  o: {
    config: AgentConfig;
    cluster: Cluster | undefined;
    mounter: Mounter | undefined;
    nodeAllocatable: ReturnType<typeof allocatableAmounts>;
    nodeLabels: Record<string, string>;
    nodeRegistration: NodeRegistration;
    /** Events of the volume plugins (CSI node expansion). */
    recorder: EventRecorder;
    clock: Clock;
    logger: Logger;
  },
) {
  const { config, cluster, mounter, nodeAllocatable, nodeLabels, nodeRegistration, recorder, clock, logger } = o;
  const k = config.kubelet;
  // configMaps and secrets pods reference (watched in cluster mode), and their volumes below rootDir/pods.
  // Offline autonomy (cluster mode): API pods, and the objects and tokens they reference, checkpointed locally.
  // One store for every local checkpoint (one node key for what is encrypted): <rootDir>/checkpoints.
  const checkpoints = new FileCheckpointStore({ dir: posix.join(config.rootDir, "checkpoints"), clock, logger });
  const autonomy = cluster ? offlineCheckpoint(k.offlineAutonomy, checkpoints, logger) : undefined;
  // CSI drivers register through <rootDir>/plugins_registry (node-driver-registrar); the watcher starts once the node controller has.
  const csiDrivers = new CsiDrivers({ nodeName: config.nodeName, ...(cluster ? { api: cluster.api } : {}), nodeUid: () => nodeRegistration.uid(), clock, logger });
  stack.defer(() => csiDrivers.close());
  const pluginWatcher = stack.use(new PluginWatcher({ dir: posix.join(config.rootDir, "plugins_registry"), handlers: { [CSI_PLUGIN_TYPE]: csiDrivers }, clock, logger }));
  const { volumes, podObjects } = stack.use(
    await createVolumeManager({
      rootDir: config.rootDir,
      ...(mounter ? { mounter } : {}),
      ...(cluster ? { api: cluster.api } : {}),
      ...(autonomy ? { checkpoint: { ...autonomy, clock, logger } } : {}),
      allocatable: nodeAllocatable,
      nodeIdentity: { name: config.nodeName, labels: nodeLabels },
      csi: { drivers: csiDrivers, controllerAttachDetach: k.enableControllerAttachDetach },
      recorder,
      clock,
      logger,
    }),
  );
  return { checkpoints, autonomy, csiDrivers, pluginWatcher, volumes, podObjects };
}

/** Kernel OOM kills as events (upstream's OOM watcher): SystemOOM on the node, OOMKilling on this node's pods; none where /dev/kmsg cannot be read. */
function startOomWatcher(
  stack: AsyncDisposableStack,
  o: { config: AgentConfig; statuses: Pick<LocalStatusStore, "list">; recorder: EventRecorder; clock: Clock; logger: Logger },
): void {
  const { config, statuses, recorder, clock, logger } = o;
  const kernelLog = tryOpenKmsg(logger);
  if (!kernelLog) return;
  // Any pod with a status here, not only active ones: a pod whose only container was killed may be terminal by the next poll.
  const knownRef = (uid: string) => {
    const entry = statuses.list().find(({ pod }) => pod.metadata.uid === uid);
    return entry ? podEventRef(entry.pod) : undefined;
  };
  stack.use(new OomWatcher({ kernelLog, recorder, nodeName: config.nodeName, podRef: knownRef, clock, logger })).start();
}

/** Cluster mode: the Node object (registered, its status every 10 s, sent on change or every 5 min) and its Lease. */
function startNodeController(
  stack: AsyncDisposableStack,
  o: {
    config: AgentConfig;
    api: KubeApi;
    cri: CriService;
    nodeId: Parameters<typeof nodeFacts>[0];
    machine: MachineInfo;
    hostIP: string | undefined;
    pleg: Pick<Pleg, "healthy">;
    eviction: Pick<EvictionManager, "conditions">;
    nodeShutdown: NodeShutdownManager | undefined;
    devices: Pick<DeviceManager, "nodeResources">;
    nodeStatusRequests: Requests<void>;
    nodeRegistration: NodeRegistration;
    csiDrivers: Pick<CsiDrivers, "initializeCsiNode">;
    recorder: EventRecorder;
    clock: Clock;
    logger: Logger;
  },
): void {
  const { config, api, cri, nodeId, machine, hostIP, pleg, eviction, nodeShutdown, devices, nodeStatusRequests, nodeRegistration, csiDrivers, recorder, clock, logger } = o;
  stack
    .use(
      new NodeController({
        api,
        cri,
        plegHealth: () => pleg.healthy(),
        pressure: () => eviction.conditions(),
        id: nodeId,
        machine,
        internalIP: hostIP,
        config: config.kubelet,
        clock,
        logger,
        recorder,
        shutdownStatus: () => nodeShutdown?.status(),
        extendedResources: () => devices.nodeResources(),
        statusRequests: nodeStatusRequests,
        registration: nodeRegistration,
      }),
    )
    .start();
  // CSINode exists as soon as the Node does (upstream initializeCSINode), before any driver registers.
  void nodeRegistration
    .whenRegistered()
    .then(() => csiDrivers.initializeCsiNode())
    .catch((err: unknown) => logger.error("failed to initialize CSINode", { err: errorMessage(err) }));
}

/** Node resources: stats (which feed eviction), image GC, log rotation and the eviction manager, each disposed with the stack. */
async function buildNodeResources(
  stack: AsyncDisposableStack,
  o: {
    config: AgentConfig;
    podsCgroupParent: string;
    podCgroups: PodCgroups | undefined;
    pods: ActivePods & Pick<PodStopper, "evict" | "stageOf">;
    cri: CriService;
    volumes: Pick<VolumeManager, "claimVolumes" | "driverVolumeStats">;
    recorder: EventRecorder;
    /** The runtime's dead containers, collected before the eviction of a pod for disk. */
    containerGC: () => Promise<void>;
    clock: Clock;
    logger: Logger;
  },
) {
  const { config, podsCgroupParent, podCgroups, pods, cri, volumes, recorder, containerGC, clock, logger } = o;
  const k = config.kubelet;
  const stats = stack.use(
    createStatsCollector({
      nodeName: config.nodeName,
      rootDir: config.rootDir,
      cgroupRoot: podsCgroupParent,
      podCgroupPath: ({ uid }) => {
        const pod = pods.activePod(uid);
        return pod && podCgroups ? podCgroups.podCgroupPath(pod) : undefined;
      },
      cri,
      pods: () => pods.activePods().map((p) => podRef(p)),
      podLogsDir: k.podLogsDir,
      volumeStatsAggPeriodMs: k.volumeStatsAggPeriod,
      claimedVolumes: (uid) => volumes.claimVolumes(uid),
      driverVolumes: (uid) => volumes.driverVolumeStats(uid),
      psi: k.featureGates["KubeletPSI"] !== false, // beta, on by default in 1.34: pressure in /stats/summary (cgroup v2)
      clock,
      logger,
    }),
  );
  const pauseImage = await sandboxImageOf(cri);
  const imageGC = stack.use(
    createImageGC({
      cri,
      highThresholdPercent: k.imageGCHighThresholdPercent,
      lowThresholdPercent: k.imageGCLowThresholdPercent,
      minimumAgeMs: k.imageMinimumGCAge,
      ...(k.imageMaximumGCAge ? { maximumAgeMs: k.imageMaximumGCAge } : {}),
      ...(pauseImage ? { pauseImage } : {}),
      statfs: statfsBytes,
      clock,
      logger,
      recorder,
      nodeName: config.nodeName,
    }),
  );
  const logRotation = stack.use(createLogRotation({ cri, maxSizeBytes: parseQuantity(k.containerLogMaxSize), maxFiles: k.containerLogMaxFiles, clock, logger }));
  const eviction = stack.use(
    createEvictionManager({
      config: k,
      stats,
      pods,
      reclaimNodeLevel: { imageGC: () => imageGC.freeSpace(Infinity), containerGC },
      hasDedicatedImageFs: () => dedicatedImageFs(cri, config.rootDir),
      clock,
      logger,
      recorder,
      nodeName: config.nodeName,
    }),
  );
  return { stats, pauseImage, imageGC, logRotation, eviction };
}

/** What the agent serves over HTTP: healthz (10248), the kubelet API (10250) and the read-only port (10255), each closed with the stack. */
async function startServers(
  stack: AsyncDisposableStack,
  o: {
    config: AgentConfig;
    cluster: Cluster | undefined;
    hostIP: string | undefined;
    health: ReturnType<typeof healthzApp>;
    statuses: LocalStatusStore;
    stats: StatsCollector;
    cri: CriService;
    metrics: KubeletMetrics;
    probeMetrics: ProbeMetrics;
    pauseImage: string | undefined;
    machine: MachineInfo;
    clock: Clock;
    logger: Logger;
  },
): Promise<void> {
  const { config, cluster, hostIP, health, statuses, stats, cri, metrics, probeMetrics, pauseImage, machine, clock, logger } = o;
  const k = config.kubelet;
  if (k.healthzPort > 0) {
    const server = Bun.serve({ hostname: k.healthzBindAddress, port: k.healthzPort, fetch: health.fetch });
    stack.defer(() => server.stop(true));
    logger.info("serving healthz", { address: `${k.healthzBindAddress}:${k.healthzPort}` });
  }
  const machineSpec = () => readMachineSpec(machine, { now: clock.now() });
  const kubeletServer = await startKubeletServer({
    config: k,
    nodeName: config.nodeName,
    ...(cluster ? { api: cluster.api } : {}),
    ...(cluster?.csr ? { csr: cluster.csr } : {}),
    pods: () => statuses.list(),
    stats,
    cri,
    certDir: config.certDir,
    nodeIPs: config.nodeIPs,
    nodeAddresses: config.nodeIPs.length ? config.nodeIPs : hostIP ? [hostIP] : [],
    health,
    metrics: {
      kubelet: () => metrics.render() + renderVolumeStatsMetrics(stats.latest()),
      resource: () => resourceMetrics(stats),
      probes: () => probeMetrics.render(),
      cadvisor: () =>
        cadvisorMetrics(
          () => stats.cadvisor({ sandboxImage: pauseImage ?? "" }),
          () => machineFactsFromSpec(machineSpec(), machine),
          () => clock.now(),
        ),
    },
    spec: machineSpec,
    logger,
  });
  if (kubeletServer) stack.defer(() => kubeletServer.close());
  if (k.readOnlyPort > 0) {
    const server = Bun.serve({ hostname: k.address, port: k.readOnlyPort, fetch: readOnlyApp({ statuses, health, spec: machineSpec }).fetch });
    stack.defer(() => server.stop(true));
    logger.info("serving read-only port", { address: `${k.address}:${k.readOnlyPort}` });
  }
}

/** Cluster mode with a given API (tests): no certificates to bootstrap or rotate, no CSRs. */
function injectedCluster(api: KubeApi, version: string | undefined): Cluster {
  return { api, internalIP: undefined, kubeletVersion: kubeletVersionOf(version) };
}

const kubeletVersionOf = (version: string | undefined): string => (version ?? "Kubernetes v0.0.0-bunlet+dev").replace(/^Kubernetes /, "");

interface Cluster {
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
async function connectCluster(config: AgentConfig, opts: { clock: Clock; logger: Logger; version: string | undefined; signal: AbortSignal }): Promise<Cluster> {
  const { createRestClient, loadCredentials } = await import("./api/rest.ts");
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
  return { api: createKubeApi(rest), csr: csrApi(rest), internalIP: defaultRouteIPv4(), kubeletVersion, rotation };
}
