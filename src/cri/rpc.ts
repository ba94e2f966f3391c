/**
 * The CRI methods the client calls, for grpc-js's Client directly: each
 * one's HTTP/2 path and its generated message types' binary write and read.
 *
 * Not protobuf-ts's GrpcTransport and generated clients: their per-call
 * layer (interceptor stack, merged options, four Deferreds, metadata
 * copied both ways, an UnaryCall) was 1 to 13% of the CPU and 5 to 14% of
 * the heap allocated per PLEG relist pair, which runs every second
 * (scripts/bench/cri-call-cost.ts; docs/benchmarks.md). The generated
 * types stay the contract: each entry is checked against the generated
 * ServiceType when this module loads, so a wrong name or type fails the
 * agent's start, not a call.
 */
import type { IMessageType } from "@protobuf-ts/runtime";
import type { ServiceType } from "@protobuf-ts/runtime-rpc";
import {
  AttachRequest,
  AttachResponse,
  ContainerEventResponse,
  ContainerStatsRequest,
  ContainerStatsResponse,
  ContainerStatusRequest,
  ContainerStatusResponse,
  CreateContainerRequest,
  CreateContainerResponse,
  ExecRequest,
  ExecResponse,
  ExecSyncRequest,
  ExecSyncResponse,
  GetEventsRequest,
  ImageFsInfoRequest,
  ImageFsInfoResponse,
  ImageService,
  ImageStatusRequest,
  ImageStatusResponse,
  ListContainerStatsRequest,
  ListContainerStatsResponse,
  ListContainersRequest,
  ListContainersResponse,
  ListImagesRequest,
  ListImagesResponse,
  ListPodSandboxRequest,
  ListPodSandboxResponse,
  ListPodSandboxStatsRequest,
  ListPodSandboxStatsResponse,
  PodSandboxStatusRequest,
  PodSandboxStatusResponse,
  PortForwardRequest,
  PortForwardResponse,
  PullImageRequest,
  PullImageResponse,
  RemoveContainerRequest,
  RemoveContainerResponse,
  RemoveImageRequest,
  RemoveImageResponse,
  RemovePodSandboxRequest,
  RemovePodSandboxResponse,
  ReopenContainerLogRequest,
  ReopenContainerLogResponse,
  RunPodSandboxRequest,
  RunPodSandboxResponse,
  RuntimeConfigRequest,
  RuntimeConfigResponse,
  RuntimeService,
  StartContainerRequest,
  StartContainerResponse,
  StatusRequest,
  StatusResponse,
  StopContainerRequest,
  StopContainerResponse,
  StopPodSandboxRequest,
  StopPodSandboxResponse,
  UpdateContainerResourcesRequest,
  UpdateContainerResourcesResponse,
  UpdateRuntimeConfigRequest,
  UpdateRuntimeConfigResponse,
  VersionRequest,
  VersionResponse,
} from "./gen/api.ts";

export interface Rpc<I extends object, O extends object> {
  /** The method's name on the wire, e.g. "ListContainers"; errors and logs name it. */
  readonly name: string;
  /** The HTTP/2 path: `/runtime.v1.RuntimeService/ListContainers`. */
  readonly path: string;
  /** grpc-js's serializer: the generated binary write, the bytes not copied again. */
  readonly serialize: (input: I) => Buffer;
  /** grpc-js's deserializer: the generated binary read (unknown fields kept, as protobuf-ts's default). */
  readonly deserialize: (bytes: Buffer) => O;
}

export class RpcDefinitionError extends Error {
  override readonly name = "RpcDefinitionError";
}

/** One method of a generated service, checked against the service's own description. */
export function rpc<I extends object, O extends object>(service: ServiceType, name: string, input: IMessageType<I>, output: IMessageType<O>): Rpc<I, O> {
  const method = service.methods.find((m) => m.name === name);
  if (!method) throw new RpcDefinitionError(`${service.typeName} has no method ${name}`);
  if (method.I !== input || method.O !== output) {
    throw new RpcDefinitionError(`${service.typeName}/${name} takes ${method.I.typeName} and answers ${method.O.typeName}, not ${input.typeName} and ${output.typeName}`);
  }
  return {
    name,
    path: `/${service.typeName}/${name}`,
    serialize(value) {
      const bytes = input.toBinary(value);
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
    deserialize: (bytes) => output.fromBinary(bytes),
  };
}

export const RUNTIME = {
  version: rpc(RuntimeService, "Version", VersionRequest, VersionResponse),
  runPodSandbox: rpc(RuntimeService, "RunPodSandbox", RunPodSandboxRequest, RunPodSandboxResponse),
  stopPodSandbox: rpc(RuntimeService, "StopPodSandbox", StopPodSandboxRequest, StopPodSandboxResponse),
  removePodSandbox: rpc(RuntimeService, "RemovePodSandbox", RemovePodSandboxRequest, RemovePodSandboxResponse),
  podSandboxStatus: rpc(RuntimeService, "PodSandboxStatus", PodSandboxStatusRequest, PodSandboxStatusResponse),
  listPodSandbox: rpc(RuntimeService, "ListPodSandbox", ListPodSandboxRequest, ListPodSandboxResponse),
  createContainer: rpc(RuntimeService, "CreateContainer", CreateContainerRequest, CreateContainerResponse),
  startContainer: rpc(RuntimeService, "StartContainer", StartContainerRequest, StartContainerResponse),
  stopContainer: rpc(RuntimeService, "StopContainer", StopContainerRequest, StopContainerResponse),
  removeContainer: rpc(RuntimeService, "RemoveContainer", RemoveContainerRequest, RemoveContainerResponse),
  listContainers: rpc(RuntimeService, "ListContainers", ListContainersRequest, ListContainersResponse),
  containerStatus: rpc(RuntimeService, "ContainerStatus", ContainerStatusRequest, ContainerStatusResponse),
  updateContainerResources: rpc(RuntimeService, "UpdateContainerResources", UpdateContainerResourcesRequest, UpdateContainerResourcesResponse),
  reopenContainerLog: rpc(RuntimeService, "ReopenContainerLog", ReopenContainerLogRequest, ReopenContainerLogResponse),
  execSync: rpc(RuntimeService, "ExecSync", ExecSyncRequest, ExecSyncResponse),
  exec: rpc(RuntimeService, "Exec", ExecRequest, ExecResponse),
  attach: rpc(RuntimeService, "Attach", AttachRequest, AttachResponse),
  portForward: rpc(RuntimeService, "PortForward", PortForwardRequest, PortForwardResponse),
  containerStats: rpc(RuntimeService, "ContainerStats", ContainerStatsRequest, ContainerStatsResponse),
  listContainerStats: rpc(RuntimeService, "ListContainerStats", ListContainerStatsRequest, ListContainerStatsResponse),
  listPodSandboxStats: rpc(RuntimeService, "ListPodSandboxStats", ListPodSandboxStatsRequest, ListPodSandboxStatsResponse),
  updateRuntimeConfig: rpc(RuntimeService, "UpdateRuntimeConfig", UpdateRuntimeConfigRequest, UpdateRuntimeConfigResponse),
  status: rpc(RuntimeService, "Status", StatusRequest, StatusResponse),
  getContainerEvents: rpc(RuntimeService, "GetContainerEvents", GetEventsRequest, ContainerEventResponse),
  runtimeConfig: rpc(RuntimeService, "RuntimeConfig", RuntimeConfigRequest, RuntimeConfigResponse),
} as const;

export const IMAGE = {
  listImages: rpc(ImageService, "ListImages", ListImagesRequest, ListImagesResponse),
  imageStatus: rpc(ImageService, "ImageStatus", ImageStatusRequest, ImageStatusResponse),
  pullImage: rpc(ImageService, "PullImage", PullImageRequest, PullImageResponse),
  removeImage: rpc(ImageService, "RemoveImage", RemoveImageRequest, RemoveImageResponse),
  imageFsInfo: rpc(ImageService, "ImageFsInfo", ImageFsInfoRequest, ImageFsInfoResponse),
} as const;
