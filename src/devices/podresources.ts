/**
 * The pod resources API, v1 (upstream pkg/kubelet/apis/podresources), on
 * `<rootDir>/pod-resources/kubelet.sock`: monitoring agents (GPU exporters,
 * topology-aware schedulers) ask which devices each container of each active
 * pod holds (with its exclusive CPUs of the static CPU manager and its
 * NUMA-pinned memory of the Static memory manager), and which devices, CPUs
 * and memory the node can give. With the `none`/`None` policies the CPU and
 * memory lists are empty, as upstream reports them.
 */
import type { ActivePods } from "../pods/active.ts";
import { mkdirSync } from "node:fs";
import { posix } from "node:path";
import { status as GrpcStatus } from "@grpc/grpc-js";
import type { Pod } from "../pods/schema.ts";
import type { Logger } from "../util/log.ts";
import { PodResourcesLister, type ContainerDevices, type ContainerResources, type GetPodResourcesRequest, type PodResources } from "./gen/podresources/api.ts";
import { RpcError, serveUnix, type UnixServer } from "../util/grpc.ts";
import { podUid } from "../pods/identity.ts";

export const POD_RESOURCES_SOCKET = "kubelet.sock";

/** One device and the NUMA nodes its plugin reports it on (none: no topology). */
export interface DeviceInstance {
  id: string;
  numa: readonly number[];
}

export interface PodResourcesSource {
  /** Pod UID → container → resource → its devices, with the nodes they were on when given (upstream's checkpointed DevicesPerNUMA). */
  devicesInUse(): Map<string, Map<string, Map<string, DeviceInstance[]>>>;
  /** Resource → healthy devices, with the nodes their plugin reports now. */
  allocatableDevices(): Map<string, DeviceInstance[]>;
}

/**
 * upstream containerDevicesFromResourceDeviceInstances: one ContainerDevices
 * per device and NUMA node (a device on two nodes is listed twice), with
 * `topology` naming that node; a device without topology is listed once
 * without it. Resources by name, nodes ascending.
 */
export function containerDevices(byResource: ReadonlyMap<string, readonly DeviceInstance[]>): ContainerDevices[] {
  return [...byResource]
    .sort(([a], [b]) => a.localeCompare(b))
    .flatMap(([resourceName, devices]) =>
      devices.flatMap((d): ContainerDevices[] =>
        d.numa.length === 0
          ? [{ resourceName, deviceIds: [d.id] }]
          : [...d.numa].sort((a, b) => a - b).map((node) => ({ resourceName, deviceIds: [d.id], topology: { nodes: [{ iD: BigInt(node) }] } })),
      ),
    );
}

/** A memory block as the memory manager holds it (upstream's state.Block); reported as upstream's containerMemoryFromBlock. */
export interface MemoryBlock {
  type: string;
  size: number;
  numaAffinity: readonly number[] | null;
}

/** What the CPU manager holds (upstream GetCPUs, GetAllocatableCPUs). */
export interface ExclusiveCpus {
  /** A container's exclusive CPUs (empty on the shared pool or with the none policy). */
  exclusiveCpus(podUid: string, container: string): readonly number[];
  /** The CPUs the static policy can give (all but the reserved ones); empty with none. */
  allocatableCpus(): readonly number[];
}

/** What the memory manager holds (upstream GetMemory, GetAllocatableMemory). */
export interface PinnedMemory {
  /** A container's pinned memory blocks; empty with the None policy. */
  memoryOf(podUid: string, container: string): readonly MemoryBlock[];
  /** Each NUMA node's allocatable memory per type; empty with the None policy. */
  allocatableMemory(): readonly MemoryBlock[];
}

/** The CPU and memory managers, as the pod resources API reports them. */
export interface ComputeResourcesSource {
  cpus: ExclusiveCpus;
  memory: PinnedMemory;
}

export const NO_COMPUTE_RESOURCES: ComputeResourcesSource = {
  cpus: { exclusiveCpus: () => [], allocatableCpus: () => [] },
  memory: { memoryOf: () => [], allocatableMemory: () => [] },
};

const memoryOf = (blocks: readonly MemoryBlock[]) =>
  blocks.map((b) => ({ memoryType: b.type, size: BigInt(b.size), topology: { nodes: (b.numaAffinity ?? []).map((id) => ({ iD: BigInt(id) })) } }));

export interface PodResourcesServerOptions {
  /** `<rootDir>/pod-resources`. */
  dir: string;
  devices: PodResourcesSource;
  compute: ComputeResourcesSource;
  /** The pods admitted and not terminated (upstream's active pods). */
  pods: Pick<ActivePods, "activePods">;
  /** The KubeletPodResourcesGet feature gate (beta, on by default in 1.34). */
  getEnabled: boolean;
  logger: Logger;
}

/** One pod as the API reports it: sidecars (restartable init containers) and app containers, with their devices, exclusive CPUs and pinned memory. */
export function podResources(
  pod: Pod,
  devices: ReadonlyMap<string, ReadonlyMap<string, readonly DeviceInstance[]>> | undefined,
  compute: ComputeResourcesSource = NO_COMPUTE_RESOURCES,
): PodResources {
  const uid = podUid(pod);
  const containers = [...(pod.spec.initContainers ?? []).filter((c) => (c as { restartPolicy?: string }).restartPolicy === "Always"), ...pod.spec.containers];
  return {
    name: pod.metadata.name ?? "",
    namespace: pod.metadata.namespace ?? "default",
    containers: containers.map(
      (c): ContainerResources => ({
        name: c.name,
        devices: containerDevices(devices?.get(c.name) ?? new Map()),
        cpuIds: compute.cpus.exclusiveCpus(uid, c.name).map(BigInt),
        memory: memoryOf(compute.memory.memoryOf(uid, c.name)),
        dynamicResources: [],
      }),
    ),
  };
}

export async function servePodResources(opts: PodResourcesServerOptions): Promise<UnixServer> {
  mkdirSync(opts.dir, { recursive: true, mode: 0o750 });
  const server = await serveUnix(posix.join(opts.dir, POD_RESOURCES_SOCKET), [
    [
      PodResourcesLister,
      {
        List: async () => {
          const inUse = opts.devices.devicesInUse();
          return { podResources: opts.pods.activePods().map((p) => podResources(p, inUse.get(podUid(p)), opts.compute)) };
        },
        GetAllocatableResources: async () => ({
          devices: containerDevices(opts.devices.allocatableDevices()),
          cpuIds: opts.compute.cpus.allocatableCpus().map(BigInt),
          memory: memoryOf(opts.compute.memory.allocatableMemory()),
        }),
        Get: async (req: GetPodResourcesRequest) => {
          if (!opts.getEnabled) throw new RpcError(GrpcStatus.UNKNOWN, "PodResources API Get method disabled");
          const pod = opts.pods.activePods().find((p) => p.metadata.name === req.podName && (p.metadata.namespace ?? "default") === req.podNamespace);
          if (!pod) throw new RpcError(GrpcStatus.UNKNOWN, `pod ${req.podName} in namespace ${req.podNamespace} not found`);
          return { podResources: podResources(pod, opts.devices.devicesInUse().get(podUid(pod)), opts.compute) };
        },
      },
    ],
  ]);
  opts.logger.info("pod resources API serving", { socket: server.socketPath });
  return server;
}
