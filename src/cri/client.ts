/**
 * The CRI facade over gRPC: @grpc/grpc-js dialing a unix socket, with the
 * generated protobuf-ts message types; unary calls start on the channel
 * (unary-call.ts), the event stream through grpc-js's Client (rpc.ts and
 * unary-call.ts say why not protobuf-ts's generated clients and transport).
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
import { Channel, ChannelCredentials, Client, connectivityState, Metadata, type ChannelOptions } from "@grpc/grpc-js";
import type { Logger } from "../util/log.ts";
import { CriError, toCriError } from "./errors.ts";
import { parseEndpoint } from "./endpoint.ts";
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
import { IMAGE, RUNTIME, type Rpc } from "./rpc.ts";
import { startUnaryCall, type UnaryCallHandle } from "./unary-call.ts";

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
  log.v(2).info("CRI client created", { endpoint: runtimeEp.target, imageEndpoint: imageEp.target, timeoutMs });

  let closed = false;

  /**
   * Runs one unary call with a deadline (ms from now; undefined for none),
   * converting every failure into a CriError naming the method and target.
   * The connection is resolved per call, so that a redialed channel is used at once.
   */
  async function unary<I extends object, O extends object>(
    conn: Connection,
    rpc: Rpc<I, O>,
    input: I,
    target: string | undefined,
    deadlineMs: number | undefined,
    signal?: AbortSignal,
  ): Promise<O> {
    const method = rpc.name;
    if (closed) throw new CriError({ kind: "Canceled", method, target, detail: "CRI client is closed" });
    const began = performance.now();
    let call: UnaryCallHandle | undefined;
    let watchdogFired = false;
    const watchdog =
      deadlineMs === undefined
        ? undefined
        : setTimeout(() => {
            watchdogFired = true;
            call?.cancel();
          }, deadlineMs + WATCHDOG_GRACE_MS);
    const onAbort = () => call?.cancel();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      // A caller that has already given up gets no call on the wire (an abort listener would never fire).
      if (signal?.aborted) throw signal.reason;
      const response = await new Promise<O>((resolve, reject) => {
        // grpc-js takes an absolute deadline on the wall clock, which its own timers measure against.
        const deadline = deadlineMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + deadlineMs;
        call = startUnaryCall(conn.ready().channel, rpc, input, deadline, (err, answer) => (err ? reject(err) : resolve(answer as O)));
      });
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
    version: () => unary(runtimeConn, RUNTIME.version, { version: CRI_API_VERSION }, undefined, timeoutMs),

    status: (verbose = false) => unary(runtimeConn, RUNTIME.status, { verbose }, undefined, timeoutMs),

    runtimeConfig: () => unary(runtimeConn, RUNTIME.runtimeConfig, {}, undefined, timeoutMs),

    async updateRuntimeConfig(podCidr) {
      await unary(runtimeConn, RUNTIME.updateRuntimeConfig, { runtimeConfig: { networkConfig: { podCidr } } }, podCidr, timeoutMs);
    },

    // --- sandboxes ----------------------------------------------------------
    async runPodSandbox(config, runtimeHandler = "") {
      const name = config.metadata ? `${config.metadata.namespace}/${config.metadata.name}` : undefined;
      const r = await unary(runtimeConn, RUNTIME.runPodSandbox, RunPodSandboxRequest.create({ config, runtimeHandler }), name, timeoutMs);
      if (!r.podSandboxId) throw new CriError({ kind: "Unknown", method: "RunPodSandbox", target: name, detail: "runtime returned an empty sandbox id" });
      return r.podSandboxId;
    },

    async stopPodSandbox(podSandboxId) {
      await unary(runtimeConn, RUNTIME.stopPodSandbox, { podSandboxId }, podSandboxId, timeoutMs);
    },

    async removePodSandbox(podSandboxId) {
      await unary(runtimeConn, RUNTIME.removePodSandbox, { podSandboxId }, podSandboxId, timeoutMs);
    },

    async podSandboxStatus(podSandboxId, verbose = false) {
      const r = await unary(runtimeConn, RUNTIME.podSandboxStatus, { podSandboxId, verbose }, podSandboxId, timeoutMs);
      // Upstream treats a missing status as an error too (ErrContainerStatusNil's sibling).
      if (!r.status) throw new CriError({ kind: "Unknown", method: "PodSandboxStatus", target: podSandboxId, detail: "runtime returned no status" });
      return r;
    },

    async listPodSandbox(filter) {
      const r = await unary(runtimeConn, RUNTIME.listPodSandbox, ListPodSandboxRequest.create({ filter }), undefined, timeoutMs);
      return r.items;
    },

    // --- containers ---------------------------------------------------------
    async createContainer(podSandboxId, config, sandboxConfig) {
      const target = `${podSandboxId}/${config.metadata?.name ?? ""}`;
      const r = await unary(runtimeConn, RUNTIME.createContainer, CreateContainerRequest.create({ podSandboxId, config, sandboxConfig }), target, timeoutMs);
      if (!r.containerId) throw new CriError({ kind: "Unknown", method: "CreateContainer", target, detail: "runtime returned an empty container id" });
      return r.containerId;
    },

    async startContainer(containerId) {
      await unary(runtimeConn, RUNTIME.startContainer, { containerId }, containerId, timeoutMs);
    },

    async stopContainer(containerId, timeoutSeconds) {
      // Upstream: the call may take the grace period plus the request timeout.
      const deadline = timeoutMs + Math.max(0, timeoutSeconds) * 1000;
      await unary(runtimeConn, RUNTIME.stopContainer, { containerId, timeout: ids(timeoutSeconds) }, containerId, deadline);
    },

    async removeContainer(containerId) {
      await unary(runtimeConn, RUNTIME.removeContainer, { containerId }, containerId, timeoutMs);
    },

    async listContainers(filter) {
      const r = await unary(runtimeConn, RUNTIME.listContainers, ListContainersRequest.create({ filter }), undefined, timeoutMs);
      return r.containers;
    },

    async containerStatus(containerId, verbose = false) {
      const r = await unary(runtimeConn, RUNTIME.containerStatus, { containerId, verbose }, containerId, timeoutMs);
      if (!r.status) throw new CriError({ kind: "Unknown", method: "ContainerStatus", target: containerId, detail: "runtime returned no status" });
      return r;
    },

    async updateContainerResources(containerId, linux, annotations = {}) {
      await unary(runtimeConn, RUNTIME.updateContainerResources, UpdateContainerResourcesRequest.create({ containerId, linux, annotations }), containerId, timeoutMs);
    },

    async reopenContainerLog(containerId) {
      await unary(runtimeConn, RUNTIME.reopenContainerLog, { containerId }, containerId, timeoutMs);
    },

    // --- exec -----------------------------------------------------------------
    execSync(containerId, cmd, timeoutSeconds, signal) {
      // Upstream: no deadline when the exec has no timeout, else timeout + request timeout.
      const deadline = timeoutSeconds > 0 ? timeoutMs + timeoutSeconds * 1000 : undefined;
      return unary(runtimeConn, RUNTIME.execSync, { containerId, cmd, timeout: ids(timeoutSeconds) }, containerId, deadline, signal);
    },

    async exec(request) {
      const r = await unary(runtimeConn, RUNTIME.exec, ExecRequest.create(request), request.containerId, timeoutMs);
      return r.url;
    },

    async attach(request) {
      const r = await unary(runtimeConn, RUNTIME.attach, AttachRequest.create(request), request.containerId, timeoutMs);
      return r.url;
    },

    async portForward(podSandboxId, ports) {
      const r = await unary(runtimeConn, RUNTIME.portForward, { podSandboxId, port: ports }, podSandboxId, timeoutMs);
      return r.url;
    },

    // --- stats ----------------------------------------------------------------
    async containerStats(containerId) {
      const r = await unary(runtimeConn, RUNTIME.containerStats, { containerId }, containerId, timeoutMs);
      if (!r.stats) throw new CriError({ kind: "NotFound", method: "ContainerStats", target: containerId, detail: "runtime returned no stats" });
      return r.stats;
    },

    async listContainerStats(filter) {
      const r = await unary(runtimeConn, RUNTIME.listContainerStats, ListContainerStatsRequest.create({ filter }), undefined, timeoutMs);
      return r.stats;
    },

    async listPodSandboxStats(filter) {
      const r = await unary(runtimeConn, RUNTIME.listPodSandboxStats, ListPodSandboxStatsRequest.create({ filter }), undefined, timeoutMs);
      return r.stats;
    },

    containerEvents(signal) {
      return streamEvents(signal);
    },

    // --- images -----------------------------------------------------------------
    async listImages(filter) {
      const r = await unary(imageConn, IMAGE.listImages, ListImagesRequest.create({ filter }), undefined, timeoutMs);
      return r.images;
    },

    async imageStatus(image) {
      const r = await unary(imageConn, IMAGE.imageStatus, ImageStatusRequest.create({ image }), image.image ?? "", timeoutMs);
      return r.image;
    },

    async pullImage(image, auth, sandboxConfig, pullOpts) {
      const r = await unary(imageConn, IMAGE.pullImage, PullImageRequest.create({ image, auth, sandboxConfig }), image.image ?? "", undefined, pullOpts?.signal);
      return r.imageRef;
    },

    async removeImage(image) {
      await unary(imageConn, IMAGE.removeImage, RemoveImageRequest.create({ image }), image.image ?? "", timeoutMs);
    },

    imageFsInfo: () => unary(imageConn, IMAGE.imageFsInfo, {}, undefined, timeoutMs),

    close() {
      if (closed) return;
      closed = true;
      runtimeConn.close();
      if (imageConn !== runtimeConn) imageConn.close();
      log.v(2).info("CRI client closed");
    },
  };

  async function* streamEvents(signal: AbortSignal): AsyncGenerator<ContainerEventResponse> {
    const rpc = RUNTIME.getContainerEvents;
    if (closed) throw new CriError({ kind: "Canceled", method: rpc.name, detail: "CRI client is closed" });
    if (signal.aborted) return;
    const call = runtimeConn.ready().client.makeServerStreamRequest(rpc.path, rpc.serialize, rpc.deserialize, {}, new Metadata(), {});
    const onAbort = () => call.cancel();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const ev of call) yield ev as ContainerEventResponse;
    } catch (err) {
      if (signal.aborted) return;
      const e = toCriError(err, rpc.name);
      log.warn("CRI event stream failed", { kind: e.kind, err: e.detail });
      throw e;
    } finally {
      signal.removeEventListener("abort", onAbort);
      // A consumer that stops iterating early must not leave the stream open.
      call.cancel();
    }
  }

  return client;
}

/**
 * One channel to one endpoint, redialed when found in backoff (see the
 * header), and grpc-js's Client on it.
 */
class Connection {
  /** Unary calls start on the channel itself (unary-call.ts). */
  channel!: Channel;
  /** The event stream goes through grpc-js's Client on the same channel. */
  client!: Client;
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
    this.client = new Client(this.target, credentials, { channelOverride: this.channel });
  }

  /** The connection to use for the next call. */
  ready(): this {
    if (this.channel.getConnectivityState(false) === connectivityState.TRANSIENT_FAILURE) {
      this.redials++;
      this.log.v(4).info("CRI channel in reconnect backoff; redialing", { endpoint: this.target, redials: this.redials });
      this.client.close();
      this.dial();
    }
    return this;
  }

  close(): void {
    this.client.close();
  }
}
