/** The pod path's last part: admission, the pod syncer, the pod workers and the PLEG that wakes them. */
import type { AllocationManager } from "../allocation/index.ts";
import type { KubeletConfiguration } from "../config/index.ts";
import type { TopologyManager } from "../topologymanager/index.ts";
import type { CriService } from "../cri/index.ts";
import type { EventRecorder } from "../events/recorder.ts";
import type { EvictionManager } from "../eviction/index.ts";
import type { KubeletMetrics } from "../metrics/kubelet.ts";
import { admitPod, type AdmitResult, type NodeFacts, type PodAdmitter } from "../node/admission.ts";
import { admitPodFeatures, appArmorEnabled } from "../node/pod-features.ts";
import { sysctlAllowlist } from "../node/sysctls.ts";
import { PodStatusCache } from "../pleg/cache.ts";
import { EventedPleg } from "../pleg/evented.ts";
import { GenericPleg, type Pleg } from "../pleg/generic.ts";
import type { RuntimePodsView } from "../pleg/view.ts";
import type { Pod } from "../pods/schema.ts";
import type { ProbeVerdicts } from "../prober/verdicts.ts";
import type { CriPodRuntime } from "../runtime/manager.ts";
import type { NodeShutdownManager } from "../shutdown/index.ts";
import type { StatusSink } from "../status/index.ts";
import { HostPodSyncer } from "../sync/pod-syncer.ts";
import type { PodHost } from "../sync/pod-host.ts";
import { PodWorkers } from "../sync/podworkers.ts";
import type { PodWorkersView } from "../sync/view.ts";
import type { Requests } from "../util/requests.ts";
import type { Wiring } from "./wiring.ts";

/** What decides whether a pod is admitted. */
export interface AdmissionSources {
  facts: NodeFacts;
  nodeShutdown: Pick<NodeShutdownManager, "admit"> | undefined;
  eviction: Pick<EvictionManager, "admitPod">;
  /** The topology manager with its hint providers (the device, CPU and memory managers): it allocates devices, exclusive CPUs and NUMA memory. */
  topology: Pick<TopologyManager, "admit">;
  allocation: Pick<AllocationManager, "allocatedPod"> | undefined;
}

/**
 * Admission as upstream orders it: node shutdown, then eviction (pods under
 * pressure), sysctls, pod features, the topology manager (devices,
 * exclusive CPUs, NUMA memory), then the resource predicates. The first refusal
 * answers; later checks are not asked.
 */
export class PodAdmission implements PodAdmitter {
  private readonly sysctls: ReturnType<typeof sysctlAllowlist>;
  private readonly podFeatureGates: Parameters<typeof admitPodFeatures>[1];

  constructor(
    k: Pick<KubeletConfiguration, "allowedUnsafeSysctls" | "featureGates">,
    private readonly o: AdmissionSources,
  ) {
    this.sysctls = sysctlAllowlist(k.allowedUnsafeSysctls);
    this.podFeatureGates = {
      podLevelResources: k.featureGates["PodLevelResources"] !== false,
      userNamespacesSupport: k.featureGates["UserNamespacesSupport"] !== false,
      appArmorEnabled: appArmorEnabled(),
    };
  }

  admit(pod: Pod, active: Pod[]): AdmitResult {
    const { facts, nodeShutdown, eviction, topology, allocation } = this.o;
    const shuttingDown = nodeShutdown?.admit();
    if (shuttingDown && !shuttingDown.admit) return shuttingDown;
    const underPressure = eviction.admitPod(pod);
    if (!underPressure.admit) return underPressure;
    const sysctlResult = this.sysctls.admit(pod);
    if (!sysctlResult.admit) return sysctlResult;
    // What the node cannot give (pod-level resources with the gate off, a user namespace) is refused, never run without (node/pod-features.ts).
    const features = admitPodFeatures(pod, this.podFeatureGates);
    if (!features.admit) return features;
    // A pod counts with what it was allocated (checkpointed; active pods come allocated), not with a resize it
    // asked for: after a restart, a pod whose resize is pending is admitted again as it runs (upstream).
    const allocated = allocation ? allocation.allocatedPod(pod) : pod;
    // Devices, exclusive CPUs and NUMA memory, aligned by the topology manager (upstream's allocate-resources admit handler), before the resource predicates.
    const topologyResult = topology.admit(allocated);
    if (!topologyResult.admit) return topologyResult;
    return admitPod(allocated, active, facts);
  }
}

/**
 * The pod syncer (which admits with `admission`), the pod workers (which
 * serve `pods` and the prober's sync requests) and the PLEG that wakes them, each
 * disposed with the stack.
 */
export function buildPodWorkers(
  w: Wiring,
  o: {
    admission: PodAdmitter;
    cri: CriService;
    runtime: CriPodRuntime;
    podHost: PodHost;
    statusSink: StatusSink;
    allocation: AllocationManager | undefined;
    prober: { verdicts: ProbeVerdicts; syncRequests: Requests<string> };
    pods: PodWorkersView;
    runtimePods: RuntimePodsView;
    metrics: KubeletMetrics;
    recorder: EventRecorder;
    random: () => number;
    /** The node's IP (a host-network pod's, for its probes). */
    hostIP: string | undefined;
  },
): { workers: PodWorkers; pleg: Pleg } {
  const { config, stack, clock, logger } = w;
  const { admission, cri, runtime, podHost, statusSink, allocation, prober, pods, runtimePods, metrics, recorder, random, hostIP } = o;
  const k = config.kubelet;
  // Each pod step's read, which the PLEG's relist checks its changes against before waking the pod.
  const cache = new PodStatusCache();
  const syncer = new HostPodSyncer({
    runtime,
    admission,
    host: podHost,
    status: statusSink,
    runtimePods,
    clock,
    logger,
    recorder,
    probes: prober.verdicts,
    metrics,
    ...(allocation ? { allocation } : {}),
    ...(hostIP ? { hostIP } : {}),
  });
  const workers: PodWorkers = stack.use(
    "pod workers",
    new PodWorkers({ syncer, clock, logger, resyncIntervalMs: k.syncFrequency, random, requests: prober.syncRequests, view: pods, metrics, cache }),
  );
  // Container events where the runtime streams them (falls back to relisting by itself where it does not);
  // featureGates EventedPLEG=false keeps the one-second relist only.
  const pleg: Pleg = stack.use(
    "PLEG",
    k.featureGates["EventedPLEG"] === false
      ? new GenericPleg({ runtime, clock, logger, metrics, view: runtimePods, cache })
      : new EventedPleg({ runtime, cri, clock, logger, metrics, view: runtimePods, cache }),
  );
  return { workers, pleg };
}
