/**
 * Serves any CriService (normally FakeCri) as a real CRI gRPC endpoint on a
 * unix socket. Tests use it to drive the gRPC client through the wire
 * without containerd: errors with real status codes, deadlines, large
 * messages, the server going away and coming back. Not used by the agent.
 */
import { CriError, GrpcCode } from "./errors.ts";
import { ImageService as ImageServiceType, RuntimeService as RuntimeServiceType } from "./gen/api.ts";
import type * as api from "./gen/api.ts";
import type { CriService } from "./index.ts";
import { type Handler, serveUnix } from "../util/grpc.ts";

function handlers(cri: CriService): Record<string, Handler> {
  return {
    Version: () => cri.version(),
    Status: (r: api.StatusRequest) => cri.status(r.verbose),
    RuntimeConfig: () => cri.runtimeConfig(),
    UpdateRuntimeConfig: async (r: api.UpdateRuntimeConfigRequest) => (await cri.updateRuntimeConfig(r.runtimeConfig?.networkConfig?.podCidr ?? ""), {}),
    RunPodSandbox: async (r: api.RunPodSandboxRequest) => ({ podSandboxId: await cri.runPodSandbox(r.config ?? {}, r.runtimeHandler) }),
    StopPodSandbox: async (r: api.StopPodSandboxRequest) => (await cri.stopPodSandbox(r.podSandboxId), {}),
    RemovePodSandbox: async (r: api.RemovePodSandboxRequest) => (await cri.removePodSandbox(r.podSandboxId), {}),
    PodSandboxStatus: (r: api.PodSandboxStatusRequest) => cri.podSandboxStatus(r.podSandboxId, r.verbose),
    ListPodSandbox: async (r: api.ListPodSandboxRequest) => ({ items: await cri.listPodSandbox(r.filter) }),
    CreateContainer: async (r: api.CreateContainerRequest) => ({
      containerId: await cri.createContainer(r.podSandboxId, r.config ?? {}, r.sandboxConfig ?? {}),
    }),
    StartContainer: async (r: api.StartContainerRequest) => (await cri.startContainer(r.containerId), {}),
    StopContainer: async (r: api.StopContainerRequest) => (await cri.stopContainer(r.containerId, Number(r.timeout)), {}),
    RemoveContainer: async (r: api.RemoveContainerRequest) => (await cri.removeContainer(r.containerId), {}),
    ListContainers: async (r: api.ListContainersRequest) => ({ containers: await cri.listContainers(r.filter) }),
    ContainerStatus: (r: api.ContainerStatusRequest) => cri.containerStatus(r.containerId, r.verbose),
    UpdateContainerResources: async (r: api.UpdateContainerResourcesRequest) => (await cri.updateContainerResources(r.containerId, r.linux ?? {}, r.annotations), {}),
    ReopenContainerLog: async (r: api.ReopenContainerLogRequest) => (await cri.reopenContainerLog(r.containerId), {}),
    ExecSync: (r: api.ExecSyncRequest) => cri.execSync(r.containerId, r.cmd, Number(r.timeout)),
    Exec: async (r: api.ExecRequest) => ({ url: await cri.exec(r) }),
    Attach: async (r: api.AttachRequest) => ({ url: await cri.attach(r) }),
    PortForward: async (r: api.PortForwardRequest) => ({ url: await cri.portForward(r.podSandboxId, r.port) }),
    ContainerStats: async (r: api.ContainerStatsRequest) => ({ stats: await cri.containerStats(r.containerId) }),
    ListContainerStats: async (r: api.ListContainerStatsRequest) => ({ stats: await cri.listContainerStats(r.filter) }),
    ListPodSandboxStats: async (r: api.ListPodSandboxStatsRequest) => ({ stats: await cri.listPodSandboxStats(r.filter) }),
    GetContainerEvents: (_r: api.GetEventsRequest, signal: AbortSignal) => cri.containerEvents(signal),
    ListImages: async (r: api.ListImagesRequest) => ({ images: await cri.listImages(r.filter) }),
    ImageStatus: async (r: api.ImageStatusRequest) => ({ image: await cri.imageStatus(r.image ?? {}), info: {} }),
    PullImage: async (r: api.PullImageRequest) => ({ imageRef: await cri.pullImage(r.image ?? {}, r.auth, r.sandboxConfig) }),
    RemoveImage: async (r: api.RemoveImageRequest) => (await cri.removeImage(r.image ?? {}), {}),
    ImageFsInfo: () => cri.imageFsInfo(),
  };
}

function grpcStatus(err: unknown): { code: number; details: string } {
  if (err instanceof CriError) return { code: err.code, details: err.detail };
  return { code: GrpcCode.UNKNOWN, details: err instanceof Error ? err.message : String(err) };
}

export interface CriGrpcServer {
  socketPath: string;
  endpoint: string;
  /** Stops at once, failing calls in flight (like a runtime crash). */
  kill(): void;
}

/** Serves `cri` on `socketPath` (removing a stale socket file first). */
export async function serveCri(cri: CriService, socketPath: string): Promise<CriGrpcServer> {
  const table = handlers(cri);
  // containerd's CRI server allows 16 MiB both ways too.
  const server = await serveUnix(
    socketPath,
    [
      [RuntimeServiceType, table],
      [ImageServiceType, table],
    ],
    { server: { "grpc.max_receive_message_length": 16 * 1024 * 1024, "grpc.max_send_message_length": 16 * 1024 * 1024 }, statusOf: grpcStatus },
  );
  return { socketPath, endpoint: `unix://${socketPath}`, kill: () => server.close() };
}
