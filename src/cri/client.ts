/**
 * The CRI facade over gRPC: protobuf-ts generated clients on
 * @protobuf-ts/grpc-transport and @grpc/grpc-js, dialing a unix socket.
 *
 * Mirrors the upstream kubelet's remote runtime client
 * (k8s.io/cri-client/pkg/remote_runtime.go, remote_image.go):
 * - every call has a deadline of `requestTimeoutMs` (runtimeRequestTimeout,
 *   2 minutes by default); StopContainer and ExecSync add their own timeout
 *   to it; PullImage and the event stream have none;
 * - messages up to 16 MiB both ways (grpc-js defaults to 4 MiB received);
 * - reconnect backoff from 100 ms up to 3 s, as upstream. grpc-js channels
 *   reconnect by themselves, but a channel in backoff (TRANSIENT_FAILURE)
 *   fails every call until its timer fires, so a runtime that is back would
 *   still be refused for up to 3 s. A call that finds its channel in backoff
 *   therefore redials first (a fresh channel, one connect attempt): while
 *   the runtime is down each call fails fast with kind Unavailable, and the
 *   first call after it is back succeeds. On a unix socket a failed connect
 *   costs well under a millisecond, so no backoff is lost that matters.
 *
 * Each call also has a local watchdog a little after its deadline, so that
 * no transport bug can leave a caller waiting forever (NOTES.md lists Bun
 * HTTP/2 releases that hung on large messages).
 */
import { Channel, ChannelCredentials, connectivityState, type ChannelOptions } from "@grpc/grpc-js";
import { GrpcTransport } from "@protobuf-ts/grpc-transport";
import type { RpcOptions, ServerStreamingCall, UnaryCall } from "@protobuf-ts/runtime-rpc";
import type { Logger } from "../util/log.ts";
import { CriError, toCriError } from "./errors.ts";
import { parseEndpoint } from "./endpoint.ts";
import { ImageServiceClient, RuntimeServiceClient } from "./gen/api.client.ts";
import {
  AttachRequest,
  CreateContainerRequest,
  ExecRequest,
  ListContainerStatsRequest,
  ListContainersRequest,
  ListImagesRequest,
  ListPodSandboxRequest,
  ListPodSandboxStatsRequest,
  PullImageRequest,
  RemoveImageRequest,
  RunPodSandboxRequest,
  ImageStatusRequest,
  UpdateContainerResourcesRequest,
  type ContainerEventResponse,
} from "./gen/api.ts";
import { CRI_API_VERSION, type CriService } from "./index.ts";

export interface CriClientOptions {
  /** Runtime endpoint: `unix:///run/containerd/containerd.sock` or a bare absolute path. */
  endpoint: string;
  /** Image service endpoint; defaults to `endpoint` (one shared connection). */
  imageEndpoint?: string;
  /** Deadline for each call; the kubelet's runtimeRequestTimeout. Default 2 minutes. */
  requestTimeoutMs?: number;
  logger: Logger;
  /** Largest message sent or received. Default 16 MiB, as the upstream kubelet. */
  maxMessageBytes?: number;
}

export const DEFAULT_REQUEST_TIMEOUT_MS = 2 * 60 * 1000;
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
/** How long after a call's deadline the local watchdog gives up on grpc-js. */
const WATCHDOG_GRACE_MS = 2000;

export function channelOptions(maxMessageBytes: number): ChannelOptions {
  return {
    "grpc.max_receive_message_length": maxMessageBytes,
    "grpc.max_send_message_length": maxMessageBytes,
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 3000,
  };
}

function ids(n: number | bigint): bigint {
  return typeof n === "bigint" ? n : BigInt(Math.trunc(n));
}

export function createCriClient(opts: CriClientOptions): CriService {
  const timeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  if (!(timeoutMs > 0)) throw new RangeError(`requestTimeoutMs must be positive, got ${timeoutMs}`);
  const maxBytes = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const log = opts.logger.with({ component: "cri" });

  const runtimeEp = parseEndpoint(opts.endpoint);
  const imageEp = parseEndpoint(opts.imageEndpoint || opts.endpoint);
  for (const ep of runtimeEp.target === imageEp.target ? [runtimeEp] : [runtimeEp, imageEp]) {
    if (ep.deprecatedForm) log.warn("CRI endpoint without unix:// is deprecated; use unix://" + ep.path, { endpoint: ep.path });
  }
  const runtimeConn = new Connection(runtimeEp.target, channelOptions(maxBytes), log);
  const imageConn = imageEp.target === runtimeEp.target ? runtimeConn : new Connection(imageEp.target, channelOptions(maxBytes), log);
  // Resolved per call, so that a redialed channel is used at once.
  const rt = () => runtimeConn.ready().runtime;
  const img = () => imageConn.ready().image;
  log.v(2).info("CRI client created", { endpoint: runtimeEp.target, imageEndpoint: imageEp.target, timeoutMs });

  let closed = false;

  /**
   * Runs one unary call with a deadline (ms from now; undefined for none),
   * converting every failure into a CriError naming the method and target.
   */
  async function unary<I extends object, O extends object>(
    method: string,
    target: string | undefined,
    deadlineMs: number | undefined,
    start: (options: RpcOptions) => UnaryCall<I, O>,
    signal?: AbortSignal,
  ): Promise<O> {
    if (closed) throw new CriError({ kind: "Canceled", method, target, detail: "CRI client is closed" });
    const began = performance.now();
    const abort = new AbortController();
    const options: RpcOptions = { abort: abort.signal };
    if (deadlineMs !== undefined) options.timeout = deadlineMs;
    let watchdogFired = false;
    const watchdog =
      deadlineMs === undefined
        ? undefined
        : setTimeout(() => {
            watchdogFired = true;
            abort.abort();
          }, deadlineMs + WATCHDOG_GRACE_MS);
    const onAbort = () => abort.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      if (signal?.aborted) abort.abort();
      const call = start(options);
      const response = await call.response;
      log.v(10).info("CRI call", { method, ...(target === undefined ? {} : { target }), ms: Math.round(performance.now() - began) });
      return response;
    } catch (err) {
      let e = toCriError(err, method, target);
      // The caller cancelled: grpc-go's words for a cancelled context, which upstream's events and statuses carry.
      if (signal?.aborted) e = new CriError({ kind: "Canceled", method, target, detail: "context canceled", cause: err });
      if (watchdogFired) {
        e = new CriError({
          kind: "DeadlineExceeded",
          method,
          target,
          detail: `no answer ${WATCHDOG_GRACE_MS} ms after the ${deadlineMs} ms deadline; call cancelled locally`,
          cause: err,
        });
      }
      const fields = { method, ...(target === undefined ? {} : { target }), kind: e.kind, ms: Math.round(performance.now() - began), err: e.detail };
      // NotFound is an answer, and Unimplemented is how a runtime says it lacks an optional call
      // (RuntimeConfig, GetContainerEvents on containerd 1.6): the caller decides what they mean.
      if (e.kind === "NotFound" || e.kind === "Unimplemented") log.v(4).info("CRI call failed", fields);
      else log.warn("CRI call failed", fields);
      throw e;
    } finally {
      if (watchdog) clearTimeout(watchdog);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  const client: CriService = {
    // --- runtime as a whole -------------------------------------------------
    version: () => unary("Version", undefined, timeoutMs, (o) => rt().version({ version: CRI_API_VERSION }, o)),

    status: (verbose = false) => unary("Status", undefined, timeoutMs, (o) => rt().status({ verbose }, o)),

    runtimeConfig: () => unary("RuntimeConfig", undefined, timeoutMs, (o) => rt().runtimeConfig({}, o)),

    async updateRuntimeConfig(podCidr) {
      await unary("UpdateRuntimeConfig", podCidr, timeoutMs, (o) => rt().updateRuntimeConfig({ runtimeConfig: { networkConfig: { podCidr } } }, o));
    },

    // --- sandboxes ----------------------------------------------------------
    async runPodSandbox(config, runtimeHandler = "") {
      const name = config.metadata ? `${config.metadata.namespace}/${config.metadata.name}` : undefined;
      const r = await unary("RunPodSandbox", name, timeoutMs, (o) => rt().runPodSandbox(RunPodSandboxRequest.create({ config, runtimeHandler }), o));
      if (!r.podSandboxId) throw new CriError({ kind: "Unknown", method: "RunPodSandbox", target: name, detail: "runtime returned an empty sandbox id" });
      return r.podSandboxId;
    },

    async stopPodSandbox(podSandboxId) {
      await unary("StopPodSandbox", podSandboxId, timeoutMs, (o) => rt().stopPodSandbox({ podSandboxId }, o));
    },

    async removePodSandbox(podSandboxId) {
      await unary("RemovePodSandbox", podSandboxId, timeoutMs, (o) => rt().removePodSandbox({ podSandboxId }, o));
    },

    async podSandboxStatus(podSandboxId, verbose = false) {
      const r = await unary("PodSandboxStatus", podSandboxId, timeoutMs, (o) => rt().podSandboxStatus({ podSandboxId, verbose }, o));
      // Upstream treats a missing status as an error too (ErrContainerStatusNil's sibling).
      if (!r.status) throw new CriError({ kind: "Unknown", method: "PodSandboxStatus", target: podSandboxId, detail: "runtime returned no status" });
      return r;
    },

    async listPodSandbox(filter) {
      const r = await unary("ListPodSandbox", undefined, timeoutMs, (o) => rt().listPodSandbox(ListPodSandboxRequest.create({ filter }), o));
      return r.items;
    },

    // --- containers ---------------------------------------------------------
    async createContainer(podSandboxId, config, sandboxConfig) {
      const target = `${podSandboxId}/${config.metadata?.name ?? ""}`;
      const r = await unary("CreateContainer", target, timeoutMs, (o) => rt().createContainer(CreateContainerRequest.create({ podSandboxId, config, sandboxConfig }), o));
      if (!r.containerId) throw new CriError({ kind: "Unknown", method: "CreateContainer", target, detail: "runtime returned an empty container id" });
      return r.containerId;
    },

    async startContainer(containerId) {
      await unary("StartContainer", containerId, timeoutMs, (o) => rt().startContainer({ containerId }, o));
    },

    async stopContainer(containerId, timeoutSeconds) {
      // Upstream: the call may take the grace period plus the request timeout.
      const deadline = timeoutMs + Math.max(0, timeoutSeconds) * 1000;
      await unary("StopContainer", containerId, deadline, (o) => rt().stopContainer({ containerId, timeout: ids(timeoutSeconds) }, o));
    },

    async removeContainer(containerId) {
      await unary("RemoveContainer", containerId, timeoutMs, (o) => rt().removeContainer({ containerId }, o));
    },

    async listContainers(filter) {
      const r = await unary("ListContainers", undefined, timeoutMs, (o) => rt().listContainers(ListContainersRequest.create({ filter }), o));
      return r.containers;
    },

    async containerStatus(containerId, verbose = false) {
      const r = await unary("ContainerStatus", containerId, timeoutMs, (o) => rt().containerStatus({ containerId, verbose }, o));
      if (!r.status) throw new CriError({ kind: "Unknown", method: "ContainerStatus", target: containerId, detail: "runtime returned no status" });
      return r;
    },

    async updateContainerResources(containerId, linux, annotations = {}) {
      await unary("UpdateContainerResources", containerId, timeoutMs, (o) =>
        rt().updateContainerResources(UpdateContainerResourcesRequest.create({ containerId, linux, annotations }), o),
      );
    },

    async reopenContainerLog(containerId) {
      await unary("ReopenContainerLog", containerId, timeoutMs, (o) => rt().reopenContainerLog({ containerId }, o));
    },

    // --- exec -----------------------------------------------------------------
    execSync(containerId, cmd, timeoutSeconds, signal) {
      // Upstream: no deadline when the exec has no timeout, else timeout + request timeout.
      const deadline = timeoutSeconds > 0 ? timeoutMs + timeoutSeconds * 1000 : undefined;
      return unary("ExecSync", containerId, deadline, (o) => rt().execSync({ containerId, cmd, timeout: ids(timeoutSeconds) }, o), signal);
    },

    async exec(request) {
      const r = await unary("Exec", request.containerId, timeoutMs, (o) => rt().exec(ExecRequest.create(request), o));
      return r.url;
    },

    async attach(request) {
      const r = await unary("Attach", request.containerId, timeoutMs, (o) => rt().attach(AttachRequest.create(request), o));
      return r.url;
    },

    async portForward(podSandboxId, ports) {
      const r = await unary("PortForward", podSandboxId, timeoutMs, (o) => rt().portForward({ podSandboxId, port: ports }, o));
      return r.url;
    },

    // --- stats ----------------------------------------------------------------
    async containerStats(containerId) {
      const r = await unary("ContainerStats", containerId, timeoutMs, (o) => rt().containerStats({ containerId }, o));
      if (!r.stats) throw new CriError({ kind: "NotFound", method: "ContainerStats", target: containerId, detail: "runtime returned no stats" });
      return r.stats;
    },

    async listContainerStats(filter) {
      const r = await unary("ListContainerStats", undefined, timeoutMs, (o) => rt().listContainerStats(ListContainerStatsRequest.create({ filter }), o));
      return r.stats;
    },

    async listPodSandboxStats(filter) {
      const r = await unary("ListPodSandboxStats", undefined, timeoutMs, (o) => rt().listPodSandboxStats(ListPodSandboxStatsRequest.create({ filter }), o));
      return r.stats;
    },

    containerEvents(signal) {
      return streamEvents(signal);
    },

    // --- images -----------------------------------------------------------------
    async listImages(filter) {
      const r = await unary("ListImages", undefined, timeoutMs, (o) => img().listImages(ListImagesRequest.create({ filter }), o));
      return r.images;
    },

    async imageStatus(image) {
      const r = await unary("ImageStatus", image.image ?? "", timeoutMs, (o) => img().imageStatus(ImageStatusRequest.create({ image }), o));
      return r.image;
    },

    async pullImage(image, auth, sandboxConfig, pullOpts) {
      const r = await unary("PullImage", image.image ?? "", undefined, (o) => img().pullImage(PullImageRequest.create({ image, auth, sandboxConfig }), o), pullOpts?.signal);
      return r.imageRef;
    },

    async removeImage(image) {
      await unary("RemoveImage", image.image ?? "", timeoutMs, (o) => img().removeImage(RemoveImageRequest.create({ image }), o));
    },

    imageFsInfo: () => unary("ImageFsInfo", undefined, timeoutMs, (o) => img().imageFsInfo({}, o)),

    close() {
      if (closed) return;
      closed = true;
      runtimeConn.close();
      if (imageConn !== runtimeConn) imageConn.close();
      log.v(2).info("CRI client closed");
    },
  };

  async function* streamEvents(signal: AbortSignal): AsyncGenerator<ContainerEventResponse> {
    if (closed) throw new CriError({ kind: "Canceled", method: "GetContainerEvents", detail: "CRI client is closed" });
    if (signal.aborted) return;
    const abort = new AbortController();
    const onAbort = () => abort.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    let call: ServerStreamingCall<object, ContainerEventResponse> | undefined;
    try {
      call = rt().getContainerEvents({}, { abort: abort.signal });
      for await (const ev of call.responses) yield ev;
    } catch (err) {
      if (signal.aborted) return;
      const e = toCriError(err, "GetContainerEvents");
      log.warn("CRI event stream failed", { kind: e.kind, err: e.detail });
      throw e;
    } finally {
      signal.removeEventListener("abort", onAbort);
      // A consumer that stops iterating early must not leave the stream open.
      abort.abort();
    }
  }

  return client;
}

/**
 * One channel to one endpoint, redialed when found in backoff (see the
 * header). The generated clients are rebuilt with it.
 */
class Connection {
  private channel!: Channel;
  private transport!: GrpcTransport;
  runtime!: RuntimeServiceClient;
  image!: ImageServiceClient;
  redials = 0;

  constructor(
    private readonly target: string,
    private readonly options: ChannelOptions,
    private readonly log: Logger,
  ) {
    this.dial();
  }

  private dial(): void {
    const credentials = ChannelCredentials.createInsecure();
    this.channel = new Channel(this.target, credentials, this.options);
    this.transport = new GrpcTransport({ host: this.target, channelCredentials: credentials, clientOptions: { channelOverride: this.channel } });
    this.runtime = new RuntimeServiceClient(this.transport);
    this.image = new ImageServiceClient(this.transport);
  }

  /** The connection to use for the next call. */
  ready(): this {
    if (this.channel.getConnectivityState(false) === connectivityState.TRANSIENT_FAILURE) {
      this.redials++;
      this.log.v(4).info("CRI channel in reconnect backoff; redialing", { endpoint: this.target, redials: this.redials });
      this.transport.close();
      this.dial();
    }
    return this;
  }

  close(): void {
    this.transport.close();
  }
}
