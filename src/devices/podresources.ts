/**
 * The pod resources API, v1 (upstream pkg/kubelet/apis/podresources), on
 * `<rootDir>/pod-resources/kubelet.sock`: monitoring agents (GPU exporters,
 * topology-aware schedulers) ask which devices each container of each active
 * pod holds, and which devices the node can give. CPU and memory assignments
 * are empty: this agent has no CPU or memory manager (upstream's `none`
 * policies report the same).
 */
import type { ActivePods } from "../pods/active.ts";
import { mkdirSync } from "node:fs";
import { posix } from "node:path";
import { status as GrpcStatus } from "@grpc/grpc-js";
import type { Pod } from "../pods/schema.ts";
import type { Logger } from "../util/log.ts";
import { PodResourcesLister, type ContainerResources, type GetPodResourcesRequest, type PodResources } from "./gen/podresources/api.ts";
import { RpcError, serveUnix, type UnixServer } from "../util/grpc.ts";

export const POD_RESOURCES_SOCKET = "kubelet.sock";

export interface PodResourcesSource {
  /** Pod UID → container → resource → device IDs. */
  allocations(): Map<string, Map<string, Map<string, string[]>>>;
  /** Resource → healthy device IDs. */
  allocatable(): Map<string, string[]>;
}

export interface PodResourcesServerOptions {
  /** `<rootDir>/pod-resources`. */
  dir: string;
  devices: PodResourcesSource;
  /** The pods admitted and not terminated (upstream's active pods). */
  pods: Pick<ActivePods, "activePods">;
  /** The KubeletPodResourcesGet feature gate (beta, on by default in 1.34). */
  getEnabled: boolean;
  logger: Logger;
}

/** One pod as the API reports it: sidecars (restartable init containers) and app containers, with their devices. */
export function podResources(pod: Pod, allocations: Map<string, Map<string, string[]>> | undefined): PodResources {
  const containers = [...(pod.spec.initContainers ?? []).filter((c) => (c as { restartPolicy?: string }).restartPolicy === "Always"), ...pod.spec.containers];
  return {
    name: pod.metadata.name ?? "",
    namespace: pod.metadata.namespace ?? "default",
    containers: containers.map(
      (c): ContainerResources => ({
        name: c.name,
        devices: [...(allocations?.get(c.name) ?? new Map<string, string[]>())]
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([resourceName, ids]) => ({ resourceName, deviceIds: ids })),
        cpuIds: [],
        memory: [],
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
          const allocations = opts.devices.allocations();
          return { podResources: opts.pods.activePods().map((p) => podResources(p, allocations.get(p.metadata.uid ?? ""))) };
        },
        GetAllocatableResources: async () => ({
          devices: [...opts.devices.allocatable()].sort(([a], [b]) => a.localeCompare(b)).map(([resourceName, ids]) => ({ resourceName, deviceIds: ids })),
          cpuIds: [],
          memory: [],
        }),
        Get: async (req: GetPodResourcesRequest) => {
          if (!opts.getEnabled) throw new RpcError(GrpcStatus.UNKNOWN, "PodResources API Get method disabled");
          const pod = opts.pods.activePods().find((p) => p.metadata.name === req.podName && (p.metadata.namespace ?? "default") === req.podNamespace);
          if (!pod) throw new RpcError(GrpcStatus.UNKNOWN, `pod ${req.podName} in namespace ${req.podNamespace} not found`);
          return { podResources: podResources(pod, opts.devices.allocations().get(pod.metadata.uid ?? "")) };
        },
      },
    ],
  ]);
  opts.logger.info("pod resources API serving", { socket: server.socketPath });
  return server;
}
