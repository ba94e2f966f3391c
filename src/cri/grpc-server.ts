/**
 * Serves any CriService (normally FakeCri) as a real CRI gRPC endpoint on a
 * unix socket. Tests use it to drive the gRPC client through the wire
 * without containerd: errors with real status codes, deadlines, large
 * messages, the server going away and coming back. Not used by the agent.
 */
import { Server, ServerCredentials, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData, type UntypedServiceImplementation } from "@grpc/grpc-js";
import type { MethodInfo, ServiceType } from "@protobuf-ts/runtime-rpc";
import { unlinkSync } from "node:fs";
import { CriError, GrpcCode } from "./errors.ts";
import { ImageService as ImageServiceType, RuntimeService as RuntimeServiceType } from "./gen/api.ts";
import type * as api from "./gen/api.ts";
import type { CriService } from "./index.ts";

type Handler = (req: any, signal: AbortSignal) => Promise<object> | AsyncIterable<object>;

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

function implement(service: ServiceType, table: Record<string, Handler>): [Record<string, any>, UntypedServiceImplementation] {
  const definition: Record<string, any> = {};
  const impl: UntypedServiceImplementation = {};
  for (const m of service.methods as MethodInfo[]) {
    const handler = table[m.name];
    if (!handler) continue; // grpc-js answers UNIMPLEMENTED, as an older runtime would
    definition[m.name] = {
      path: `/${service.typeName}/${m.name}`,
      requestStream: false,
      responseStream: m.serverStreaming,
      requestSerialize: (v: object) => Buffer.from(m.I.toBinary(v)),
      requestDeserialize: (b: Buffer) => m.I.fromBinary(b),
      responseSerialize: (v: object) => Buffer.from(m.O.toBinary(m.O.create(v))),
      responseDeserialize: (b: Buffer) => m.O.fromBinary(b),
    };
    impl[m.name] = m.serverStreaming
      ? async (call: ServerWritableStream<object, object>) => {
          const abort = new AbortController();
          call.on("cancelled", () => abort.abort());
          try {
            for await (const msg of handler(call.request, abort.signal) as AsyncIterable<object>) call.write(msg);
            call.end();
          } catch (err) {
            call.destroy(Object.assign(new Error(grpcStatus(err).details), grpcStatus(err)));
          }
        }
      : (call: ServerUnaryCall<object, object>, callback: sendUnaryData<object>) => {
          (handler(call.request, new AbortController().signal) as Promise<object>).then(
            (res) => callback(null, res),
            (err) => callback(Object.assign(new Error(grpcStatus(err).details), grpcStatus(err))),
          );
        };
  }
  return [definition, impl];
}

export interface CriGrpcServer {
  socketPath: string;
  endpoint: string;
  /** Stops at once, failing calls in flight (like a runtime crash). */
  kill(): void;
}

/** Serves `cri` on `socketPath` (removing a stale socket file first). */
export async function serveCri(cri: CriService, socketPath: string): Promise<CriGrpcServer> {
  try {
    unlinkSync(socketPath);
  } catch {
    // absent: fine
  }
  // containerd's CRI server allows 16 MiB both ways too.
  const server = new Server({ "grpc.max_receive_message_length": 16 * 1024 * 1024, "grpc.max_send_message_length": 16 * 1024 * 1024 });
  const table = handlers(cri);
  for (const svc of [RuntimeServiceType, ImageServiceType]) {
    const [definition, impl] = implement(svc, table);
    server.addService(definition, impl);
  }
  const endpoint = `unix://${socketPath}`;
  await new Promise<void>((resolve, reject) => server.bindAsync(endpoint, ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  return {
    socketPath,
    endpoint,
    kill() {
      server.forceShutdown();
      try {
        unlinkSync(socketPath);
      } catch {
        // already gone
      }
    },
  };
}
