/** The node's own builders: its cgroups, CPU and device managers, graceful shutdown, the OOM watcher and the Node object. */
import { posix } from "node:path";
import type { CriService } from "../cri/index.ts";
import type { KubeApi } from "../api/index.ts";
import type { CsiDrivers } from "../csi/index.ts";
import { DeviceManager, servePodResources, type ExclusiveCpus, type PinnedMemory } from "../devices/index.ts";
import { NodeController } from "../node/controller.ts";
import { PodCidr } from "../node/pod-cidr.ts";
import { CsiNodeInitializer } from "../csi/node-init.ts";
import { allocatableAmounts, enforcedAllocatable, hugePageCapacity, memoryReservation, type nodeFacts, reservedMilliCpu } from "../node/status.ts";
import { readMachineInfo } from "../node/machine.ts";
import type { EventRecorder } from "../events/recorder.ts";
import { numaNodes } from "../node/host-checks.ts";
import {
  chooseCgroupDriver,
  createPodCgroups,
  createSystemCgroups,
  nodeProcFs,
  detectCgroupLayout,
  nodeCgroupFs,
  readSwapHost,
  enforceReservedCgroups,
  limitedSwapWarning,
} from "../cgroups/index.ts";
import { runtimeCgroupDriver } from "../runtime/cgroup-driver.ts";
import type { KubeletMetrics } from "../metrics/kubelet.ts";
import type { Requests } from "../util/requests.ts";
import { createCpuManager, CpuManagerError, parseCpuSet, readCpuTopology, type CpuManager } from "../cpumanager/index.ts";
import { cpuPolicyOptionGates, parseStaticPolicyOptions } from "../config/cpu-policy-options.ts";
import { createMemoryManager, MemoryManagerError, systemReservedFromConfig, type MemoryManager } from "../memorymanager/index.ts";
import {
  checkPolicyOnMachine,
  NumaTopologyError,
  parsePolicyOptions,
  readNumaNodes,
  TopologyManager,
  type HintProvider,
  type NumaNode,
  type PolicyName,
  type Scope,
} from "../topologymanager/index.ts";
import { OomWatcher, tryOpenKmsg, type ReportedPods } from "../oom/index.ts";
import { NodeShutdownManager, shutdownGroups, type ShutdownTrigger } from "../shutdown/index.ts";
import { StartupConfigError, errorMessage } from "../util/errors.ts";
import type { ActivePods, PodStopper } from "../pods/active.ts";
import type { NodeRegistration } from "../node/registration.ts";
import type { Wiring } from "./wiring.ts";
import type { SourcesReady } from "../pods/active.ts";
import type { ExtendedResources, NodePressure, PlegHealth, ShutdownStatus } from "../node/controller.ts";

/** The node's cgroups, its machine and what it can give pods. */
export type NodeCgroups = Awaited<ReturnType<typeof buildNodeCgroups>>;

/**
 * The node's cgroups: the driver (the runtime's, where it answers through CRI
 * RuntimeConfig, else the config's; disagreeing with one set explicitly
 * exits 2), with cgroupsPerQOS kubepods, kubepods/burstable,
 * kubepods/besteffort and one cgroup per pod under cgroupRoot (systemd:
 * transient slices), node allocatable enforced on kubepods, and the host's
 * swap for containers.
 */
export async function buildNodeCgroups(w: Wiring, o: { cri: CriService }) {
  const { config, logger } = w;
  const { cri } = o;
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
        hugePagePools: machine.hugePages,
        logger,
      })
    : undefined;
  const podsCgroupParent = podCgroups ? podCgroups.kubepods : k.cgroupRoot;
  const nodeAllocatable = allocatableAmounts(machine, k);
  // kubepods gets capacity − reserved (upstream): the hard eviction threshold stays usable by pods until eviction acts.
  const enforced = enforcedAllocatable(machine, k);
  const enforce = k.enforceNodeAllocatable.includes("pods");
  await podCgroups?.setupNode({
    // Huge pages on kubepods: the pools, or the pools − reserved when enforcing (upstream's internal capacity / allocatable).
    allocatable: { cpuMilli: enforced.cpu, memoryBytes: enforced.memory, hugePages: enforce ? nodeAllocatable.hugePages : hugePageCapacity(machine) },
    enforce,
  });
  // enforceNodeAllocatable system-reserved / kube-reserved: the reserved amounts as limits on those existing cgroups.
  if (podCgroups) await enforceReservedCgroups(podCgroups, k, k.featureGates["MemoryQoS"] === true, logger);
  // Swap for containers (memorySwap.swapBehavior), as upstream: NoSwap unless LimitedSwap on cgroup v2 (cgroups/swap.ts).
  const swapHost = readSwapHost(detectCgroupLayout("/", nodeCgroupFs).version, machine.memoryBytes);
  const swapWarning = limitedSwapWarning(k.memorySwap.swapBehavior, swapHost);
  if (swapWarning) logger.warn(swapWarning);
  return { machine, podCgroups, podsCgroupParent, nodeAllocatable, swapHost };
}

/**
 * kubeletCgroups and systemCgroups (cgroups/system-cgroups.ts): the agent and
 * the root cgroup's processes moved into them at once and every minute, as
 * upstream's container manager; without kubeletCgroups the agent's
 * oom_score_adj is set again every 5 minutes. cgroupfs paths whatever the
 * cgroupDriver, as upstream.
 */
export async function startSystemCgroups(w: Wiring): Promise<void> {
  const { stack, clock, logger } = w;
  const k = w.config.kubelet;
  if (k.kubeletCgroups && k.kubeReservedCgroup && !posix.join("/", k.kubeletCgroups).startsWith(posix.join("/", k.kubeReservedCgroup)))
    logger.info("unsupported configuration: KubeletCgroups is not within KubeReservedCgroup", { kubeletCgroups: k.kubeletCgroups, kubeReservedCgroup: k.kubeReservedCgroup });
  const system = stack.use(
    "system cgroups",
    createSystemCgroups({
      kubeletCgroups: k.kubeletCgroups,
      systemCgroups: k.systemCgroups,
      oomScoreAdj: k.oomScoreAdj,
      pid: process.pid,
      proc: nodeProcFs,
      procRoot: "/proc",
      clock,
      logger,
    }),
  );
  await system.start();
}

/** Graceful node shutdown, when shutdownGracePeriodByPodPriority (or its short form) gives groups and something says the node shuts down. */
export function buildNodeShutdown(
  w: Wiring,
  o: {
    trigger: ShutdownTrigger | undefined;
    pods: ActivePods & PodStopper;
    recorder: EventRecorder;
    nodeStatusRequests: Requests<void>;
  },
): NodeShutdownManager | undefined {
  const { config, clock, logger } = w;
  const { pods, recorder, nodeStatusRequests } = o;
  const k = config.kubelet;
  const groups = shutdownGroups(k);
  if (!groups.length || !o.trigger) return undefined;
  const nodeShutdown = new NodeShutdownManager({ groups, pods, clock, logger, recorder, nodeName: config.nodeName, nodeStatus: nodeStatusRequests });
  o.trigger.onShutdown(nodeShutdown);
  return nodeShutdown;
}

/** Kernel OOM kills as events (upstream's OOM watcher): SystemOOM on the node, OOMKilling on this node's pods; none where /dev/kmsg cannot be read. */
export function startOomWatcher(w: Wiring, o: { statuses: ReportedPods; recorder: EventRecorder }): void {
  const { config, stack, clock, logger } = w;
  const kernelLog = tryOpenKmsg(logger);
  if (!kernelLog) return;
  stack.use("OOM watcher", new OomWatcher({ kernelLog, recorder: o.recorder, nodeName: config.nodeName, pods: o.statuses, clock, logger })).start();
}

/** Cluster mode: the Node object (registered, its status every 10 s, sent on change or every 5 min) and its Lease. */
export function startNodeController(
  w: Wiring,
  o: {
    api: KubeApi;
    cri: CriService;
    nodeId: Parameters<typeof nodeFacts>[0];
    node: Pick<NodeCgroups, "machine">;
    hostIP: string | undefined;
    pleg: PlegHealth;
    eviction: NodePressure;
    nodeShutdown: ShutdownStatus | undefined;
    devices: ExtendedResources;
    nodeStatusRequests: Requests<void>;
    nodeRegistration: NodeRegistration;
    vol: { csiDrivers: Pick<CsiDrivers, "initializeCsiNode"> };
    recorder: EventRecorder;
    podCidr: PodCidr;
    random: () => number;
  },
): void {
  const { config, stack, clock, logger } = w;
  const { api, cri, nodeId, hostIP, pleg, eviction, nodeShutdown, devices, nodeStatusRequests, nodeRegistration, recorder } = o;
  const { machine } = o.node;
  const { csiDrivers } = o.vol;
  // Ready stays False until the CSINode exists (upstream initializeCSINode), created once the Node is, before any driver registers.
  const csiNode = stack.use("CSINode initializer", new CsiNodeInitializer({ drivers: csiDrivers, nodeStatus: nodeStatusRequests, clock, logger }));
  stack
    .use(
      "node controller",
      new NodeController({
        api,
        cri,
        pleg,
        pressure: eviction,
        id: nodeId,
        machine,
        internalIP: hostIP,
        config: config.kubelet,
        clock,
        logger,
        recorder,
        ...(nodeShutdown ? { shutdown: nodeShutdown } : {}),
        extendedResources: devices,
        statusRequests: nodeStatusRequests,
        registration: nodeRegistration,
        storage: csiNode,
        podCidr: o.podCidr,
        random: o.random,
      }),
    )
    .start();
  void nodeRegistration.whenRegistered().then(() => csiNode.run());
}

/** The pod CIDR for the runtime (upstream updatePodCIDR): podCIDR at start; in cluster mode the Node's spec.podCIDRs later. */
export function startPodCidr(w: Wiring, o: { cri: CriService }): PodCidr {
  const { config, logger } = w;
  // hairpinMode: validated, then without effect, as upstream 1.34 (no code reads it since dockershim): the runtime's
  // CNI configuration (the bridge plugin's hairpinMode) decides. Said in the log, louder when not the default.
  const hairpin = config.kubelet.hairpinMode;
  (hairpin === "promiscuous-bridge" ? logger.v(2) : logger).info(
    "hairpinMode has no effect with a CRI runtime, as upstream: the runtime's CNI configuration governs hairpin traffic",
    { hairpinMode: hairpin },
  );
  const podCidr = new PodCidr({ cri: o.cri, logger });
  void podCidr.update(config.kubelet.podCIDR).catch((err: unknown) => logger.error("pod CIDR update failed", { err: errorMessage(err) }));
  return podCidr;
}

/** The CPU manager (cpuManagerPolicy): exclusive CPUs for Guaranteed containers, kept in <rootDir>/cpu_manager_state. */
export function buildCpuManager(w: Wiring, o: { cri: CriService; pods: ActivePods; sources: SourcesReady }): CpuManager {
  const { config, stack, clock, logger } = w;
  const { cri, pods, sources } = o;
  const k = config.kubelet;
  try {
    return stack.use(
      "CPU manager",
      createCpuManager({
        rootDir: config.rootDir,
        policy: k.cpuManagerPolicy === "static" ? "static" : "none",
        policyOptions: parseStaticPolicyOptions(k.cpuManagerPolicyOptions, cpuPolicyOptionGates(k.featureGates)),
        topology: k.cpuManagerPolicy === "static" ? readCpuTopology("/sys") : { cpus: [] },
        reservedSystemCpus: parseCpuSet(k.reservedSystemCPUs),
        reservedMilliCpu: reservedMilliCpu(k),
        cri,
        pods,
        sources,
        reconcilePeriodMs: k.cpuManagerReconcilePeriod,
        clock,
        logger,
      }),
    );
  } catch (err) {
    // upstream: the container manager fails and the kubelet does not start.
    if (err instanceof CpuManagerError) throw new Error(`failed to initialize the CPU manager: ${err.message}`);
    throw err;
  }
}

/**
 * The memory manager (memoryManagerPolicy, reservedMemory) and the topology
 * manager (topologyManagerPolicy, topologyManagerScope,
 * topologyManagerPolicyOptions) over the host's NUMA nodes from sysfs. A
 * reservedMemory that does not match the host or Node Allocatable stops the
 * agent (exit 2); a state file that does not match stops it too, as upstream.
 */
export function buildTopologyManager(
  w: Wiring,
  o: { node: Pick<NodeCgroups, "machine">; pods: ActivePods; sources: SourcesReady; devices: HintProvider; cpuManager: HintProvider; sysRoot?: string },
): { topology: TopologyManager; memoryManager: MemoryManager } {
  const { config, logger } = w;
  const k = config.kubelet;
  let nodes: NumaNode[];
  try {
    nodes = readNumaNodes(o.sysRoot ?? "/sys", o.node.machine.memoryBytes);
  } catch (err) {
    if (err instanceof NumaTopologyError) throw new Error(`cannot read the host's NUMA topology: ${err.message}`);
    throw err;
  }
  const staticPolicy = k.memoryManagerPolicy === "Static";
  if (!staticPolicy && k.reservedMemory.length)
    logger.warn('reservedMemory is read by the "Static" memory manager policy only, as upstream', { memoryManagerPolicy: k.memoryManagerPolicy });
  let memoryManager: MemoryManager;
  try {
    const systemReserved = staticPolicy ? systemReservedFromConfig(nodes, memoryReservation(o.node.machine, k), k.reservedMemory) : new Map();
    memoryManager = createMemoryManager({
      rootDir: config.rootDir,
      policy: staticPolicy ? "Static" : "None",
      nodes,
      systemReserved,
      podLevelResources: k.featureGates["PodLevelResources"] !== false,
      pods: o.pods,
      sources: o.sources,
      logger,
    });
  } catch (err) {
    // upstream: the container manager fails and the kubelet does not start.
    if (err instanceof MemoryManagerError) throw new Error(`failed to initialize the memory manager: ${err.message}`);
    throw err;
  }
  const policy = k.topologyManagerPolicy as PolicyName;
  const options = parsePolicyOptions(k.topologyManagerPolicyOptions, k.featureGates["TopologyManagerPolicyBetaOptions"] !== false);
  checkPolicyOnMachine(policy, options, nodes);
  const topology = new TopologyManager({
    policy,
    scope: k.topologyManagerScope as Scope,
    options,
    numa: { nodes: nodes.map((n) => n.id), distances: new Map(nodes.map((n) => [n.id, n.distances])) },
    // upstream's order of hint providers: the device manager, the CPU manager, then the memory manager.
    providers: [o.devices, o.cpuManager, memoryManager],
    logger,
  });
  logger.info("topology and memory managers", {
    topologyManagerPolicy: policy,
    topologyManagerScope: k.topologyManagerScope,
    memoryManagerPolicy: k.memoryManagerPolicy,
    numaNodes: nodes.length,
  });
  return { topology, memoryManager };
}

/** Device plugins register on <rootDir>/device-plugins/kubelet.sock; their devices are extended resources of the node. */
export async function buildDevices(
  w: Wiring,
  o: { sources: SourcesReady; pods: ActivePods; nodeStatusRequests: Requests<void>; metrics: KubeletMetrics; sysRoot?: string },
): Promise<DeviceManager> {
  const { config, stack, clock, logger } = w;
  const { sources, pods, nodeStatusRequests, metrics } = o;
  // The host's NUMA nodes, which the device manager's topology hints are made of.
  const numa = numaNodes(posix.join(o.sysRoot ?? "/sys", "devices/system/node"));
  const devices = stack.use(
    "device manager",
    new DeviceManager({ dir: posix.join(config.rootDir, "device-plugins"), clock, logger, nodeStatus: nodeStatusRequests, sources, pods, numaNodes: numa, metrics }),
  );
  await devices.start();
  return devices;
}

/** The pod resources API (v1) on <rootDir>/pod-resources/kubelet.sock: which devices, exclusive CPUs and pinned memory each container holds; closed with the stack. */
export async function servePodResourcesApi(
  w: Wiring,
  o: {
    devices: DeviceManager;
    cpuManager: ExclusiveCpus;
    memoryManager: PinnedMemory;
    pods: Pick<ActivePods, "activePods">;
  },
): Promise<void> {
  const { config, stack, logger } = w;
  const podResources = await servePodResources({
    dir: posix.join(config.rootDir, "pod-resources"),
    devices: o.devices,
    compute: { cpus: o.cpuManager, memory: o.memoryManager },
    pods: o.pods,
    getEnabled: config.kubelet.featureGates["KubeletPodResourcesGet"] !== false, // beta, on by default since 1.34
    logger,
  });
  stack.defer("pod resources API", () => podResources.close());
}
