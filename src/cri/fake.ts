/**
 * FakeCri: an in-memory container runtime with real state, for tests of
 * everything above the CRI. It follows what containerd 1.6 does where the
 * CRI leaves room (checked by the shared contract suite, contract.ts):
 * - unknown ids are NotFound, except RemovePodSandbox / RemoveContainer /
 *   RemoveImage, which succeed (idempotent removal);
 * - StopPodSandbox kills the sandbox's running containers (exit 137) and
 *   marks it NOTREADY; RemovePodSandbox stops, then removes its containers;
 * - stopping a running container kills it (137, as for a process that
 *   ignores SIGTERM); stopping a created or exited one changes nothing;
 * - containers are created only in READY sandboxes from present images;
 * - sandbox and container names are reserved as containerd does
 *   (`name_namespace_uid_attempt`), so a repeated attempt number fails;
 * - error kinds are containerd's: a stopped sandbox makes CreateContainer
 *   NotFound (no running task), state conflicts (start twice, exec in a
 *   stopped container, duplicate names) are Unknown, never
 *   FailedPrecondition, so callers cannot come to rely on finer kinds.
 * Time comes from the injected clock; ids are deterministic.
 *
 * Test controls: `calls`, `failNext`, `holdNext`, `exitContainer`,
 * `setExecHandler`, `setCondition`, `addImage`, `pulls`,
 * `breakEventStreams`.
 *
 * Container events are sent as containerd 2.x sends them: for containers
 * and for sandboxes (whose event's container id is the sandbox id), each
 * with the sandbox's status (none once it is removed) and the statuses of
 * all containers of the sandbox.
 */
import { createHash } from "node:crypto";
import type { Clock } from "../util/clock.ts";
import { CriError, type CriErrorKind } from "./errors.ts";
import {
  AuthConfig,
  Container,
  ContainerConfig,
  ContainerFilter,
  ContainerStatsFilter,
  ImageFilter,
  PodSandboxFilter,
  PodSandboxStatsFilter,
  ExecRequest,
  AttachRequest,
  ContainerEventType,
  ContainerState,
  ContainerStats,
  ContainerStatus,
  Image,
  type ImageSpec,
  LinuxContainerResources,
  NamespaceMode,
  PodSandbox,
  PodSandboxConfig,
  PodSandboxState,
  PodSandboxStats,
  PodSandboxStatus,
  RuntimeCondition,
  CgroupDriver,
  type ContainerEventResponse,
  type ExecSyncResponse,
  type ImageFsInfoResponse,
  type PodSandboxStatusResponse,
  type ContainerStatusResponse,
  type RuntimeConfigResponse,
  type StatusResponse,
  type VersionResponse,
} from "./gen/api.ts";
import type { CriService, In, PullOptions } from "./index.ts";
import { AsyncQueue, matchesLabels, nsFromMs, wireName } from "./fake-util.ts";
import { normalizeImageRef } from "./image-ref.ts";

export type FakeMethod = Exclude<keyof CriService, "close">;

export interface FakeCall {
  method: FakeMethod;
  args: unknown[];
}

export type ExecHandler = (containerId: string, cmd: string[]) => { stdout?: Uint8Array | string; stderr?: Uint8Array | string; exitCode?: number };

export interface FakeCriOptions {
  clock: Clock;
  /** Image references present from the start (e.g. the pause image). */
  images?: string[];
  runtimeName?: string;
  /** What RuntimeConfig reports (default cgroupfs); "unimplemented" answers as containerd 1.6 does. */
  cgroupDriver?: "cgroupfs" | "systemd" | "unimplemented";
  /**
   * The image filesystem's mountpoint ImageFsInfo reports (default
   * /fake/images, which does not exist: image GC's statfs of it fails).
   * A real directory lets the agent's image GC run as on a real node.
   */
  imageFsMountpoint?: string;
}

interface SandboxRecord {
  id: string;
  config: PodSandboxConfig;
  runtimeHandler: string;
  state: PodSandboxState;
  createdAt: bigint;
  ip: string;
}

interface ContainerRecord {
  id: string;
  sandboxId: string;
  config: ContainerConfig;
  image: Image;
  state: ContainerState;
  createdAt: bigint;
  startedAt: bigint;
  finishedAt: bigint;
  exitCode: number;
  reason: string;
  message: string;
  resources: LinuxContainerResources | undefined;
}

const encoder = new TextEncoder();
const bytes = (v: Uint8Array | string | undefined) => (typeof v === "string" ? encoder.encode(v) : (v ?? new Uint8Array()));

/** Default exec: `echo ARGS...`, `true`, `false`; anything else succeeds silently. */
const defaultExec: ExecHandler = (_id, cmd) => {
  if (cmd[0] === "echo") return { stdout: cmd.slice(1).join(" ") + "\n" };
  if (cmd[0] === "false") return { exitCode: 1 };
  return {};
};

export class FakeCri implements CriService {
  readonly calls: FakeCall[] = [];
  readonly pulls: { image: string; auth: AuthConfig | undefined }[] = [];
  private readonly clock: Clock;
  private readonly runtimeName: string;
  private readonly sandboxes = new Map<string, SandboxRecord>();
  private readonly containers = new Map<string, ContainerRecord>();
  private readonly images = new Map<string, Image>();
  private readonly failures = new Map<FakeMethod, CriError[]>();
  private readonly holds = new Map<FakeMethod, Promise<void>[]>();
  private readonly subscribers = new Set<AsyncQueue<ContainerEventResponse>>();
  private readonly conditions = new Map<string, RuntimeCondition>();
  /** Reserved names -> owner id, as containerd's name index. */
  private readonly names = new Map<string, string>();
  private execHandler: ExecHandler = defaultExec;
  private seq = 0;
  private closed = false;

  private readonly cgroupDriver: "cgroupfs" | "systemd" | "unimplemented";
  private readonly imageFsMountpoint: string;

  constructor(opts: FakeCriOptions) {
    this.imageFsMountpoint = opts.imageFsMountpoint ?? "/fake/images";
    this.clock = opts.clock;
    this.runtimeName = opts.runtimeName ?? "fake";
    this.cgroupDriver = opts.cgroupDriver ?? "cgroupfs";
    for (const ref of opts.images ?? []) this.addImage(ref);
    for (const type of ["RuntimeReady", "NetworkReady"]) this.setCondition(type, true);
  }

  // --- test controls ---------------------------------------------------------

  /** The next call of `method` rejects with `err` (a CriError, or one made from a kind). Queues. */
  failNext(method: FakeMethod, err: CriError | CriErrorKind, detail = "injected failure"): void {
    const e = typeof err === "string" ? new CriError({ kind: err, method: wireName(method), detail }) : err;
    this.failures.set(method, [...(this.failures.get(method) ?? []), e]);
  }

  /** The next call of `method` waits until the returned function is called (e.g. to hit a deadline). */
  holdNext(method: FakeMethod): () => void {
    let release!: () => void;
    const p = new Promise<void>((resolve) => (release = resolve));
    this.holds.set(method, [...(this.holds.get(method) ?? []), p]);
    return release;
  }

  /** Calls so far of one method. */
  callsOf(method: FakeMethod): unknown[][] {
    return this.calls.filter((c) => c.method === method).map((c) => c.args);
  }

  /** The container's process ends by itself, as a crash or completion would. */
  exitContainer(containerId: string, exitCode: number, reason?: string, message = ""): void {
    const c = this.containers.get(containerId);
    if (!c) throw new Error(`FakeCri.exitContainer: no container ${containerId}`);
    if (c.state !== ContainerState.CONTAINER_RUNNING) throw new Error(`FakeCri.exitContainer: ${containerId} is not running`);
    this.finish(c, exitCode, reason ?? (exitCode === 0 ? "Completed" : "Error"), message);
  }

  setExecHandler(handler: ExecHandler): void {
    this.execHandler = handler;
  }

  setCondition(type: string, status: boolean, reason = "", message = ""): void {
    this.conditions.set(type, RuntimeCondition.create({ type, status, reason, message }));
  }

  /** Makes an image present, as if pulled or imported. Returns its id. */
  addImage(ref: string, size = 1024 * 1024): string {
    const name = normalizeImageRef(ref);
    const existing = this.findImage(name);
    if (existing) return existing.id;
    const id = "sha256:" + createHash("sha256").update(name).digest("hex");
    this.images.set(id, Image.create({ id, repoTags: [name], repoDigests: [], size: BigInt(size), spec: { image: id } }));
    return id;
  }

  /** Sandbox and container counts, for leak checks in tests. */
  counts(): { sandboxes: number; containers: number; images: number } {
    return { sandboxes: this.sandboxes.size, containers: this.containers.size, images: this.images.size };
  }

  // --- plumbing ----------------------------------------------------------------

  /** Records the call, then applies an injected failure or hold; an aborted `signal` cancels it (kind Canceled), as a cancelled context does a gRPC call. */
  private async enter(method: FakeMethod, args: unknown[], signal?: AbortSignal): Promise<void> {
    this.calls.push({ method, args });
    if (this.closed) throw new CriError({ kind: "Canceled", method: wireName(method), detail: "CRI client is closed" });
    const cancelled = () => new CriError({ kind: "Canceled", method: wireName(method), detail: "context canceled" });
    if (signal?.aborted) throw cancelled();
    const hold = this.holds.get(method)?.shift();
    if (hold && signal) {
      let onAbort = () => {};
      const aborted = new Promise<"aborted">((resolve) => signal.addEventListener("abort", (onAbort = () => resolve("aborted")), { once: true }));
      const outcome = await Promise.race([hold, aborted]);
      signal.removeEventListener("abort", onAbort);
      if (outcome === "aborted") throw cancelled();
    } else if (hold) await hold;
    const failure = this.failures.get(method)?.shift();
    if (failure) throw failure;
  }

  /** containerd's plain errors (no gRPC code) arrive as Unknown. */
  private unknown(method: FakeMethod, target: string, detail: string): CriError {
    return new CriError({ kind: "Unknown", method: wireName(method), target, detail });
  }

  private reserve(method: FakeMethod, target: string, kind: string, name: string, id: string): void {
    const owner = this.names.get(name);
    if (owner) throw this.unknown(method, target, `failed to reserve ${kind} name ${JSON.stringify(name)}: name ${JSON.stringify(name)} is reserved for ${JSON.stringify(owner)}`);
    this.names.set(name, id);
  }

  private release(id: string): void {
    for (const [name, owner] of this.names) if (owner === id) this.names.delete(name);
  }

  private notFound(method: FakeMethod, target: string, what: string): CriError {
    return new CriError({ kind: "NotFound", method: wireName(method), target, detail: `${what} ${JSON.stringify(target)} not found` });
  }

  private nextId(kind: string): string {
    return createHash("sha256")
      .update(`${kind}-${++this.seq}`)
      .digest("hex");
  }

  private now(): bigint {
    return nsFromMs(this.clock.now());
  }

  /** Full id or a unique prefix, as containerd's truncindex resolves them. */
  private resolve<T>(map: Map<string, T>, id: string): T | undefined {
    if (!id) return undefined;
    const exact = map.get(id);
    if (exact) return exact;
    const hits = [...map.keys()].filter((k) => k.startsWith(id));
    return hits.length === 1 ? map.get(hits[0]!) : undefined;
  }

  private sandbox(method: FakeMethod, id: string): SandboxRecord {
    const s = this.resolve(this.sandboxes, id);
    if (!s) throw this.notFound(method, id, "sandbox");
    return s;
  }

  private container(method: FakeMethod, id: string): ContainerRecord {
    const c = this.resolve(this.containers, id);
    if (!c) throw this.notFound(method, id, "container");
    return c;
  }

  private findImage(ref: string): Image | undefined {
    if (!ref) return undefined;
    const byId = this.resolve(this.images, ref.startsWith("sha256:") ? ref : `sha256:${ref}`);
    if (byId) return byId;
    const name = normalizeImageRef(ref);
    for (const img of this.images.values()) if (img.repoTags.includes(name) || img.repoDigests.includes(name)) return img;
    return undefined;
  }

  private finish(c: ContainerRecord, exitCode: number, reason: string, message = ""): void {
    c.state = ContainerState.CONTAINER_EXITED;
    c.finishedAt = this.now();
    c.exitCode = exitCode;
    c.reason = reason;
    c.message = message;
    this.emit(c, ContainerEventType.CONTAINER_STOPPED_EVENT);
  }

  private emit(c: ContainerRecord, type: ContainerEventType): void {
    this.emitFor(c.id, c.sandboxId, type);
  }

  private emitFor(id: string, sandboxId: string, type: ContainerEventType): void {
    if (this.subscribers.size === 0) return;
    const s = this.sandboxes.get(sandboxId);
    const ev: ContainerEventResponse = {
      containerId: id,
      containerEventType: type,
      createdAt: this.now(),
      podSandboxStatus: s ? this.sandboxStatus(s) : undefined,
      containersStatuses: [...this.containers.values()].filter((x) => x.sandboxId === sandboxId).map((x) => this.containerStatusOf(x)),
    };
    for (const q of this.subscribers) q.push(ev);
  }

  /** Every open GetContainerEvents stream fails with `kind` (as when the runtime goes away). */
  breakEventStreams(kind: CriErrorKind = "Unavailable", detail = "injected stream failure"): void {
    for (const q of this.subscribers) q.fail(new CriError({ kind, method: "GetContainerEvents", detail }));
    this.subscribers.clear();
  }

  /** Open GetContainerEvents streams. */
  eventSubscribers(): number {
    return this.subscribers.size;
  }

  private sandboxStatus(s: SandboxRecord): PodSandboxStatus {
    const cfg = s.config;
    return PodSandboxStatus.create({
      id: s.id,
      metadata: cfg.metadata,
      state: s.state,
      createdAt: s.createdAt,
      network: { ip: s.state === PodSandboxState.SANDBOX_READY ? s.ip : "", additionalIps: [] },
      linux: { namespaces: { options: cfg.linux?.securityContext?.namespaceOptions } },
      labels: { ...cfg.labels },
      annotations: { ...cfg.annotations },
      runtimeHandler: s.runtimeHandler,
    });
  }

  private containerStatusOf(c: ContainerRecord): ContainerStatus {
    const s = this.sandboxes.get(c.sandboxId);
    const logDir = s?.config.logDirectory ?? "";
    return ContainerStatus.create({
      id: c.id,
      metadata: c.config.metadata,
      state: c.state,
      createdAt: c.createdAt,
      startedAt: c.startedAt,
      finishedAt: c.finishedAt,
      exitCode: c.exitCode,
      image: c.config.image,
      imageRef: c.image.id,
      imageId: c.image.id,
      reason: c.reason,
      message: c.message,
      labels: { ...c.config.labels },
      annotations: { ...c.config.annotations },
      mounts: c.config.mounts,
      logPath: logDir && c.config.logPath ? `${logDir.replace(/\/$/, "")}/${c.config.logPath}` : "",
      resources: c.resources ? { linux: c.resources } : undefined,
    });
  }

  private killContainers(sandboxId: string): void {
    for (const c of this.containers.values()) {
      if (c.sandboxId === sandboxId && c.state === ContainerState.CONTAINER_RUNNING) this.finish(c, 137, "Error");
    }
  }

  private zeroStats(c: ContainerRecord): ContainerStats {
    const timestamp = this.now();
    return ContainerStats.create({
      attributes: { id: c.id, metadata: c.config.metadata, labels: { ...c.config.labels }, annotations: { ...c.config.annotations } },
      cpu: { timestamp, usageCoreNanoSeconds: { value: 0n } },
      memory: { timestamp, workingSetBytes: { value: 0n } },
      writableLayer: { timestamp, fsId: { mountpoint: "/fake/snapshots" }, usedBytes: { value: 0n }, inodesUsed: { value: 0n } },
    });
  }

  // --- RuntimeService -----------------------------------------------------------

  async version(): Promise<VersionResponse> {
    await this.enter("version", []);
    return { version: "0.1.0", runtimeName: this.runtimeName, runtimeVersion: "0.0.0-fake", runtimeApiVersion: "v1" };
  }

  async status(verbose = false): Promise<StatusResponse> {
    await this.enter("status", [verbose]);
    return {
      status: { conditions: [...this.conditions.values()].map((c) => ({ ...c })) },
      info: {},
      runtimeHandlers: [{ name: "", features: { recursiveReadOnlyMounts: false, userNamespaces: false } }],
    };
  }

  async runtimeConfig(): Promise<RuntimeConfigResponse> {
    await this.enter("runtimeConfig", []);
    if (this.cgroupDriver === "unimplemented")
      throw new CriError({ kind: "Unimplemented", method: "RuntimeConfig", detail: "unknown method RuntimeConfig for service runtime.v1.RuntimeService" });
    return { linux: { cgroupDriver: this.cgroupDriver === "systemd" ? CgroupDriver.SYSTEMD : CgroupDriver.CGROUPFS } };
  }

  async updateRuntimeConfig(podCidr: string): Promise<void> {
    await this.enter("updateRuntimeConfig", [podCidr]);
  }

  async runPodSandbox(input: In<PodSandboxConfig>, runtimeHandler = ""): Promise<string> {
    await this.enter("runPodSandbox", [input, runtimeHandler]);
    const config = PodSandboxConfig.create(input);
    const m = config.metadata;
    if (!m) throw this.unknown("runPodSandbox", "", "sandbox config must include metadata");
    const id = this.nextId("sandbox");
    this.reserve("runPodSandbox", `${m.namespace}/${m.name}`, "sandbox", `${m.name}_${m.namespace}_${m.uid}_${m.attempt}`, id);
    const n = this.sandboxes.size + 2;
    this.sandboxes.set(id, {
      id,
      config,
      runtimeHandler,
      state: PodSandboxState.SANDBOX_READY,
      createdAt: this.now(),
      // As containerd (sandbox_status.go getIPs): a sandbox in the node's network namespace reports no IP.
      ip: config.linux?.securityContext?.namespaceOptions?.network === NamespaceMode.NODE ? "" : `10.88.${(n >> 8) & 255}.${n & 255}`,
    });
    this.emitFor(id, id, ContainerEventType.CONTAINER_CREATED_EVENT);
    this.emitFor(id, id, ContainerEventType.CONTAINER_STARTED_EVENT);
    return id;
  }

  async stopPodSandbox(podSandboxId: string): Promise<void> {
    await this.enter("stopPodSandbox", [podSandboxId]);
    const s = this.sandbox("stopPodSandbox", podSandboxId);
    this.killContainers(s.id);
    if (s.state === PodSandboxState.SANDBOX_NOTREADY) return;
    s.state = PodSandboxState.SANDBOX_NOTREADY;
    this.emitFor(s.id, s.id, ContainerEventType.CONTAINER_STOPPED_EVENT);
  }

  async removePodSandbox(podSandboxId: string): Promise<void> {
    await this.enter("removePodSandbox", [podSandboxId]);
    const s = this.resolve(this.sandboxes, podSandboxId);
    if (!s) return;
    this.killContainers(s.id);
    for (const c of [...this.containers.values()]) {
      if (c.sandboxId !== s.id) continue;
      this.emit(c, ContainerEventType.CONTAINER_DELETED_EVENT);
      this.containers.delete(c.id);
      this.release(c.id);
    }
    this.sandboxes.delete(s.id);
    this.release(s.id);
    this.emitFor(s.id, s.id, ContainerEventType.CONTAINER_DELETED_EVENT);
  }

  async podSandboxStatus(podSandboxId: string, verbose = false): Promise<PodSandboxStatusResponse> {
    await this.enter("podSandboxStatus", [podSandboxId, verbose]);
    const s = this.sandbox("podSandboxStatus", podSandboxId);
    return { status: this.sandboxStatus(s), info: {}, containersStatuses: [], timestamp: this.now() };
  }

  async listPodSandbox(input?: In<PodSandboxFilter>): Promise<PodSandbox[]> {
    await this.enter("listPodSandbox", [input]);
    const filter = input && PodSandboxFilter.create(input);
    return [...this.sandboxes.values()]
      .filter((s) => !filter?.id || s.id.startsWith(filter.id))
      .filter((s) => !filter?.state || s.state === filter.state.state)
      .filter((s) => matchesLabels(s.config.labels, filter?.labelSelector))
      .map((s) =>
        PodSandbox.create({
          id: s.id,
          metadata: s.config.metadata,
          state: s.state,
          createdAt: s.createdAt,
          labels: { ...s.config.labels },
          annotations: { ...s.config.annotations },
          runtimeHandler: s.runtimeHandler,
        }),
      );
  }

  async createContainer(podSandboxId: string, input: In<ContainerConfig>, sandboxConfig: In<PodSandboxConfig>): Promise<string> {
    await this.enter("createContainer", [podSandboxId, input, sandboxConfig]);
    const config = ContainerConfig.create(input);
    const s = this.sandbox("createContainer", podSandboxId);
    const target = `${podSandboxId}/${config.metadata?.name ?? ""}`;
    if (!config.metadata) throw this.unknown("createContainer", target, "container config must include metadata");
    if (s.state !== PodSandboxState.SANDBOX_READY) {
      throw this.notFound("createContainer", target, `running task of sandbox ${s.id}`);
    }
    const image = this.findImage(config.image?.image ?? "");
    if (!image) throw this.notFound("createContainer", config.image?.image ?? "", "image");
    const id = this.nextId("container");
    const sm = s.config.metadata!;
    this.reserve("createContainer", target, "container", `${config.metadata.name}_${sm.name}_${sm.namespace}_${sm.uid}_${config.metadata.attempt}`, id);
    const c: ContainerRecord = {
      id,
      sandboxId: s.id,
      config,
      image,
      state: ContainerState.CONTAINER_CREATED,
      createdAt: this.now(),
      startedAt: 0n,
      finishedAt: 0n,
      exitCode: 0,
      reason: "",
      message: "",
      resources: config.linux?.resources ? LinuxContainerResources.clone(config.linux.resources) : undefined,
    };
    this.containers.set(id, c);
    this.emit(c, ContainerEventType.CONTAINER_CREATED_EVENT);
    return id;
  }

  async startContainer(containerId: string): Promise<void> {
    await this.enter("startContainer", [containerId]);
    const c = this.container("startContainer", containerId);
    if (c.state !== ContainerState.CONTAINER_CREATED) {
      throw this.unknown("startContainer", containerId, `failed to set starting state for container: container is in ${ContainerState[c.state]} state`);
    }
    if (this.sandboxes.get(c.sandboxId)?.state !== PodSandboxState.SANDBOX_READY) {
      throw this.unknown("startContainer", containerId, `sandbox container ${JSON.stringify(c.sandboxId)} is not running`);
    }
    c.state = ContainerState.CONTAINER_RUNNING;
    c.startedAt = this.now();
    this.emit(c, ContainerEventType.CONTAINER_STARTED_EVENT);
  }

  async stopContainer(containerId: string, timeoutSeconds: number): Promise<void> {
    await this.enter("stopContainer", [containerId, timeoutSeconds]);
    const c = this.container("stopContainer", containerId);
    if (c.state === ContainerState.CONTAINER_RUNNING) this.finish(c, 137, "Error");
  }

  async removeContainer(containerId: string): Promise<void> {
    await this.enter("removeContainer", [containerId]);
    const c = this.resolve(this.containers, containerId);
    if (!c) return;
    if (c.state === ContainerState.CONTAINER_RUNNING) this.finish(c, 137, "Error");
    this.emit(c, ContainerEventType.CONTAINER_DELETED_EVENT);
    this.containers.delete(c.id);
    this.release(c.id);
  }

  async listContainers(input?: In<ContainerFilter>): Promise<Container[]> {
    await this.enter("listContainers", [input]);
    const filter = input && ContainerFilter.create(input);
    return [...this.containers.values()]
      .filter((c) => !filter?.id || c.id.startsWith(filter.id))
      .filter((c) => !filter?.podSandboxId || c.sandboxId.startsWith(filter.podSandboxId))
      .filter((c) => !filter?.state || c.state === filter.state.state)
      .filter((c) => matchesLabels(c.config.labels, filter?.labelSelector))
      .map((c) =>
        Container.create({
          id: c.id,
          podSandboxId: c.sandboxId,
          metadata: c.config.metadata,
          image: c.config.image,
          imageRef: c.image.id,
          imageId: c.image.id,
          state: c.state,
          createdAt: c.createdAt,
          labels: { ...c.config.labels },
          annotations: { ...c.config.annotations },
        }),
      );
  }

  async containerStatus(containerId: string, verbose = false): Promise<ContainerStatusResponse> {
    await this.enter("containerStatus", [containerId, verbose]);
    return { status: this.containerStatusOf(this.container("containerStatus", containerId)), info: {} };
  }

  async updateContainerResources(containerId: string, linux: In<LinuxContainerResources>, annotations: Record<string, string> = {}): Promise<void> {
    await this.enter("updateContainerResources", [containerId, linux, annotations]);
    const c = this.container("updateContainerResources", containerId);
    c.resources = LinuxContainerResources.create(linux);
  }

  async reopenContainerLog(containerId: string): Promise<void> {
    await this.enter("reopenContainerLog", [containerId]);
    const c = this.container("reopenContainerLog", containerId);
    if (c.state !== ContainerState.CONTAINER_RUNNING) throw this.unknown("reopenContainerLog", containerId, "container is not running");
  }

  async execSync(containerId: string, cmd: string[], timeoutSeconds: number, signal?: AbortSignal): Promise<ExecSyncResponse> {
    await this.enter("execSync", [containerId, cmd, timeoutSeconds], signal);
    const c = this.container("execSync", containerId);
    if (c.state !== ContainerState.CONTAINER_RUNNING) {
      throw this.unknown("execSync", containerId, `failed to exec in container: container is in ${ContainerState[c.state]} state`);
    }
    const r = this.execHandler(c.id, cmd);
    return { stdout: bytes(r.stdout), stderr: bytes(r.stderr), exitCode: r.exitCode ?? 0 };
  }

  private async streamingUrl(method: "exec" | "attach", containerId: string, args: unknown[]): Promise<string> {
    await this.enter(method, args);
    const c = this.container(method, containerId);
    if (c.state !== ContainerState.CONTAINER_RUNNING) throw this.unknown(method, containerId, `container is in ${ContainerState[c.state]} state`);
    return `http://127.0.0.1:10010/${method}/${this.nextId("token").slice(0, 8)}`;
  }

  exec(request: In<ExecRequest> & { containerId: string }): Promise<string> {
    return this.streamingUrl("exec", request.containerId, [ExecRequest.create(request)]);
  }

  attach(request: In<AttachRequest> & { containerId: string }): Promise<string> {
    return this.streamingUrl("attach", request.containerId, [AttachRequest.create(request)]);
  }

  async portForward(podSandboxId: string, ports: number[]): Promise<string> {
    await this.enter("portForward", [podSandboxId, ports]);
    const s = this.sandbox("portForward", podSandboxId);
    if (s.state !== PodSandboxState.SANDBOX_READY) throw this.unknown("portForward", podSandboxId, "sandbox container is not running");
    return `http://127.0.0.1:10010/portforward/${this.nextId("token").slice(0, 8)}`;
  }

  async containerStats(containerId: string): Promise<ContainerStats> {
    await this.enter("containerStats", [containerId]);
    return this.zeroStats(this.container("containerStats", containerId));
  }

  async listContainerStats(input?: In<ContainerStatsFilter>): Promise<ContainerStats[]> {
    await this.enter("listContainerStats", [input]);
    const filter = input && ContainerStatsFilter.create(input);
    return [...this.containers.values()]
      .filter((c) => !filter?.id || c.id.startsWith(filter.id))
      .filter((c) => !filter?.podSandboxId || c.sandboxId.startsWith(filter.podSandboxId))
      .filter((c) => matchesLabels(c.config.labels, filter?.labelSelector))
      .map((c) => this.zeroStats(c));
  }

  async listPodSandboxStats(input?: In<PodSandboxStatsFilter>): Promise<PodSandboxStats[]> {
    await this.enter("listPodSandboxStats", [input]);
    const filter = input && PodSandboxStatsFilter.create(input);
    return [...this.sandboxes.values()]
      .filter((s) => !filter?.id || s.id.startsWith(filter.id))
      .filter((s) => matchesLabels(s.config.labels, filter?.labelSelector))
      .map((s) =>
        PodSandboxStats.create({
          attributes: { id: s.id, metadata: s.config.metadata, labels: { ...s.config.labels }, annotations: { ...s.config.annotations } },
          linux: { containers: [...this.containers.values()].filter((c) => c.sandboxId === s.id).map((c) => this.zeroStats(c)) },
        }),
      );
  }

  async *containerEvents(signal: AbortSignal): AsyncGenerator<ContainerEventResponse> {
    await this.enter("containerEvents", []);
    if (signal.aborted) return;
    const queue = new AsyncQueue<ContainerEventResponse>();
    this.subscribers.add(queue);
    const onAbort = () => queue.end();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      yield* queue;
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.subscribers.delete(queue);
    }
  }

  // --- ImageService ---------------------------------------------------------------

  async listImages(input?: In<ImageFilter>): Promise<Image[]> {
    await this.enter("listImages", [input]);
    const filter = input && ImageFilter.create(input);
    const want = filter?.image?.image ? this.findImage(filter.image.image) : undefined;
    if (filter?.image?.image && !want) return [];
    return [...this.images.values()].filter((i) => !want || i === want).map((i) => Image.clone(i));
  }

  async imageStatus(image: In<ImageSpec>): Promise<Image | undefined> {
    await this.enter("imageStatus", [image]);
    const found = this.findImage(image.image ?? "");
    return found ? Image.clone(found) : undefined;
  }

  async pullImage(image: In<ImageSpec>, auth?: In<AuthConfig>, sandboxConfig?: In<PodSandboxConfig>, opts?: PullOptions): Promise<string> {
    await this.enter("pullImage", [image, auth, sandboxConfig], opts?.signal);
    if (!image.image) throw this.unknown("pullImage", "", "image reference is empty");
    this.pulls.push({ image: image.image, auth: auth && AuthConfig.create(auth) });
    return this.addImage(image.image);
  }

  async removeImage(image: In<ImageSpec>): Promise<void> {
    await this.enter("removeImage", [image]);
    const found = this.findImage(image.image ?? "");
    if (found) this.images.delete(found.id);
  }

  async imageFsInfo(): Promise<ImageFsInfoResponse> {
    await this.enter("imageFsInfo", []);
    let used = 0n;
    for (const i of this.images.values()) used += i.size;
    const fs = { timestamp: this.now(), fsId: { mountpoint: this.imageFsMountpoint }, usedBytes: { value: used }, inodesUsed: { value: BigInt(this.images.size) } };
    return { imageFilesystems: [fs], containerFilesystems: [] };
  }

  close(): void {
    this.closed = true;
    for (const q of this.subscribers) q.end();
  }
}
