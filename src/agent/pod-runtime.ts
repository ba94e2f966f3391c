/** The pod path's middle: allocations, the pods' host side and the runtime facade over the CRI. */
import { posix } from "node:path";
import type { CriService } from "../cri/index.ts";
import { NodePredicates } from "../node/admission.ts";
import type { DeviceManager } from "../devices/index.ts";
import type { allocatableAmounts, nodeFacts } from "../node/status.ts";
import type { EventRecorder } from "../events/recorder.ts";
import { NodeContainerResources } from "../cgroups/container-values.ts";
import { cgroupPageSizes } from "../cgroups/index.ts";
import type { KubeletMetrics } from "../metrics/kubelet.ts";
import type { ProbeVerdicts } from "../prober/verdicts.ts";
import { podDirs } from "../pods/dirs.ts";
import { CriPodRuntime } from "../runtime/manager.ts";
import { PullQueue } from "../runtime/pull-queue.ts";
import { Backoff, crashLoopLimits } from "../runtime/backoff.ts";
import { readHostDns } from "../runtime/dns.ts";
import type { FileCheckpointStore } from "../checkpoint/index.ts";
import { AllocationManager } from "../allocation/index.ts";
import type { CpuManager } from "../cpumanager/index.ts";
import type { MemoryManager } from "../memorymanager/index.ts";
import { PodHost } from "../sync/pod-host.ts";
import { hostIdFiles, kubeletMappings, PodUserNamespaces, UserNamespaceError, UserNamespaceManager } from "../userns/index.ts";
import { noServiceEnv, serviceEnvFrom, type WatchedServices } from "../services/index.ts";
import { ApiRuntimeClasses, defaultRuntimeClasses } from "../runtimeclass/index.ts";
import type { VolumeManager } from "../volumes/index.ts";
import type { PodObjects } from "../api/objects.ts";
import type { Wiring } from "./wiring.ts";
import type { Cluster } from "./cluster.ts";
import type { NodeCgroups } from "./node.ts";
import type { PodCgroupHooks } from "../sync/pod-host.ts";

/** In-place resize (InPlacePodVerticalScaling, on by default since 1.33): allocations checkpointed under rootDir/checkpoints. */
export function buildAllocation(
  w: Wiring,
  o: { checkpoints: FileCheckpointStore; nodeAllocatable: ReturnType<typeof allocatableAmounts>; facts: ReturnType<typeof nodeFacts> },
): AllocationManager | undefined {
  const { config, logger } = w;
  const { checkpoints, nodeAllocatable, facts } = o;
  if (config.kubelet.featureGates["InPlacePodVerticalScaling"] === false) return undefined;
  return new AllocationManager({
    store: checkpoints,
    logger,
    allocatable: { cpu: nodeAllocatable.cpu, memory: nodeAllocatable.memory },
    admission: new NodePredicates(facts),
  });
}

/**
 * User namespaces for hostUsers: false pods (UserNamespacesSupport, on by
 * default): slots of userNamespaces.idsPerPod from the "kubelet" user's
 * subordinate IDs or upstream's default range, the mappings written before a
 * restart read back. A range that does not fit stops the start, as upstream.
 */
function buildUserNamespaceManager(config: Wiring["config"], random: () => number): UserNamespaceManager | undefined {
  const k = config.kubelet;
  if (k.featureGates["UserNamespacesSupport"] === false) return undefined;
  try {
    const dirs = podDirs(config.rootDir);
    return new UserNamespaceManager({
      range: kubeletMappings({ passwd: "/etc/passwd", subuid: "/etc/subuid", subgid: "/etc/subgid" }, hostIdFiles),
      idsPerPod: k.userNamespaces.idsPerPod,
      maxPods: k.maxPods,
      podDir: dirs.pod,
      podsRoot: dirs.podsRoot,
      random,
    });
  } catch (err) {
    if (err instanceof UserNamespaceError) throw new Error(`create user namespace manager: ${err.message}`);
    throw err;
  }
}

/**
 * The pod's host side (volumes, the pod cgroup with the QoS totals, pod files,
 * log directories) and the runtime facade over the CRI, with where its
 * sandbox and container configs come from and what decides a start; the
 * crash-loop backoff is also the syncLoop's (housekeeping forgets old entries).
 */
export function buildPodRuntime(
  w: Wiring,
  o: {
    cri: CriService;
    cluster: Cluster | undefined;
    hostIP: string | undefined;
    node: Pick<NodeCgroups, "machine" | "nodeAllocatable" | "swapHost" | "podsCgroupParent">;
    podCgroups: PodCgroupHooks | undefined;
    vol: { volumes: VolumeManager; podObjects: PodObjects };
    services: WatchedServices | undefined;
    devices: DeviceManager;
    cpuManager: Pick<CpuManager, "cpusetFor">;
    memoryManager: Pick<MemoryManager, "cpusetMemsFor">;
    prober: { verdicts: Pick<ProbeVerdicts, "isStarted" | "unhealthy"> };
    allocation: AllocationManager | undefined;
    recorder: EventRecorder;
    metrics: KubeletMetrics;
    random: () => number;
  },
): { podHost: PodHost; runtime: CriPodRuntime; crashLoop: Backoff; userNamespaces: PodUserNamespaces } {
  const { config, clock, logger } = w;
  const userNamespaces = new PodUserNamespaces(buildUserNamespaceManager(config, o.random), o.cri);
  const { cri, cluster, hostIP, podCgroups, services, devices, cpuManager, memoryManager, prober, allocation, recorder, metrics } = o;
  const { machine, nodeAllocatable, swapHost, podsCgroupParent } = o.node;
  const { volumes, podObjects } = o.vol;
  // MemoryQoS (alpha gate) acts on cgroup v2 only, as upstream's enforceMemoryQoS.
  const memoryQoS = config.kubelet.featureGates["MemoryQoS"] === true && swapHost.cgroupVersion === "v2";
  const k = config.kubelet;
  // The pods' host side: volumes, pod cgroups, pod files and log directories (set up and torn down by the pod syncer).
  const podHost = new PodHost({
    podLogsDir: k.podLogsDir,
    podsCgroupParent,
    clusterDomain: k.clusterDomain,
    recorder,
    volumes,
    podDirs: podDirs(config.rootDir),
    userNamespaces,
    ...(podCgroups ? { cgroups: podCgroups } : {}),
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
        nodeName: config.nodeName,
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
      resources: new NodeContainerResources({
        values: {
          memoryCapacityBytes: machine.memoryBytes,
          cpuCFSQuota: k.cpuCFSQuota,
          cpuCFSQuotaPeriodUs: k.cpuCFSQuotaPeriod * 1000,
          // Upstream's default on cgroup v2: an OOM kill takes the whole container (singleProcessOOMKill: true opts out).
          oomGroup: swapHost.cgroupVersion === "v2" && k.singleProcessOOMKill !== true,
          // Every huge page size of the host gets a limit (0 unless the container asks), as upstream; read at start with the machine.
          hugePageSizes: cgroupPageSizes(machine.hugePages),
          // MemoryQoS on cgroup v2 only (upstream's enforceMemoryQoS): memory.min and memory.high in the unified map.
          ...(memoryQoS ? { memoryQoS: { throttlingFactor: k.memoryThrottlingFactor, allocatableMemoryBytes: nodeAllocatable.memory } } : {}),
        },
        swapBehavior: k.memorySwap.swapBehavior,
        swapHost,
        cpus: cpuManager,
        memory: memoryManager,
      }),
      podObjects, // env references and pull secrets read the same watched cache as volumes
      nodeAllocatable: { cpuMilli: nodeAllocatable.cpu, memoryBytes: nodeAllocatable.memory, ephemeralStorageBytes: nodeAllocatable["ephemeral-storage"] },
      serviceEnv: services ? serviceEnvFrom(services) : noServiceEnv,
      runtimeClasses: cluster ? new ApiRuntimeClasses({ api: cluster.api, clock }) : defaultRuntimeClasses,
      devices,
      userNamespaces,
    },
    start: {
      crashLoop,
      imagePulls: Backoff.crashLoop(clock),
      pullQueue: PullQueue.fromConfig(k.serializeImagePulls, k.maxParallelImagePulls, { qps: k.registryPullQPS, burst: k.registryBurst, clock }),
      probes: prober.verdicts,
      resize: allocation,
    },
  });
  return { podHost, runtime, crashLoop, userNamespaces };
}
