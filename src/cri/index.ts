/**
 * The CRI facade: the only view of the container runtime the rest of the
 * agent has. Two implementations share one contract suite (contract.ts):
 * the gRPC client for containerd / CRI-O (client.ts, which loads grpc-js,
 * so import it only from the wiring) and FakeCri (fake.ts).
 *
 * Messages are the generated protobuf-ts types (gen/api.ts). Each message
 * name is both a type and a value with `.create(partial)`, which fills
 * defaults: build configs with `PodSandboxConfig.create({...})`.
 * Timestamps are int64 nanoseconds since the epoch, as bigint.
 *
 * Errors: every method rejects only with CriError (errors.ts). Branch on
 * `kind`; `isNotFound` makes removals idempotent the way the kubelet does.
 */
import type { PartialMessage } from "@protobuf-ts/runtime";
import type {
  AuthConfig,
  Container,
  ContainerConfig,
  ContainerEventResponse,
  ContainerFilter,
  ContainerStats,
  ContainerStatsFilter,
  ContainerStatusResponse,
  ExecRequest,
  AttachRequest,
  ExecSyncResponse,
  Image,
  ImageFilter,
  ImageFsInfoResponse,
  ImageSpec,
  LinuxContainerResources,
  PodSandbox,
  PodSandboxConfig,
  PodSandboxFilter,
  PodSandboxStats,
  PodSandboxStatsFilter,
  PodSandboxStatusResponse,
  RuntimeConfigResponse,
  StatusResponse,
  VersionResponse,
} from "./gen/api.ts";

export {
  AttachRequest,
  AuthConfig,
  Capability,
  CDIDevice,
  CgroupDriver,
  Container,
  ContainerConfig,
  ContainerEventResponse,
  ContainerEventType,
  ContainerFilter,
  ContainerMetadata,
  ContainerResources,
  ContainerState,
  ContainerStateValue,
  ContainerStats,
  ContainerStatsFilter,
  ContainerStatus,
  ContainerStatusResponse,
  CpuUsage,
  Device,
  DNSConfig,
  ExecRequest,
  ExecSyncResponse,
  FilesystemUsage,
  HugepageLimit,
  Image,
  ImageFilter,
  ImageFsInfoResponse,
  ImageSpec,
  Int64Value,
  KeyValue,
  LinuxContainerConfig,
  LinuxContainerResources,
  LinuxContainerSecurityContext,
  LinuxPodSandboxConfig,
  LinuxSandboxSecurityContext,
  MemoryUsage,
  Mount,
  MountPropagation,
  NamespaceMode,
  NamespaceOption,
  PodSandbox,
  PodSandboxConfig,
  PodSandboxFilter,
  PodSandboxMetadata,
  PodSandboxNetworkStatus,
  PodSandboxState,
  PodSandboxStateValue,
  PodSandboxStats,
  PodSandboxStatsFilter,
  PodSandboxStatus,
  PodSandboxStatusResponse,
  PortMapping,
  Protocol,
  RuntimeCondition,
  RuntimeConfigResponse,
  RuntimeStatus,
  SecurityProfile,
  SecurityProfile_ProfileType,
  SELinuxOption,
  Signal,
  StatusResponse,
  UInt64Value,
  UserNamespace,
  VersionResponse,
} from "./gen/api.ts";
export { CriError, goRpcError, isCriError, isNotFound, isUnavailable, runtimeMessage, toCriError, type CriErrorKind } from "./errors.ts";
export { parseEndpoint, EndpointError, type CriEndpoint } from "./endpoint.ts";

/**
 * Inputs may be partial: unset fields take protobuf defaults. So
 * `listContainers({ labelSelector })` and `imageStatus({ image: ref })` work,
 * and so does a complete message built with `X.create()`.
 */
export type In<T extends object> = PartialMessage<T>;

/** The CRI API version this agent speaks (sent in VersionRequest). */
export const CRI_API_VERSION = "v1";

/** Runtime condition types the kubelet requires for a ready node. */
export const RUNTIME_READY = "RuntimeReady";
export const NETWORK_READY = "NetworkReady";

export interface RuntimeService {
  /** Runtime name and versions. Called at startup and as a liveness check of the runtime. */
  version(): Promise<VersionResponse>;
  /** RuntimeReady / NetworkReady conditions; polled by the node status loop. */
  status(verbose?: boolean): Promise<StatusResponse>;
  /** The runtime's cgroup driver. Older runtimes (containerd 1.6) reject it with kind Unimplemented. */
  runtimeConfig(): Promise<RuntimeConfigResponse>;
  /** Tells the runtime the node's pod CIDR once it is known. */
  updateRuntimeConfig(podCidr: string): Promise<void>;

  /** Creates and starts a sandbox; resolves to its id once it is READY. Not idempotent: each call makes a new sandbox. */
  runPodSandbox(config: In<PodSandboxConfig>, runtimeHandler?: string): Promise<string>;
  /** Stops every container in the sandbox and releases its network. Idempotent; may be called many times. */
  stopPodSandbox(podSandboxId: string): Promise<void>;
  /** Removes the sandbox and all its containers. Idempotent: an already removed sandbox is not an error. */
  removePodSandbox(podSandboxId: string): Promise<void>;
  /** Rejects with kind NotFound for an unknown id. */
  podSandboxStatus(podSandboxId: string, verbose?: boolean): Promise<PodSandboxStatusResponse>;
  listPodSandbox(filter?: In<PodSandboxFilter>): Promise<PodSandbox[]>;

  /** Creates a container in a READY sandbox; resolves to its id. NotFound for an unknown sandbox. */
  createContainer(podSandboxId: string, config: In<ContainerConfig>, sandboxConfig: In<PodSandboxConfig>): Promise<string>;
  startContainer(containerId: string): Promise<void>;
  /** Signals the container, waits up to `timeoutSeconds`, then kills it. Idempotent on a stopped container. */
  stopContainer(containerId: string, timeoutSeconds: number): Promise<void>;
  /** Removes the container, killing it if running. Idempotent: an already removed container is not an error. */
  removeContainer(containerId: string): Promise<void>;
  listContainers(filter?: In<ContainerFilter>): Promise<Container[]>;
  /** Rejects with kind NotFound for an unknown id. */
  containerStatus(containerId: string, verbose?: boolean): Promise<ContainerStatusResponse>;
  /** In-place resize: new cgroup limits for a running container. */
  updateContainerResources(containerId: string, linux: In<LinuxContainerResources>, annotations?: Record<string, string>): Promise<void>;
  /** Asks the runtime to reopen the container's log file after rotation. */
  reopenContainerLog(containerId: string): Promise<void>;

  /**
   * Runs a command to completion (exec probes). A non-zero exit is a normal
   * response, not an error. `timeoutSeconds` 0 means no limit; otherwise
   * the call's deadline is the timeout plus the request timeout, as upstream.
   * Aborting `signal` cancels the call (kind Canceled), as a cancelled context does upstream.
   */
  execSync(containerId: string, cmd: string[], timeoutSeconds: number, signal?: AbortSignal): Promise<ExecSyncResponse>;
  /** URL on the runtime's streaming server for `kubectl exec`. */
  exec(request: In<ExecRequest> & { containerId: string }): Promise<string>;
  /** URL on the runtime's streaming server for `kubectl attach`. */
  attach(request: In<AttachRequest> & { containerId: string }): Promise<string>;
  /** URL on the runtime's streaming server for `kubectl port-forward`. */
  portForward(podSandboxId: string, ports: number[]): Promise<string>;

  /** Stats of the container; NotFound for an unknown id. */
  containerStats(containerId: string): Promise<ContainerStats>;
  listContainerStats(filter?: In<ContainerStatsFilter>): Promise<ContainerStats[]>;
  listPodSandboxStats(filter?: In<PodSandboxStatsFilter>): Promise<PodSandboxStats[]>;

  /**
   * Container lifecycle events (evented PLEG), until `signal` aborts, which
   * ends the iteration without an error. The stream has no deadline. Older
   * runtimes reject with kind Unimplemented: fall back to relisting.
   */
  containerEvents(signal: AbortSignal): AsyncIterable<ContainerEventResponse>;
}

export interface PullOptions {
  /** Aborting cancels the pull (kind Canceled). Pulls have no deadline otherwise, as upstream. */
  signal?: AbortSignal;
}

export interface ImageService {
  listImages(filter?: In<ImageFilter>): Promise<Image[]>;
  /** Resolves to undefined when the image is not present (not an error, per CRI). */
  imageStatus(image: In<ImageSpec>): Promise<Image | undefined>;
  /** Pulls and resolves to the image reference (usually its id/digest). No deadline. */
  pullImage(image: In<ImageSpec>, auth?: In<AuthConfig>, sandboxConfig?: In<PodSandboxConfig>, opts?: PullOptions): Promise<string>;
  /** Idempotent: removing an absent image is not an error. */
  removeImage(image: In<ImageSpec>): Promise<void>;
  imageFsInfo(): Promise<ImageFsInfoResponse>;
}

/** What the agent holds: both services and a way to release the connection. `close` is idempotent. */
export type CriService = RuntimeService & ImageService & { close(): void };
