/**
 * The whole agent on one page: builds every subsystem from the config and
 * runs until `signal` aborts. Stopping closes servers, stops the loop and
 * waits for in-flight pod work, and leaves pods running (an agent restart
 * adopts them).
 */
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { posix } from "node:path";
import { parseQuantity, type AgentConfig } from "./config/index.ts";
import type { CriService } from "./cri/index.ts";
import { createKubeApi } from "./api/index.ts";
import { admitPod } from "./node/admission.ts";
import { NodeController } from "./node/controller.ts";
import { allocatableAmounts, nodeFacts } from "./node/status.ts";
import { defaultRouteIPv4, goArch, readMachineInfo } from "./node/machine.ts";
import { ApiEventRecorder, LogEventRecorder } from "./events/recorder.ts";
import { createEvictionManager, type EvictionManager } from "./eviction/index.ts";
import { createImageGC, statfsBytes } from "./images/index.ts";
import { createLogRotation } from "./logs/index.ts";
import { createStatsCollector } from "./stats/index.ts";
import { containerLinuxResources, createPodCgroups, type PodCgroups } from "./cgroups/index.ts";
import type { Pod } from "./pods/schema.ts";
import { refOf } from "./runtime/index.ts";
import { GenericPleg } from "./pleg/generic.ts";
import { createProbeManager } from "./prober/index.ts";
import { ProbeVerdicts } from "./prober/verdicts.ts";
import { MirrorPods } from "./pods/mirror.ts";
import { CriPodRuntime } from "./runtime/manager.ts";
import { parseResolvConf, type DnsSettings } from "./runtime/dns.ts";
import { healthzApp, syncLoopCheck } from "./server/healthz.ts";
import { readOnlyApp } from "./server/readonly.ts";
import { startKubeletServer } from "./server/wire.ts";
import { ApiServerSource } from "./sources/apiserver.ts";
import { FileSource } from "./sources/file.ts";
import { UrlSource } from "./sources/url.ts";
import { PodConfig } from "./sources/podconfig.ts";
import type { PodSource } from "./sources/types.ts";
import { ApiStatusManager } from "./status/api.ts";
import { LocalStatusStore } from "./status/index.ts";
import { PodWorkers } from "./sync/podworkers.ts";
import { createVolumeManager } from "./volumes/wire.ts";
import { SyncLoop } from "./sync/syncloop.ts";
import { realClock, type Clock } from "./util/clock.ts";
import { errorMessage } from "./util/errors.ts";
import type { Logger } from "./util/log.ts";

export interface AgentDeps {
  logger: Logger;
  signal: AbortSignal;
  /** `Kubernetes v1.34.0-bunlet+<build>`; the node reports the part after "Kubernetes ". */
  version?: string;
  clock?: Clock;
  /** Injected for tests; by default a gRPC client to the configured endpoint. */
  cri?: CriService;
}

export async function runAgent(config: AgentConfig, deps: AgentDeps): Promise<void> {
  const { logger, signal } = deps;
  const clock = deps.clock ?? realClock;
  const k = config.kubelet;
  logger.info("starting node agent", { node: config.nodeName, mode: config.kubeconfig ? "cluster" : "standalone" });

  await using stack = new AsyncDisposableStack();
  mkdirSync(config.rootDir, { recursive: true, mode: 0o750 });
  const cri = deps.cri ?? (await import("./cri/client.ts")).createCriClient({
    endpoint: k.containerRuntimeEndpoint,
    ...(k.imageServiceEndpoint ? { imageEndpoint: k.imageServiceEndpoint } : {}),
    requestTimeoutMs: k.runtimeRequestTimeout,
    logger,
  });
  stack.defer(() => cri.close());
  await waitForRuntime(cri, { clock, logger, signal });
  if (signal.aborted) return;

  // Cluster mode: the API server is a pod source and the status sink, and the node registers.
  const cluster = config.kubeconfig ? await connectCluster(config, { clock, logger, version: deps.version }) : undefined;
  const hostIP = config.nodeIPs[0] ?? cluster?.internalIP;

  // cgroupsPerQOS: kubepods, kubepods/burstable, kubepods/besteffort and one cgroup per pod under cgroupRoot.
  const podsCgroupParent = k.cgroupsPerQOS ? posix.join(k.cgroupRoot || "/", "kubepods") : k.cgroupRoot;
  const machine = readMachineInfo({ rootDir: config.rootDir });
  const podCgroups = k.cgroupsPerQOS
    ? createPodCgroups({
        cgroupRoot: k.cgroupRoot || "/",
        podPidsLimit: k.podPidsLimit,
        cpuCFSQuota: k.cpuCFSQuota,
        cpuCFSQuotaPeriodMs: k.cpuCFSQuotaPeriod,
        memoryQoS: k.featureGates["MemoryQoS"] === true, // upstream's alpha gate: memory.min/low on cgroup v2
        logger,
      })
    : undefined;
  const nodeAllocatable = allocatableAmounts(machine, k);
  await podCgroups?.setupNode({
    allocatable: { cpuMilli: nodeAllocatable.cpu, memoryBytes: nodeAllocatable.memory },
    enforce: k.enforceNodeAllocatable.includes("pods"),
  });
  const recorder = cluster
    ? new ApiEventRecorder({ api: cluster.api, nodeName: config.nodeName, qps: k.eventRecordQPS, burst: k.eventBurst, clock, logger })
    : new LogEventRecorder(logger);
  // Probes: liveness and startup failures restart that container; readiness feeds the statuses.
  const verdicts = new ProbeVerdicts((uid) => workers.sync(uid));
  verdicts.manager = stack.use(
    createProbeManager({
      cri,
      clock,
      logger,
      recorder,
      onLivenessFailure: (uid, name, message) => verdicts.livenessFailed(uid, name, message),
      onChange: (uid) => workers.sync(uid),
    }),
  );
  // configMaps and secrets pods reference (watched in cluster mode), and their volumes below rootDir/pods.
  const { volumes } = stack.use(await createVolumeManager({ rootDir: config.rootDir, ...(cluster ? { api: cluster.api } : {}), allocatable: nodeAllocatable, clock, logger }));
  const runtime = new CriPodRuntime({
    cri,
    volumes,
    clock,
    logger,
    recorder,
    unhealthy: (uid) => verdicts.unhealthy(uid),
    ...(podCgroups
      ? {
          cgroups: {
            // Upstream syncPod: QoS totals first, so the new pod's share is counted, then the pod's own cgroup.
            ensurePod: async (pod: Pod): Promise<string> => {
              await podCgroups.updateQos([...workers.activePods(), pod]);
              return podCgroups.ensurePod(pod);
            },
            removePod: (uid: string) => podCgroups.removePod(uid),
          },
        }
      : {}),
    containerResources: (pod, container) =>
      containerLinuxResources(pod, container, { memoryCapacityBytes: machine.memoryBytes, cpuCFSQuota: k.cpuCFSQuota, cpuCFSQuotaPeriodUs: k.cpuCFSQuotaPeriod * 1000 }),
    node: {
      podLogsDir: k.podLogsDir,
      podsCgroupParent,
      hostDns: readHostDns(k.resolvConf, logger),
      clusterDns: k.clusterDNS,
      clusterDomain: k.clusterDomain,
      seccompProfileRoot: posix.join(config.rootDir, "seccomp"),
      seccompDefault: k.seccompDefault,
    },
    ...(hostIP ? { hostIP } : {}),
  });
  const statuses = new LocalStatusStore();
  let mirrors: MirrorPods | undefined; // cluster mode: API copies of static pods, made once the node is registered
  const apiStatus = cluster
    ? new ApiStatusManager({ api: cluster.api, hostIPs: () => (hostIP ? [hostIP] : []), clock, logger, local: statuses, mirrorOf: (pod) => mirrors?.mirrorOf(pod) })
    : undefined;
  const statusSink = apiStatus ?? statuses;
  const nodeId = { nodeName: config.nodeName, nodeIPs: config.nodeIPs, nodeLabels: config.nodeLabels, kubeletVersion: cluster?.kubeletVersion ?? "" };
  const facts = nodeFacts(nodeId, machine, k);
  // Eviction refuses pods under pressure before the resource checks, as upstream.
  let eviction: EvictionManager | undefined;
  const admit = (pod: Pod, active: Pod[]) => {
    const underPressure = eviction?.admitPod(pod);
    return underPressure && !underPressure.admit ? underPressure : admitPod(pod, active, facts);
  };
  const workers: PodWorkers = stack.use(new PodWorkers({ runtime, status: statusSink, clock, logger, resyncIntervalMs: k.syncFrequency, admit, recorder, probes: verdicts }));

  // Node resources: stats every 10s feed eviction; images and logs are collected and rotated.
  const stats = stack.use(
    createStatsCollector({
      nodeName: config.nodeName,
      rootDir: config.rootDir,
      cgroupRoot: podsCgroupParent,
      podCgroupPath: ({ uid }) => {
        const pod = workers.activePod(uid);
        return pod && podCgroups ? podCgroups.podCgroupPath(pod) : undefined;
      },
      cri,
      pods: () => workers.activePods().map((p) => refOf(p)),
      podLogsDir: k.podLogsDir,
      volumeStatsAggPeriodMs: k.volumeStatsAggPeriod,
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
  eviction = stack.use(
    createEvictionManager({
      config: k,
      stats,
      activePods: () => workers.activePods(),
      evictPod: async (pod, status, grace) => workers.evict(pod.metadata.uid ?? "", status.message, grace),
      podCleanedUp: (pod) => workers.stageOf(pod.metadata.uid ?? "") !== "syncing",
      reclaimNodeLevel: { imageGC: () => imageGC.freeSpace(Infinity), containerGC: () => runtime.garbageCollect() },
      hasDedicatedImageFs: () => dedicatedImageFs(cri, config.rootDir),
      clock,
      logger,
      recorder,
      nodeName: config.nodeName,
    }),
  );
  const pressure = eviction;
  const pleg = stack.use(new GenericPleg({ runtime, clock, logger }));
  const sources: PodSource[] = [];
  if (k.staticPodPath) {
    sources.push(stack.use(new FileSource({ path: k.staticPodPath, nodeName: config.nodeName, checkFrequencyMs: k.fileCheckFrequency, clock, logger })));
  }
  if (k.staticPodURL) {
    sources.push(
      stack.use(new UrlSource({ url: k.staticPodURL, headers: k.staticPodURLHeader, nodeName: config.nodeName, checkFrequencyMs: k.httpCheckFrequency, clock, logger })),
    );
  }
  if (cluster) {
    const node = config.registerNode
      ? stack.use(
          new NodeController({
            api: cluster.api,
            cri,
            plegHealth: () => pleg.healthy(),
            pressure: () => pressure.conditions(),
            id: nodeId,
            machine,
            internalIP: hostIP,
            config: k,
            clock,
            logger,
            recorder,
          }),
        )
      : undefined;
    node?.start();
    mirrors = new MirrorPods({ api: cluster.api, nodeName: config.nodeName, nodeUid: () => node?.nodeUid(), logger });
    const observeMirrors = mirrors;
    sources.push(stack.use(new ApiServerSource({ api: cluster.api, nodeName: config.nodeName, clock, logger, onMirrorPods: (pods) => (observeMirrors.observe(pods), apiStatus?.mirrorsChanged()) })));
  }
  const podConfig = new PodConfig(sources.map((s) => s.name));
  const syncLoop = stack.use(
    new SyncLoop({
      sources,
      podConfig,
      workers,
      pleg,
      runtime,
      backoff: runtime.crashLoop,
      clock,
      logger,
      ...(mirrors ? { mirrors } : {}),
      housekeepingTasks: [
        ...(podCgroups ? [everyMs(60_000, clock, () => podCgroupHousekeeping(podCgroups, workers, pleg, logger))] : []),
        // Directories (and mounts) of pods gone from the agent and the runtime, as upstream cleanupOrphanedPodDirs.
        // Only once every source delivered its pods: a restarted node must not lose emptyDirs of pods still loading.
        everyMs(60_000, clock, async () => {
          if (!pleg.hasRelisted() || !podConfig.allSourcesReady()) return;
          const known = new Set([...pleg.runtimePods().map((p) => p.uid), ...podConfig.desiredPods().map((p) => p.metadata.uid ?? "")]);
          await volumes.cleanupOrphans((uid) => workers.has(uid) || known.has(uid));
        }),
      ],
    }),
  );

  const health = healthzApp([
    { name: "ping", check: () => ({ ok: true }) },
    { name: "log", check: () => ({ ok: true }) },
    syncLoopCheck({ lastIteration: () => syncLoop.lastIteration(), pleg: () => pleg.healthy(), now: () => clock.now(), thresholdMs: 2 * k.syncFrequency + 60_000 }),
  ]);
  if (k.healthzPort > 0) {
    const server = Bun.serve({ hostname: k.healthzBindAddress, port: k.healthzPort, fetch: health.fetch });
    stack.defer(() => server.stop(true));
    logger.info("serving healthz", { address: `${k.healthzBindAddress}:${k.healthzPort}` });
  }
  const kubeletServer = await startKubeletServer({
    config: k,
    nodeName: config.nodeName,
    ...(cluster ? { api: cluster.api } : {}),
    pods: () => statuses.list(),
    stats,
    health,
    logger,
  });
  if (kubeletServer) stack.defer(() => kubeletServer.close());
  if (k.readOnlyPort > 0) {
    const server = Bun.serve({ hostname: k.address, port: k.readOnlyPort, fetch: readOnlyApp({ statuses, health }).fetch });
    stack.defer(() => server.stop(true));
    logger.info("serving read-only port", { address: `${k.address}:${k.readOnlyPort}` });
  }

  syncLoop.start();
  stats.start(10_000);
  imageGC.start();
  logRotation.start(k.containerLogMonitorInterval);
  eviction.start(10_000);
  logger.info("syncLoop started", { staticPodPath: k.staticPodPath || "(none)" });
  await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
  logger.info("stopping node agent; pods keep running");
}

/** The API client for cluster mode; client-node and the REST layer load only here. */
async function connectCluster(config: AgentConfig, opts: { clock: Clock; logger: Logger; version: string | undefined }) {
  const { createRestClient, loadCredentials } = await import("./api/rest.ts");
  const kubeletVersion = (opts.version ?? "Kubernetes v0.0.0-bunlet+dev").replace(/^Kubernetes /, "");
  const rest = createRestClient({
    credentials: await loadCredentials(config.kubeconfig!),
    qps: config.kubelet.kubeAPIQPS,
    burst: config.kubelet.kubeAPIBurst,
    clock: opts.clock,
    userAgent: `kubelet/${kubeletVersion} (linux/${goArch()}) bunlet`,
  });
  opts.logger.info("using the API server", { server: rest.server, node: config.nodeName });
  return { api: createKubeApi(rest), internalIP: defaultRouteIPv4(), kubeletVersion };
}

/** Waits until the runtime answers Version; the agent cannot do anything before that. */
async function waitForRuntime(cri: CriService, opts: { clock: Clock; logger: Logger; signal: AbortSignal }): Promise<void> {
  for (let attempt = 0; !opts.signal.aborted; attempt++) {
    try {
      const v = await cri.version();
      opts.logger.info("container runtime ready", { runtime: v.runtimeName, version: v.runtimeVersion, criVersion: v.runtimeApiVersion });
      return;
    } catch (err) {
      if (attempt % 10 === 0) opts.logger.warn("container runtime not ready; retrying", { err: errorMessage(err) });
      await opts.clock.sleep(1000, opts.signal).catch(() => {});
    }
  }
}

/**
 * Once a minute (upstream): QoS cgroup totals from the active pods, and
 * pod cgroups whose pod is gone from the agent and the runtime removed.
 */
async function podCgroupHousekeeping(podCgroups: PodCgroups, workers: PodWorkers, pleg: GenericPleg, logger: Logger): Promise<void> {
  try {
    await podCgroups.updateQos(workers.activePods());
    const inRuntime = new Set(pleg.runtimePods().map((p) => p.uid));
    for (const uid of await podCgroups.listPodUids()) {
      if (!workers.has(uid) && !inRuntime.has(uid) && pleg.hasRelisted()) await podCgroups.removePod(uid);
    }
  } catch (err) {
    logger.warn("pod cgroup housekeeping failed", { err: errorMessage(err) });
  }
}

/** Wraps `fn` so that calling it more often than every `periodMs` does nothing. */
function everyMs(periodMs: number, clock: Clock, fn: () => Promise<void>): () => void {
  let last = -Infinity;
  let running = false;
  return () => {
    if (running || clock.now() - last < periodMs) return;
    last = clock.now();
    running = true;
    void fn().finally(() => (running = false));
  };
}

/** Whether the runtime's image filesystem is another filesystem than the one holding rootDir (nodefs). */
async function dedicatedImageFs(cri: CriService, rootDir: string): Promise<boolean> {
  const mountpoint = (await cri.imageFsInfo()).imageFilesystems[0]?.fsId?.mountpoint;
  return mountpoint ? statSync(mountpoint).dev !== statSync(rootDir).dev : false;
}

/** containerd's sandbox (pause) image, from its verbose status; image GC must never remove it. */
async function sandboxImageOf(cri: CriService): Promise<string | undefined> {
  try {
    const config = (await cri.status(true)).info["config"];
    return config ? ((JSON.parse(config) as { sandboxImage?: string }).sandboxImage ?? undefined) : undefined;
  } catch {
    return undefined;
  }
}

function readHostDns(path: string, logger: Logger): DnsSettings {
  try {
    return parseResolvConf(readFileSync(path, "utf8"));
  } catch (err) {
    logger.warn("could not read resolv.conf; pods get no DNS servers from the node", { path, err: errorMessage(err) });
    return { servers: [], searches: [], options: [] };
  }
}
