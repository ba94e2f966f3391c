/**
 * The whole agent on one page: builds every subsystem from the config, in
 * the order they depend on each other, and runs until `signal` aborts. The
 * builders (src/agent/) hold what each subsystem needs from the config; no
 * value is assigned after it is built: what a subsystem built early asks of
 * one built later (the pod workers, the PLEG, the node controller) goes
 * through a view or a request queue the later one serves. Stopping closes
 * servers, stops the loop and waits for in-flight pod work, and leaves pods
 * running (an agent restart adopts them).
 */
import { mkdirSync } from "node:fs";
import type { AgentConfig } from "./config/index.ts";
import type { CriService } from "./cri/index.ts";
import type { KubeApi } from "./api/index.ts";
import { ActivePodCgroups } from "./cgroups/index.ts";
import { nodeFacts } from "./node/status.ts";
import { ApiEventRecorder, LogEventRecorder } from "./events/recorder.ts";
import { MirrorPods } from "./mirror/index.ts";
import { healthzApp, logCheck, pingCheck, syncLoopCheck } from "./server/healthz.ts";
import { ApiStatusManager } from "./status/api.ts";
import { LocalStatusStore } from "./status/index.ts";
import { PodWorkersView } from "./sync/view.ts";
import { SyncLoop } from "./sync/syncloop.ts";
import type { Mounter } from "./volumes/mount.ts";
import { WatchedServices } from "./services/index.ts";
import { recordFirstSnapshots, runOnce, type RunOnceReport } from "./runonce/index.ts";
import type { ShutdownTrigger } from "./shutdown/index.ts";
import { bunHeap, type Heap } from "./memory/gc-pacer.ts";
import { realClock, type Clock } from "./util/clock.ts";
import { DisposalStack, type DisposalLimits } from "./util/disposal.ts";
import { errorMessage } from "./util/errors.ts";
import type { Logger, Verbosity } from "./util/log.ts";
import { Requests } from "./util/requests.ts";
import { NodeRegistration } from "./node/registration.ts";
import type { Wiring } from "./agent/wiring.ts";
import { buildCluster } from "./agent/cluster.ts";
import { connectRuntime } from "./agent/cri.ts";
import {
  buildCpuManager,
  buildTopologyManager,
  buildDevices,
  buildNodeCgroups,
  buildNodeShutdown,
  servePodResourcesApi,
  startNodeController,
  startOomWatcher,
  startPodCidr,
  startSystemCgroups,
} from "./agent/node.ts";
import { buildNodeResources } from "./agent/node-resources.ts";
import { buildPodSources } from "./agent/pod-sources.ts";
import { buildVolumes } from "./agent/volumes.ts";
import { buildProber } from "./agent/prober.ts";
import { buildAllocation, buildPodRuntime } from "./agent/pod-runtime.ts";
import { buildPodWorkers, PodAdmission } from "./agent/pod-workers.ts";
import { housekeepingTasks } from "./agent/housekeeping.ts";
import { startServers } from "./agent/servers.ts";
import { defaultRouteIPv4 } from "./node/machine.ts";

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
  /** The logger's verbosity, which PUT /debug/flags/v on the kubelet API changes (enableDebugFlagsHandler). */
  verbosity?: Verbosity;
  /** Numbers in [0, 1) for jitter; Math.random by default. */
  random?: () => number;
  /** The JavaScript heap the GC pacer watches; Bun's by default. */
  heap?: Heap;
  /** How long stopping may take, per part and in all (DEFAULT_DISPOSAL_LIMITS); tests shorten them. */
  stopLimits?: Partial<DisposalLimits>;
}

/**
 * Runs until `signal` aborts; with runOnce, until the static pods run or fail, and returns their report. Then every
 * part built is stopped, each within a bound (util/disposal.ts): rejects with StopTimeout, naming what did not
 * stop, when stopping takes longer than the limits allow.
 */
export async function runAgent(config: AgentConfig, deps: AgentDeps): Promise<RunOnceReport | undefined> {
  const clock = deps.clock ?? realClock;
  const stack = new DisposalStack({ clock, logger: deps.logger, ...(deps.stopLimits ? { limits: deps.stopLimits } : {}) });
  let report: RunOnceReport | undefined;
  try {
    report = await run(config, deps, stack, clock);
  } catch (err) {
    await stack.dispose().catch((stopErr: unknown) => deps.logger.error("stopping after a failure failed", { err: errorMessage(stopErr) }));
    throw err;
  }
  const stopping = clock.now();
  await stack.dispose();
  deps.logger.info("node agent stopped", { ms: clock.now() - stopping });
  return report;
}

async function run(config: AgentConfig, deps: AgentDeps, stack: DisposalStack, clock: Clock): Promise<RunOnceReport | undefined> {
  const { logger, signal } = deps;
  const random = deps.random ?? Math.random;
  const k = config.kubelet;
  logger.info("starting node agent", { node: config.nodeName, mode: config.kubeconfig ? "cluster" : "standalone" });

  const w: Wiring = { config, stack, clock, logger };
  mkdirSync(config.rootDir, { recursive: true, mode: 0o750 });
  // The CRI client, wrapped to time every call for the metrics (kubelet, resource, prober); the running pods and
  // containers they report are the PLEG's, which serves runtimePods once built. Image tarballs are preloaded.
  const runtimeConnection = await connectRuntime(w, { cri: deps.cri, signal });
  if (!runtimeConnection) return undefined;
  const { cri, metrics, probeMetrics, runtimePods } = runtimeConnection;
  // The pod CIDR for the runtime's network plugin: the podCIDR setting now, the Node's spec.podCIDRs in cluster mode.
  const podCidr = startPodCidr(w, { cri });
  // Cluster mode: the API server is a pod source and the status sink, and the node registers.
  const cluster = await buildCluster(w, { api: deps.api, version: deps.version, signal, random });
  // Without --node-ip, the default route's address, standalone too: upstream's initialNode gives a node without an API server
  // its addresses the same way, so pods get status.hostIP and host-network pods the node's IP (probes, env, hooks).
  const hostIP = config.nodeIPs[0] ?? cluster?.internalIP ?? defaultRouteIPv4();

  // The node's cgroups: the driver, kubepods and the QoS classes (cgroupsPerQOS), node allocatable on kubepods, swap.
  const node = await buildNodeCgroups(w, { cri });
  const { machine, nodeAllocatable } = node;
  // kubeletCgroups and systemCgroups: the agent and the root cgroup's processes moved there, now and every minute.
  await startSystemCgroups(w);
  const nodeId = { nodeName: config.nodeName, nodeIPs: config.nodeIPs, nodeLabels: config.nodeLabels, kubeletVersion: cluster?.kubeletVersion ?? "" };
  const facts = nodeFacts(nodeId, machine, k);
  // Stopped after the parts built later (they record events until they stop) and before the API clients: what is
  // still queued then is dropped, a retry waiting ends.
  const recorder = cluster
    ? stack.use("event recorder", new ApiEventRecorder({ api: cluster.events, nodeName: config.nodeName, clock, logger, random }))
    : new LogEventRecorder(logger);
  // Cluster mode: API copies of static pods, made once the node controller (built later) registered the Node
  // (its UID also owns CSINode); the prober reads mirrors' statuses.
  const nodeRegistration = new NodeRegistration();
  const mirrors = cluster ? new MirrorPods({ api: cluster.api, nodeName: config.nodeName, node: nodeRegistration, logger }) : undefined;
  // Probes: liveness and startup failures restart that container (through the pod workers, built later); readiness feeds the statuses.
  const prober = buildProber(w, { cri, recorder, probeMetrics, mirrors, random });
  // Local checkpoints, offline autonomy, CSI drivers and the volume manager (with the configMaps and secrets pods reference).
  const vol = await buildVolumes(w, { cluster, mounter: deps.mounter, nodeAllocatable, nodeLabels: facts.labels, nodeRegistration, recorder });
  // In-place resize (InPlacePodVerticalScaling): allocations checkpointed under rootDir/checkpoints.
  const allocation = buildAllocation(w, { checkpoints: vol.checkpoints, nodeAllocatable, facts });
  const nodeStatusRequests = new Requests<void>(); // served by the node controller, when there is one
  const statuses = new LocalStatusStore({ hostIPs: hostIP ? [hostIP] : [], clock });
  // Disposed after the pod workers (the stack unwinds in reverse): the last statuses they write get a short flush.
  const apiStatus = cluster
    ? stack.use("pod status manager", new ApiStatusManager({ api: cluster.api, hostIPs: hostIP ? [hostIP] : [], clock, logger, local: statuses, ...(mirrors ? { mirrors } : {}) }))
    : undefined;
  const statusSink = apiStatus ?? statuses;
  // Pod sources: static pods (file, URL) and, in cluster mode, the API server's pods for this node; their
  // merge (PodConfig) says when every source delivered, which the device manager and orphan cleanup wait for.
  const { sources, podConfig } = await buildPodSources(w, { cri, cluster, mirrors, apiStatus, autonomy: vol.autonomy });
  // The pod workers are built last on the pod path (their admission asks eviction and shutdown); what the
  // subsystems built before them ask of them goes through this view, which the workers serve.
  const pods = new PodWorkersView();
  // Pod cgroups as the pod syncer makes them (QoS totals first) and the stats read them (active pods').
  const podCgroups = node.podCgroups ? new ActivePodCgroups(node.podCgroups, pods) : undefined;
  // The CPU manager (cpuManagerPolicy) and device plugins: exclusive CPUs and devices, released once every source delivered.
  const cpuManager = buildCpuManager(w, { cri, pods, sources: podConfig });
  const devices = await buildDevices(w, { sources: podConfig, pods, nodeStatusRequests, metrics });
  // The device, CPU and memory (NUMA pinning, memory_manager_state) managers as the topology manager's hint providers.
  const { topology, memoryManager } = buildTopologyManager(w, { node, pods, sources: podConfig, devices, cpuManager });
  // Service environment variables come from one watch of every Service (cluster mode only, as upstream).
  const services = cluster ? stack.use("services watch", new WatchedServices({ api: cluster.api, clock, logger })).start() : undefined;
  // The pods' host side (volumes, pod cgroups, pod files, log directories) and the runtime facade over the CRI.
  const { podHost, runtime, crashLoop, userNamespaces } = buildPodRuntime(w, {
    cri,
    cluster,
    hostIP,
    node,
    podCgroups,
    vol,
    services,
    devices,
    cpuManager,
    memoryManager,
    prober,
    allocation,
    recorder,
    metrics,
    random,
  });
  // Node resources: stats every 10s feed eviction; images and logs are collected and rotated.
  const { stats, pauseImage, imageGC, logRotation, eviction } = await buildNodeResources(w, { node, podCgroups, pods, cri, vol, recorder, runtime });
  // Graceful node shutdown: pods stop by priority group within their budgets when deps.nodeShutdown says so.
  const nodeShutdown = buildNodeShutdown(w, { trigger: deps.nodeShutdown, pods, recorder, nodeStatusRequests });
  // Admission (node shutdown, pressure, sysctls, pod features, devices, CPUs, resources), the pod syncer,
  // the pod workers that serve `pods`, and the PLEG that wakes them.
  const admission = new PodAdmission(k, { facts, nodeShutdown, eviction, topology, allocation });
  const { workers, pleg } = buildPodWorkers(w, { admission, cri, runtime, podHost, statusSink, allocation, prober, pods, runtimePods, metrics, recorder, random, hostIP });
  // The pod resources API (v1) on <rootDir>/pod-resources/kubelet.sock: which devices, CPUs and memory each container holds.
  await servePodResourcesApi(w, { devices, cpuManager, memoryManager, pods: workers });
  // Kernel OOM kills as events (upstream's OOM watcher): SystemOOM on the node, OOMKilling on this node's pods.
  if (!config.runOnce) startOomWatcher(w, { statuses, recorder });
  // Cluster mode: the Node object, its status and its Lease; CSINode once the Node exists.
  if (cluster && config.registerNode) {
    startNodeController(w, {
      api: cluster.heartbeat,
      cri,
      nodeId,
      node,
      hostIP,
      pleg,
      eviction,
      nodeShutdown,
      devices,
      nodeStatusRequests,
      nodeRegistration,
      vol,
      recorder,
      podCidr,
      random,
    });
  }
  await vol.pluginWatcher.start();
  const once = config.runOnce ? recordFirstSnapshots(sources, { clock }) : undefined;
  const housekeeping = housekeepingTasks(w, { heap: deps.heap ?? bunHeap, node, workers, pleg, podConfig, vol, allocation, devices, userNamespaces });
  const syncLoop = stack.use(
    "sync loop",
    new SyncLoop({
      sources: once?.sources ?? sources,
      removeOrphans: !once,
      podConfig,
      workers,
      pleg,
      runtime,
      backoff: crashLoop,
      housekeepingTasks: housekeeping,
      clock,
      logger,
      ...(mirrors ? { mirrors } : {}),
    }),
  );

  const health = healthzApp([pingCheck, logCheck, syncLoopCheck({ syncLoop, pleg, clock, thresholdMs: 2 * k.syncFrequency + 60_000 })]);
  cpuManager.start();
  if (once) {
    syncLoop.start();
    const pods = await once.firstPods().catch((err: unknown) => errorMessage(err));
    if (typeof pods === "string") return { results: [], error: pods };
    const report = await runOnce({ pods, statuses, clock, logger, signal });
    logger.info("run-once finished; pods keep running", { pods: report.results.length, failed: report.results.filter((r) => !r.ok).length });
    return report;
  }
  // makeIPTablesUtilChains (upstream Kubelet.Run, not --runonce): the hint and firewall chains, kept by a canary.
  if (k.makeIPTablesUtilChains) {
    const { IptablesUtilChains, spawnIptables } = await import("./node/iptables-chains.ts");
    await new IptablesUtilChains({ runner: spawnIptables, clock, logger }).start(signal);
  }
  await startServers(w, { cluster, hostIP, health, statuses, stats, cri, metrics, probeMetrics, pauseImage, machine, ...(deps.verbosity ? { verbosity: deps.verbosity } : {}) });

  syncLoop.start();
  stats.start(10_000);
  imageGC.start();
  logRotation.start(k.containerLogMonitorInterval);
  eviction.start(10_000);
  logger.info("syncLoop started", { staticPodPath: k.staticPodPath || "(none)" });
  // A signal that came while starting has already fired: its listener would never be called.
  if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
  logger.info("stopping node agent; pods keep running");
  return undefined;
}
