/**
 * The device manager (upstream pkg/kubelet/cm/devicemanager): device plugins
 * register on `<rootDir>/device-plugins/kubelet.sock`, are dialed back on
 * their own socket there, and stream their devices through ListAndWatch.
 *
 *   Register ──► dial endpoint ──► GetDevicePluginOptions ──► ListAndWatch
 *        healthy devices → node allocatable, all devices → capacity;
 *        the stream ends (plugin died) → every device unhealthy at once,
 *        and after 5 minutes the resource's capacity is 0 (upstream's grace).
 *   admission    through the topology manager (this is its first hint
 *                provider, as upstream): hints from the NUMA nodes the
 *                plugin reports for its devices (ListAndWatch
 *                Device.topology), then allocate() reserves the pod's
 *                devices by count (UnexpectedAdmissionError when short) and,
 *                for a resource whose devices report NUMA nodes, picks the
 *                container's devices at once on the merged hint's nodes first
 *                (upstream devicesToAllocate and filterByAffinity, choose.ts);
 *   runOptions   before a container is created: the pod's other devices are
 *                chosen, and those picked at admission chosen again (among
 *                the same candidates, with the same affinity) when the plugin
 *                offers GetPreferredAllocation: it is asked with the devices
 *                upstream offers it (the aligned ones when they suffice,
 *                must-include the pod's reusable ones, the container's whole
 *                count) and its answer taken for the devices it may have;
 *                then Allocate is asked once per container and checkpointed;
 *                PreStartContainer before each start when the plugin
 *                requires it.
 *
 * Unlike upstream, which calls Allocate during admission, the Allocate call is
 * made when the pod's first container is created (admission here is
 * synchronous): a plugin that fails Allocate makes CreateContainerConfigError
 * and a retry, not a rejected pod. The count reserved at admission keeps two
 * pods from being promised the same device either way.
 */
import { mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { posix } from "node:path";
import type { ActivePods, SourcesReady } from "../pods/active.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { type AllocateFailure, countOf, generateHints, type HintProvider, type NumaMask, type ProviderHints, type TopologyHint } from "../topologymanager/index.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { errorMessage } from "../util/errors.ts";
import { CHECKPOINT_FILE, readCheckpointFile, writeCheckpointFile, type CheckpointEntry } from "./checkpoint.ts";
import { GrpcPluginEndpoint, type PluginEndpoint } from "./endpoint.ts";
import { ContainerAllocateResponse, type Device, type DevicePluginOptions, type RegisterRequest } from "./gen/deviceplugin/api.ts";
import { DevicePluginClient, RegistrationClient } from "./gen/deviceplugin/api.client.ts";
import { Registration } from "./gen/deviceplugin/api.ts";
import { dialUnix, RpcError, serveUnix, type UnixServer } from "../util/grpc.ts";
import { allocationOrder, containerNeeds, podNeeds } from "./needs.ts";
import { type ChoiceInput, planDevices } from "./choose.ts";
import type { DeviceInstance, PodResourcesSource } from "./podresources.ts";
import { status as GrpcStatus } from "@grpc/grpc-js";
import type { RequestSink } from "../util/requests.ts";
import { podUid } from "../pods/identity.ts";

export const KUBELET_SOCKET = "kubelet.sock";
export const SUPPORTED_VERSIONS = ["v1beta1"];
/** How long a plugin that went away keeps its devices in capacity (as unhealthy), as upstream's endpointStopGracePeriod. */
export const ENDPOINT_STOP_GRACE_MS = 5 * 60_000;

export type AdmitResult = { admit: true } | { admit: false; reason: string; message: string };

/** What the CRI container config gets for a container's devices (upstream DeviceRunContainerOptions). */
export interface DeviceRunOptions {
  envs: { key: string; value: string }[];
  mounts: { containerPath: string; hostPath: string; readonly: boolean }[];
  devices: { containerPath: string; hostPath: string; permissions: string }[];
  annotations: Record<string, string>;
  cdiDevices: { name: string }[];
}

/** What the device manager reports to the kubelet metrics (metrics/kubelet.ts implements it). */
export interface DeviceMetrics {
  devicePluginRegistered(resource: string): void;
  devicePluginAllocated(resource: string, durationMs: number): void;
}

export class DeviceError extends Error {
  override readonly name = "DeviceError";
}

export interface DeviceManagerOptions {
  /** The device plugin directory, `<rootDir>/device-plugins`. */
  dir: string;
  clock: Clock;
  logger: Logger;
  /** Asked for a node status update when capacity or allocatable of a resource changed (the node controller serves it). */
  nodeStatus: RequestSink<void>;
  /**
   * Every pod source delivered its pods: from then on, allocations of pods
   * that are not active any more are freed (before it, a restarted agent
   * must not give away the devices of pods still loading).
   */
  sources: SourcesReady;
  /** The host's NUMA nodes, which hints are made of (upstream: the machine's topology). */
  numaNodes: readonly number[];
  /** The pods admitted and not terminated: allocations of the others are freed before hints and allocation (upstream UpdateAllocatedDevices). */
  pods: Pick<ActivePods, "activePods">;
  /** kubelet_device_plugin_registration_total and kubelet_device_plugin_alloc_duration_seconds. */
  metrics?: DeviceMetrics;
  /** Dials a registered plugin; the gRPC endpoint by default (tests pass a fake). */
  dial?: (resource: string, socketPath: string) => Promise<PluginEndpoint>;
}

interface ResourceState {
  endpoint?: PluginEndpoint;
  abort?: AbortController;
  healthy: Set<string>;
  unhealthy: Set<string>;
  /** Device ID → the NUMA nodes the plugin reports it on (none: no topology). */
  numa: Map<string, number[]>;
  /** When the plugin went away; the resource's capacity drops to 0 after the grace period. */
  stoppedAt?: number;
}

interface ContainerDevices {
  ids: string[];
  /** Device ID → the NUMA nodes its plugin reported when it was given (checkpointed; the pod resources API reports them). */
  numa: Record<string, number[]>;
  response?: ContainerAllocateResponse;
  /** Picked at admission with this NUMA affinity (the merged hint), not allocated yet: a plugin with GetPreferredAllocation chooses again. */
  atAdmission?: { affinity: NumaMask | undefined };
}

interface PodDevices {
  /** Devices of each resource the pod holds at its peak (reserved at admission). */
  needs: Map<string, number>;
  /** Container name → resource → what it was given. */
  containers: Map<string, Map<string, ContainerDevices>>;
  /** The pod's devices are picked and allocated (serializes the first container creations). */
  prepared?: Promise<void>;
}

/** Dials the plugin and asks its options (upstream asks GetDevicePluginOptions, not the options it registered with). */
const defaultDial = async (resource: string, socketPath: string): Promise<PluginEndpoint> => {
  const transport = dialUnix(socketPath);
  let options: DevicePluginOptions;
  try {
    ({ response: options } = await new DevicePluginClient(transport).getDevicePluginOptions({}, { timeout: 10_000 }));
  } finally {
    transport.close();
  }
  return new GrpcPluginEndpoint(resource, socketPath, options);
};

/** An extended resource name as upstream's IsExtendedResourceName: a domain-prefixed name outside kubernetes.io. */
export function isExtendedResourceName(name: string): boolean {
  const slash = name.indexOf("/");
  if (slash <= 0) return false;
  const domain = name.slice(0, slash);
  if (domain === "kubernetes.io" || domain.endsWith(".kubernetes.io") || name.startsWith("requests.")) return false;
  return /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(name) && name.length - slash - 1 <= 63;
}

export class DeviceManager implements AsyncDisposable, HintProvider, PodResourcesSource {
  private readonly resources = new Map<string, ResourceState>();
  private readonly pods = new Map<string, PodDevices>();
  private server: UnixServer | undefined;
  private readonly dial: NonNullable<DeviceManagerOptions["dial"]>;
  private readonly cancelTimers = new Set<() => void>();

  constructor(private readonly opts: DeviceManagerOptions) {
    this.dial = opts.dial ?? defaultDial;
  }

  /**
   * Reads the checkpoint, removes every other file of the directory (stale
   * plugin sockets: upstream does the same, and plugins register again when
   * they see kubelet.sock created) and serves Registration.
   */
  async start(): Promise<void> {
    const { dir, logger } = this.opts;
    mkdirSync(dir, { recursive: true, mode: 0o750 });
    const read = readCheckpointFile(dir);
    if (read && !read.ok) logger.warn("device manager checkpoint unusable; device allocations start empty", { file: posix.join(dir, CHECKPOINT_FILE), error: read.error });
    if (read?.ok) this.restore(read.data.entries, read.data.registered);
    for (const name of readdirSync(dir)) {
      if (name === CHECKPOINT_FILE) continue;
      const path = posix.join(dir, name);
      try {
        if (!statSync(path).isDirectory()) rmSync(path, { force: true });
      } catch {
        // went away meanwhile
      }
    }
    this.server = await serveUnix(posix.join(dir, KUBELET_SOCKET), [[Registration, { Register: (req: RegisterRequest) => this.register(req) }]]);
    logger.info("device plugin registration serving", { socket: this.server.socketPath, restoredPods: this.pods.size });
  }

  private restore(entries: CheckpointEntry[], registered: Record<string, string[]>): void {
    // As upstream: resources from the checkpoint count as registered, with no healthy device until their plugin comes back.
    for (const name of Object.keys(registered)) this.resources.set(name, { healthy: new Set(), unhealthy: new Set(), numa: new Map(), stoppedAt: this.opts.clock.now() });
    for (const e of entries) {
      const pod = this.pods.get(e.podUid) ?? { needs: new Map(), containers: new Map() };
      this.pods.set(e.podUid, pod);
      const byResource = pod.containers.get(e.container) ?? new Map<string, ContainerDevices>();
      pod.containers.set(e.container, byResource);
      byResource.set(e.resource, { ids: e.deviceIds, numa: e.numa, ...(e.allocResp ? { response: ContainerAllocateResponse.fromBinary(e.allocResp) } : {}) });
      pod.needs.set(e.resource, (pod.needs.get(e.resource) ?? 0) + e.deviceIds.length);
      if (!this.resources.has(e.resource)) this.resources.set(e.resource, { healthy: new Set(), unhealthy: new Set(), numa: new Map(), stoppedAt: this.opts.clock.now() });
    }
  }

  /** Registration.Register: validates, then dials the plugin back and watches its devices (in the background, as upstream). */
  private async register(req: RegisterRequest): Promise<object> {
    const { logger } = this.opts;
    this.opts.metrics?.devicePluginRegistered(req.resourceName);
    if (!SUPPORTED_VERSIONS.includes(req.version)) {
      const message = `Unsupported version: ${req.version}; supported versions: ${SUPPORTED_VERSIONS.join(", ")}`;
      logger.warn("device plugin registration refused", { resource: req.resourceName, message });
      throw new RpcError(GrpcStatus.INVALID_ARGUMENT, message);
    }
    if (!isExtendedResourceName(req.resourceName)) {
      const message = `invalid name of device plugin socket: ${req.resourceName}`;
      logger.warn("device plugin registration refused", { resource: req.resourceName, message });
      throw new RpcError(GrpcStatus.INVALID_ARGUMENT, message);
    }
    if (!req.endpoint || req.endpoint.includes("/"))
      throw new RpcError(GrpcStatus.INVALID_ARGUMENT, `invalid endpoint ${JSON.stringify(req.endpoint)}: a socket file name in ${this.opts.dir}`);
    const socketPath = posix.join(this.opts.dir, req.endpoint);
    logger.info("device plugin registering", { resource: req.resourceName, endpoint: socketPath });
    void this.connect(req.resourceName, socketPath);
    return {};
  }

  private async connect(resource: string, socketPath: string): Promise<void> {
    const { logger } = this.opts;
    let endpoint: PluginEndpoint;
    try {
      endpoint = await this.dial(resource, socketPath);
    } catch (err) {
      logger.warn("device plugin could not be dialed", { resource, endpoint: socketPath, error: errorMessage(err) });
      return;
    }
    const previous = this.resources.get(resource);
    previous?.abort?.abort();
    previous?.endpoint?.close();
    const state: ResourceState = {
      endpoint,
      abort: new AbortController(),
      healthy: previous?.healthy ?? new Set(),
      unhealthy: previous?.unhealthy ?? new Set(),
      numa: previous?.numa ?? new Map(),
    };
    this.resources.set(resource, state);
    logger.info("device plugin registered", {
      resource,
      endpoint: socketPath,
      preStartRequired: endpoint.options.preStartRequired,
      preferredAllocation: endpoint.options.getPreferredAllocationAvailable,
    });
    const signal = state.abort!.signal;
    endpoint
      .listAndWatch((devices) => this.devicesChanged(resource, state, devices), signal)
      .then(
        () => "ListAndWatch ended",
        (err: unknown) => errorMessage(err),
      )
      .then((why) => {
        if (signal.aborted || this.resources.get(resource) !== state) return; // replaced by a new registration, or stopping
        this.disconnected(resource, state, why);
      });
  }

  private devicesChanged(resource: string, state: ResourceState, devices: Device[]): void {
    if (this.resources.get(resource) !== state) return;
    state.numa = new Map(devices.map((d) => [d.iD, (d.topology?.nodes ?? []).map((n) => Number(n.iD))]));
    const healthy = new Set(devices.filter((d) => d.health === "Healthy").map((d) => d.iD));
    const unhealthy = new Set(devices.filter((d) => d.health !== "Healthy").map((d) => d.iD));
    const same = (a: Set<string>, b: Set<string>) => a.size === b.size && [...a].every((x) => b.has(x));
    if (same(healthy, state.healthy) && same(unhealthy, state.unhealthy)) return;
    state.healthy = healthy;
    state.unhealthy = unhealthy;
    delete state.stoppedAt;
    this.opts.logger.info("device plugin devices", { resource, healthy: healthy.size, unhealthy: unhealthy.size });
    this.writeCheckpoint();
    this.opts.nodeStatus.request();
  }

  /** The plugin went away: its devices are unhealthy at once, and gone from capacity after the grace period (upstream). */
  private disconnected(resource: string, state: ResourceState, why: string): void {
    const { logger, clock } = this.opts;
    logger.warn("device plugin disconnected; its devices are unhealthy", {
      resource,
      endpoint: state.endpoint?.socketPath,
      reason: why,
      devices: state.healthy.size + state.unhealthy.size,
    });
    state.endpoint?.close();
    delete state.endpoint;
    for (const id of state.healthy) state.unhealthy.add(id);
    state.healthy = new Set();
    state.stoppedAt = clock.now();
    this.opts.nodeStatus.request();
    const cancel = clock.setTimer(ENDPOINT_STOP_GRACE_MS, () => {
      this.cancelTimers.delete(cancel);
      if (this.resources.get(resource) !== state || state.endpoint) return;
      logger.info("device plugin gone past its grace period; capacity 0", { resource });
      state.unhealthy = new Set();
      this.opts.nodeStatus.request();
    });
    this.cancelTimers.add(cancel);
  }

  /** Capacity (every device) and allocatable (healthy devices) of each resource a plugin ever registered; 0 once gone, as upstream. */
  nodeResources(): { capacity: Record<string, string>; allocatable: Record<string, string> } {
    const capacity: Record<string, string> = {};
    const allocatable: Record<string, string> = {};
    for (const [name, s] of [...this.resources].sort(([a], [b]) => a.localeCompare(b))) {
      capacity[name] = String(s.healthy.size + s.unhealthy.size);
      allocatable[name] = String(s.healthy.size);
    }
    return { capacity, allocatable };
  }

  private isDeviceResource = (name: string): boolean => this.resources.has(name);

  /** Device IDs of a resource held by pods other than `except`. */
  private held(resource: string, except?: string): { ids: Set<string>; pending: number } {
    const ids = new Set<string>();
    let pending = 0;
    for (const [uid, pod] of this.pods) {
      if (uid === except) continue;
      let chosen = 0;
      for (const byResource of pod.containers.values()) {
        for (const id of byResource.get(resource)?.ids ?? []) ids.add(id);
        chosen += byResource.get(resource)?.ids.length ?? 0;
      }
      // Reserved at admission and not picked yet: counts as its number.
      pending += Math.max(0, (pod.needs.get(resource) ?? 0) - chosen);
    }
    return { ids, pending };
  }

  /** Frees the devices of pods that are not active any more (only once every source delivered its pods). */
  private prune(active: Set<string>): void {
    if (!this.opts.sources.allSourcesReady()) return;
    let changed = false;
    for (const uid of [...this.pods.keys()]) {
      if (active.has(uid)) continue;
      this.pods.delete(uid);
      changed = true;
    }
    if (changed) this.writeCheckpoint();
  }

  /** Allocations of pods that are not active any more are freed; the pod being admitted keeps its own (a restarted agent admits its pods again). */
  private pruneFor(admitting: Pod): void {
    this.prune(new Set([podUid(admitting), ...this.opts.pods.activePods().map((p) => podUid(p))]));
  }

  /** The NUMA nodes the plugin reports for these devices (those without topology are left out). */
  private numaOf(resource: string, ids: readonly string[]): Record<string, number[]> {
    const state = this.resources.get(resource);
    return Object.fromEntries(ids.flatMap((id) => (state?.numa.get(id)?.length ? [[id, [...state.numa.get(id)!]]] : [])));
  }

  /** upstream deviceHasTopologyAlignment: some device of the resource reports NUMA nodes. */
  private aligned(resource: string): boolean {
    return [...(this.resources.get(resource)?.numa.values() ?? [])].some((nodes) => nodes.length > 0);
  }

  private onMask(state: ResourceState, id: string, mask: NumaMask): boolean {
    return (state.numa.get(id) ?? []).some((n) => (mask >> BigInt(n)) & 1n);
  }

  /** upstream generateDeviceTopologyHints: every device the plugin lists counts towards what a NUMA set could hold. */
  private hints(resource: string, available: readonly string[], reusable: readonly string[], request: number): TopologyHint[] {
    const state = this.resources.get(resource)!;
    const all = [...state.numa.keys()];
    const on = (ids: readonly string[], mask: NumaMask) => ids.filter((id) => this.onMask(state, id, mask)).length;
    return generateHints({
      nodes: this.opts.numaNodes,
      request,
      totalIn: (mask) => on(all, mask),
      availableIn: (mask) => on(available, mask),
      reusableIn: (mask) => {
        const withTopology = reusable.filter((id) => (state.numa.get(id) ?? []).length > 0);
        return on(withTopology, mask) === withTopology.length ? withTopology.length : undefined;
      },
    });
  }

  /** Healthy devices no other pod holds (upstream getAvailableDevices), minus `alsoHeld`. */
  private availableIds(resource: string, uid: string, alsoHeld: ReadonlySet<string> = new Set()): string[] {
    const state = this.resources.get(resource)!;
    const others = this.held(resource, uid).ids;
    return [...state.healthy].filter((id) => !others.has(id) && !alsoHeld.has(id)).sort();
  }

  /**
   * This pod's devices of `resource` held by containers other than `container`: those of its plain init containers (reusable) and the others.
   * `ignorePicked`: devices picked at admission and not allocated do not count (they are chosen again, container by container).
   */
  private ownDevices(pod: Pod, container: string, resource: string, ignorePicked = false): { reusable: string[]; longRunning: Set<string> } {
    const entry = this.pods.get(podUid(pod));
    const regularInit = new Set(
      allocationOrder(pod)
        .filter((c) => c.init && !c.sidecar)
        .map((c) => c.container.name),
    );
    const reusable = new Set<string>();
    const longRunning = new Set<string>();
    for (const [name, byResource] of entry?.containers ?? []) {
      const given = byResource.get(resource);
      if (name === container || !given || (ignorePicked && given.atAdmission && !given.response)) continue;
      for (const id of given.ids) (regularInit.has(name) ? reusable : longRunning).add(id);
    }
    for (const id of longRunning) reusable.delete(id);
    return { reusable: [...reusable].sort(), longRunning };
  }

  /** upstream GetTopologyHints: per device resource of the container, none for a resource without NUMA nodes. */
  containerHints(pod: Pod, container: ContainerSpec): ProviderHints {
    this.pruneFor(pod);
    const uid = podUid(pod);
    const out: Record<string, TopologyHint[] | undefined> = {};
    for (const [resource, n] of containerNeeds(container, this.isDeviceResource)) {
      if (!this.aligned(resource)) {
        out[resource] = undefined;
        continue;
      }
      const allocated = this.pods.get(uid)?.containers.get(container.name)?.get(resource)?.ids ?? [];
      if (allocated.length > 0) {
        out[resource] = allocated.length === n ? this.hints(resource, allocated, [], n) : [];
        continue;
      }
      const { reusable, longRunning } = this.ownDevices(pod, container.name, resource);
      const available = this.availableIds(resource, uid, new Set([...longRunning, ...reusable]));
      out[resource] = available.length + reusable.length < n ? [] : this.hints(resource, available, reusable, n);
    }
    return Object.keys(out).length ? out : undefined;
  }

  /** upstream GetPodTopologyHints: the pod's devices at its peak, from what it holds already or what is free. */
  podHints(pod: Pod): ProviderHints {
    this.pruneFor(pod);
    const uid = podUid(pod);
    const out: Record<string, TopologyHint[] | undefined> = {};
    for (const [resource, n] of podNeeds(pod, this.isDeviceResource)) {
      if (!this.aligned(resource)) {
        out[resource] = undefined;
        continue;
      }
      const allocated = new Set([...(this.pods.get(uid)?.containers.values() ?? [])].flatMap((byResource) => byResource.get(resource)?.ids ?? []));
      if (allocated.size > 0) {
        out[resource] = allocated.size === n ? this.hints(resource, [...allocated], [], n) : [];
        continue;
      }
      const available = this.availableIds(resource, uid);
      out[resource] = available.length < n ? [] : this.hints(resource, available, [], n);
    }
    return out;
  }

  /** The pod being admitted: whether this admission reserved it, and the devices it picked (rollback). */
  private fresh: { uid: string; reserved: boolean; picked: { container: string; resource: string }[] } | undefined;

  /**
   * upstream Allocate for one container, called by the topology manager with
   * the merged hint. The first container's call reserves the whole pod's
   * devices by count (refused when short: UnexpectedAdmissionError with
   * upstream's message); a resource whose devices report NUMA nodes has the
   * container's devices picked now, on the hint's nodes first.
   */
  allocate(pod: Pod, container: ContainerSpec, hint: TopologyHint | undefined): AllocateFailure | undefined {
    this.pruneFor(pod);
    const uid = podUid(pod);
    if (this.fresh?.uid !== uid) this.beginAdmission(pod);
    if (allocationOrder(pod)[0]?.container === container) {
      const err = this.reserve(pod);
      if (err !== undefined) return err;
    }
    const entry = this.pods.get(uid);
    if (!entry) return undefined;
    for (const [resource, n] of containerNeeds(container, this.isDeviceResource)) {
      if (!this.aligned(resource)) continue; // picked when the container is created, GetPreferredAllocation included
      const byResource = entry.containers.get(container.name) ?? new Map<string, ContainerDevices>();
      const given = byResource.get(resource);
      if (given) {
        if (given.ids.length !== n) return `pod "${uid}" container "${container.name}" changed request for resource "${resource}" from ${given.ids.length} to ${n}`;
        continue;
      }
      // Chosen now, without the plugin (admission is synchronous), so that the next pod's hints see them taken;
      // a plugin offering GetPreferredAllocation chooses again among the same candidates before Allocate (prepare).
      const picked = planDevices(this.choiceInput(pod, container.name, resource, n, hint?.affinity)).choose(undefined);
      if (!picked.ok) return picked.error;
      byResource.set(resource, { ids: picked.ids, numa: this.numaOf(resource, picked.ids), atAdmission: { affinity: hint?.affinity } });
      entry.containers.set(container.name, byResource);
      this.fresh!.picked.push({ container: container.name, resource });
      this.writeCheckpoint();
      this.opts.logger.info("devices picked", { pod: `${pod.metadata.namespace}/${pod.metadata.name}`, container: container.name, resource, devices: picked.ids.join(",") });
    }
    return undefined;
  }

  beginAdmission(pod: Pod): void {
    this.fresh = { uid: podUid(pod), reserved: false, picked: [] };
  }

  /** The pod was not admitted: what this admission reserved and picked for it is free again. */
  rollback(pod: Pod): void {
    const uid = podUid(pod);
    if (this.fresh?.uid !== uid) return;
    const { reserved, picked } = this.fresh;
    this.fresh = undefined;
    if (reserved) this.pods.delete(uid);
    else for (const { container, resource } of picked) this.pods.get(uid)?.containers.get(container)?.delete(resource);
    if (reserved || picked.length) this.writeCheckpoint();
  }

  /** Reserves the pod's devices by count; a pod admitted before (an agent restart finds them in the checkpoint) keeps them. */
  private reserve(pod: Pod): string | undefined {
    const uid = podUid(pod);
    const needs = podNeeds(pod, this.isDeviceResource);
    const existing = this.pods.get(uid);
    if (existing) {
      existing.needs = needs;
      return undefined;
    }
    if (needs.size === 0) return undefined;
    for (const [resource, n] of needs) {
      const state = this.resources.get(resource)!;
      if (state.healthy.size === 0) return `no healthy devices present; cannot allocate unhealthy devices ${resource}`;
      const { ids, pending } = this.held(resource, uid);
      const available = Math.max(0, [...state.healthy].filter((id) => !ids.has(id)).length - pending);
      if (available < n) return `requested number of devices unavailable for ${resource}. Requested: ${n}, Available: ${available}`;
    }
    this.pods.set(uid, { needs, containers: new Map() });
    if (this.fresh?.uid === uid) this.fresh.reserved = true;
    return undefined;
  }

  /**
   * What upstream's devicesToAllocate chooses from for one container: the
   * pod's reusable devices, the free ones, and where each is relative to the
   * container's NUMA affinity (all "none" without one or without topology).
   */
  private choiceInput(pod: Pod, container: string, resource: string, n: number, affinity: NumaMask | undefined, ignorePicked = false): ChoiceInput {
    const state = this.resources.get(resource)!;
    const { reusable, longRunning } = this.ownDevices(pod, container, resource, ignorePicked);
    const available = this.availableIds(resource, podUid(pod), new Set([...longRunning, ...reusable]));
    const topo = (id: string) => (state.numa.get(id) ?? []).length > 0;
    const placement: ChoiceInput["placement"] =
      affinity !== undefined && countOf(affinity) > 0 && this.aligned(resource)
        ? (id) => (!topo(id) ? "none" : this.onMask(state, id, affinity) ? "aligned" : "unaligned")
        : () => "none";
    return { resource, required: n, reusable, available, placement };
  }

  /** The pod is gone from the node: its devices are free. Idempotent. */
  podRemoved(uid: string): void {
    if (this.pods.delete(uid)) this.writeCheckpoint();
  }

  /** Frees the devices of pods `known` does not know (housekeeping, once every source is ready). */
  removeOrphans(known: (uid: string) => boolean): void {
    this.prune(new Set([...this.pods.keys()].filter(known)));
  }

  /**
   * What the CRI config of `container` gets from its devices; picks and
   * allocates the pod's devices on the first call. Throws a DeviceError
   * (the container is not created: CreateContainerConfigError, retried).
   */
  async runOptions(pod: Pod, containerName: string): Promise<DeviceRunOptions> {
    const out: DeviceRunOptions = { envs: [], mounts: [], devices: [], annotations: {}, cdiDevices: [] };
    const entry = this.pods.get(podUid(pod));
    if (!entry || entry.needs.size === 0) return out;
    entry.prepared ??= this.prepare(pod, entry).catch((err: unknown) => {
      delete entry.prepared; // retried on the next sync
      throw err;
    });
    await entry.prepared;
    const byResource = entry.containers.get(containerName);
    if (!byResource) return out;
    const seen = { env: new Set<string>(), mount: new Set<string>(), dev: new Set<string>(), cdi: new Set<string>() };
    for (const [resource, given] of [...byResource].sort(([a], [b]) => a.localeCompare(b))) {
      const endpoint = this.resources.get(resource)?.endpoint;
      if (endpoint?.options.preStartRequired) {
        await endpoint.preStartContainer(given.ids).catch((err: unknown) => {
          throw new DeviceError(`device plugin PreStartContainer rpc failed with err: ${errorMessage(err)}`);
        });
      }
      const r = given.response;
      if (!r) continue;
      // Merged as upstream: the first value of an env name, mount path or device path wins.
      for (const [key, value] of Object.entries(r.envs).sort(([a], [b]) => a.localeCompare(b))) if (!seen.env.has(key)) seen.env.add(key), out.envs.push({ key, value });
      for (const m of r.mounts)
        if (!seen.mount.has(m.containerPath)) seen.mount.add(m.containerPath), out.mounts.push({ containerPath: m.containerPath, hostPath: m.hostPath, readonly: m.readOnly });
      for (const d of r.devices)
        if (!seen.dev.has(d.containerPath)) seen.dev.add(d.containerPath), out.devices.push({ containerPath: d.containerPath, hostPath: d.hostPath, permissions: d.permissions });
      for (const [k, v] of Object.entries(r.annotations)) out.annotations[k] ??= v;
      for (const c of r.cdiDevices) if (!seen.cdi.has(c.name)) seen.cdi.add(c.name), out.cdiDevices.push({ name: c.name });
    }
    return out;
  }

  /** Picks each container's devices (init containers first, handing theirs on) and asks the plugins' Allocate. */
  private async prepare(pod: Pod, entry: PodDevices): Promise<void> {
    const uid = podUid(pod);
    for (const { container } of allocationOrder(pod)) {
      const needs = containerNeeds(container, this.isDeviceResource);
      if (needs.size === 0) continue;
      const byResource = entry.containers.get(container.name) ?? new Map<string, ContainerDevices>();
      entry.containers.set(container.name, byResource);
      for (const [resource, n] of needs) {
        const state = this.resources.get(resource)!;
        let given = byResource.get(resource);
        if (given && given.ids.length !== n)
          throw new DeviceError(`pod "${uid}" container "${container.name}" changed request for resource "${resource}" from ${given.ids.length} to ${n}`);
        if (given?.response) continue;
        if (!given || (given.atAdmission && state.endpoint?.options.getPreferredAllocationAvailable)) {
          const ids = await this.choose(pod, container.name, resource, n, given?.atAdmission?.affinity);
          given = { ids, numa: this.numaOf(resource, ids) };
          byResource.set(resource, given);
          this.writeCheckpoint();
        }
        const endpoint = state.endpoint;
        if (!endpoint) throw new DeviceError(`unknown Device Plugin ${resource}`);
        const started = this.opts.clock.now();
        try {
          given.response = await endpoint.allocate(given.ids);
          this.opts.metrics?.devicePluginAllocated(resource, this.opts.clock.now() - started);
        } catch (err) {
          throw new DeviceError(`device plugin Allocate rpc failed for ${resource}: ${errorMessage(err)}`);
        }
        this.writeCheckpoint();
        this.opts.logger.info("devices allocated", { pod: `${pod.metadata.namespace}/${pod.metadata.name}`, container: container.name, resource, devices: given.ids.join(",") });
      }
    }
  }

  /**
   * upstream devicesToAllocate for a container about to be created: the
   * plugin's GetPreferredAllocation is asked when it offers it and the choice
   * depends on it. The candidates are read again after the answer (another
   * pod may have been admitted meanwhile); the answer counts for the devices
   * still among them. A container's own devices picked at admission are
   * candidates, as they were when they were picked.
   */
  private async choose(pod: Pod, container: string, resource: string, n: number, affinity: NumaMask | undefined): Promise<string[]> {
    const endpoint = this.resources.get(resource)?.endpoint;
    // With the plugin's preference, the other containers' devices picked at admission are chosen again after this one (in allocation order).
    const again = !!endpoint?.options.getPreferredAllocationAvailable;
    const { question } = planDevices(this.choiceInput(pod, container, resource, n, affinity, again));
    let answer: string[] | undefined;
    if (question && endpoint?.options.getPreferredAllocationAvailable) {
      try {
        answer = await endpoint.preferredAllocation(question.available, question.mustInclude, question.size);
      } catch (err) {
        throw new DeviceError(`device plugin GetPreferredAllocation rpc failed with err: ${errorMessage(err)}`);
      }
    }
    const chosen = planDevices(this.choiceInput(pod, container, resource, n, affinity, again)).choose(answer);
    if (!chosen.ok) throw new DeviceError(chosen.error);
    if (answer !== undefined && chosen.ids.some((id) => !answer.includes(id)))
      this.opts.logger.info("device plugin's preferred allocation not taken whole", { resource, container, preferred: answer.join(","), chosen: chosen.ids.join(",") });
    return chosen.ids;
  }

  /** Allocations as the pod resources API reports them: pod UID → container → resource → device IDs. */
  allocations(): Map<string, Map<string, Map<string, string[]>>> {
    const out = new Map<string, Map<string, Map<string, string[]>>>();
    for (const [uid, pod] of this.pods) {
      const containers = new Map<string, Map<string, string[]>>();
      for (const [name, byResource] of pod.containers) containers.set(name, new Map([...byResource].map(([r, g]) => [r, [...g.ids]])));
      out.set(uid, containers);
    }
    return out;
  }

  /** Each pod's devices with the NUMA nodes they were on when given (the pod resources API's List and Get). */
  devicesInUse(): Map<string, Map<string, Map<string, DeviceInstance[]>>> {
    const out = new Map<string, Map<string, Map<string, DeviceInstance[]>>>();
    for (const [uid, pod] of this.pods) {
      const containers = new Map<string, Map<string, DeviceInstance[]>>();
      for (const [name, byResource] of pod.containers) containers.set(name, new Map([...byResource].map(([r, g]) => [r, g.ids.map((id) => ({ id, numa: g.numa[id] ?? [] }))])));
      out.set(uid, containers);
    }
    return out;
  }

  /** Healthy devices of each resource with the NUMA nodes their plugin reports (the pod resources API's GetAllocatableResources). */
  allocatableDevices(): Map<string, DeviceInstance[]> {
    return new Map([...this.resources].map(([name, s]) => [name, [...s.healthy].sort().map((id) => ({ id, numa: s.numa.get(id) ?? [] }))]));
  }

  private writeCheckpoint(): void {
    const entries: CheckpointEntry[] = [];
    for (const [uid, pod] of this.pods) {
      for (const [container, byResource] of pod.containers) {
        for (const [resource, given] of byResource) {
          entries.push({
            podUid: uid,
            container,
            resource,
            deviceIds: given.ids,
            numa: given.numa,
            ...(given.response ? { allocResp: ContainerAllocateResponse.toBinary(given.response) } : {}),
          });
        }
      }
    }
    const registered = Object.fromEntries([...this.resources].map(([name, s]) => [name, [...s.healthy].sort()]));
    try {
      writeCheckpointFile(this.opts.dir, { entries, registered });
    } catch (err) {
      this.opts.logger.error("device manager checkpoint not written", { error: errorMessage(err) });
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const cancel of this.cancelTimers) cancel();
    this.cancelTimers.clear();
    for (const s of this.resources.values()) {
      s.abort?.abort();
      s.endpoint?.close();
    }
    this.server?.close();
  }
}

/** A registration client, for tests and tools that play a device plugin. */
export { RegistrationClient };
