/**
 * Registers the Node, then keeps two loops (upstream kubelet_node_status.go
 * and nodelease): the status loop computes the status every
 * nodeStatusUpdateFrequency and sends it only when it changed or every
 * nodeStatusReportFrequency; the lease loop renews the node's Lease in
 * kube-node-lease every quarter of its duration — the lease is the
 * heartbeat the node lifecycle controller watches. As upstream, both loops
 * wait their period plus up to 4% more after each pass (wait.JitterUntil
 * with 0.04, sliding), and the first periodic report after a change (or the
 * start) comes nodeStatusReportFrequency ± half of it later (upstream's
 * delayAfterNodeStatusChange), then every nodeStatusReportFrequency: so
 * many nodes' leases and reports drift apart instead of reaching the API
 * server together.
 */
import { isApiReason, type ApiObject, type KubeApi } from "../api/index.ts";
import type { KubeletConfiguration } from "../config/index.ts";
import type { CriService } from "../cri/index.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { nodeRef, type EventRecorder } from "../events/recorder.ts";
import type { MachineInfo } from "./machine.ts";
import { defaultLabels, initialNode, nodeStatus, withoutHeartbeats, type NodeCondition, type NodeIdentity, type Pressure, type RuntimeHealth } from "./status.ts";
import type { Requests } from "../util/requests.ts";
import type { NodeRegistration } from "./registration.ts";
import { canonicalJson } from "../util/canonical-json.ts";

export const LEASE_NAMESPACE = "kube-node-lease";

/** The PLEG's health: Ready turns False while relisting is stuck (upstream's PLEG health check). */
export interface PlegHealth {
  healthy(): { ok: boolean; message: string };
}

/** Memory, disk and PID pressure, as the eviction manager sees them. */
export interface NodePressure {
  conditions(): Pressure;
}

/** "node is shutting down" during a graceful node shutdown (upstream ShutdownStatus). */
export interface ShutdownStatus {
  status(): string | undefined;
}

/** The extended resources of device plugins, in capacity and allocatable. */
export interface ExtendedResources {
  nodeResources(): { capacity: Record<string, string>; allocatable: Record<string, string> };
}

export interface NodeControllerOptions {
  api: KubeApi;
  cri: Pick<CriService, "status" | "version" | "listImages">;
  pleg: PlegHealth;
  id: NodeIdentity;
  machine: MachineInfo;
  internalIP: string | undefined;
  config: KubeletConfiguration;
  clock: Clock;
  logger: Logger;
  recorder?: EventRecorder;
  /** Memory, disk and PID pressure, from the eviction manager. */
  pressure?: NodePressure;
  /** A graceful node shutdown: Ready turns False with its status. */
  shutdown?: ShutdownStatus;
  /** Extended resources of device plugins (devices/). */
  extendedResources?: ExtendedResources;
  /** Status updates asked for between the periodic ones (the node shutdown manager); served from construction on. */
  statusRequests?: Requests<void>;
  /** Told the Node's UID once registered (mirror pods, built before the controller, read it there). */
  registration?: NodeRegistration;
  /** A storage error keeps Ready False (upstream: "CSINode is not yet initialized" until the CSINode exists). */
  storage?: StorageHealth;
  /** Told the Node as the API returns it (registration, status updates): its spec.podCIDRs go to the runtime. */
  podCidr?: NodePodCidr;
  /** Numbers in [0, 1): the loops' jitter and the report delay after a change. */
  random: () => number;
}

/** Upstream's jitter factor for the status and lease loops (wait.JitterUntil(..., 0.04, true, ...)). */
export const LOOP_JITTER = 0.04;

/** A storage error for the Ready condition, after the runtime's and the PLEG's (upstream runtimeState.storageErrors). */
export interface StorageHealth {
  storageError(): string | undefined;
  /** Resolves once the storage side first tried to get ready; the first status waits for it (a few seconds at most). */
  firstAttempt(): Promise<void>;
}

/** How long the first status waits for the storage side's first try. */
const FIRST_STORAGE_WAIT_MS = 5_000;

/** What takes the Node's pod CIDRs to the runtime (node/pod-cidr.ts). */
export interface NodePodCidr {
  fromNode(node: ApiObject | undefined): Promise<void>;
}

/** RFC 3339 with microseconds, the MicroTime format of Lease.renewTime. */
export const microTime = (ms: number): string => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * Status fields no one but this agent writes: a patch leaves each out when the
 * Node the API server last returned has it as computed (upstream sends a
 * two-way merge diff against its copy of the Node). The conditions,
 * capacity and allocatable always go: other writers (the node lifecycle
 * controller) change them.
 */
const OWN_STATUS_FIELDS = ["nodeInfo", "images", "daemonEndpoints", "addresses"];

/** `status` without the fields of OWN_STATUS_FIELDS that `apiNode` already has the same. */
export function statusPatch(status: ApiObject, apiNode: ApiObject | undefined): ApiObject {
  const current = apiNode?.status as Record<string, unknown> | undefined;
  if (!current) return status;
  const patch: ApiObject = { ...status };
  for (const field of OWN_STATUS_FIELDS) if (field in patch && canonicalJson(patch[field]) === canonicalJson(current[field])) delete patch[field];
  return patch;
}

/** The conditions of the Node as registration read or created it. */
function registeredConditions(node: ApiObject | undefined): NodeCondition[] {
  const conditions = (node?.status as { conditions?: unknown } | undefined)?.conditions;
  return Array.isArray(conditions) ? (conditions as NodeCondition[]).filter((c) => c && typeof c.type === "string" && typeof c.lastTransitionTime === "string") : [];
}

export class NodeController implements AsyncDisposable {
  private registered: ApiObject | undefined;
  /** The Node as the API server last returned it (registration, then each status patch): what a patch leaves out is there. */
  private apiNode: ApiObject | undefined;
  private lastSent: { key: string; at: number; conditions: NodeCondition[] } | undefined;
  /**
   * The API server could not be reached since the status was last sent: the
   * node lifecycle controller has likely marked the node Unknown meanwhile,
   * so the next status goes out even if this agent's view did not change
   * (upstream compares with the API's copy of the node to the same effect).
   */
  private apiMissedUs = false;
  /** The last patch's answer has a field the patch left out otherwise than computed: the next pass sends the status. */
  private apiChangedOwnFields = false;
  private readonly timers = new Map<string, () => void>();
  private inFlight = new Set<Promise<unknown>>();
  private stopped = false;
  private lease: ApiObject | undefined;
  /**
   * Added to nodeStatusReportFrequency for the next unchanged report: drawn
   * from ±half of it when the status changed (or on the first report), 0
   * after an unchanged report (upstream delayAfterNodeStatusChange).
   */
  private reportDelayMs = 0;

  constructor(private readonly opts: NodeControllerOptions) {
    // Before registration there is nothing to update: the first status follows registration at once.
    opts.statusRequests?.serve(() => {
      if (this.registered) void this.updateStatus().catch(() => {});
    });
  }

  /** Starts registration (retried until it succeeds), then the status and lease loops. */
  start(): void {
    this.opts.recorder?.event(nodeRef(this.opts.id.nodeName), "Normal", "Starting", "Starting kubelet.");
    this.loop(
      "register",
      0,
      async () => {
        if (this.registered) return false;
        this.registered = await this.register();
        this.apiNode = this.registered;
        this.opts.registration?.registered(this.nodeUid());
        await this.opts.podCidr?.fromNode(this.registered);
        this.opts.logger.info("successfully registered node", { node: this.opts.id.nodeName });
        // The CSINode of a restarted agent exists already: its check settles first, so Ready does not flip for it.
        if (this.opts.storage) {
          const waited = new AbortController();
          await Promise.race([this.opts.storage.firstAttempt(), this.opts.clock.sleep(FIRST_STORAGE_WAIT_MS, waited.signal).catch(() => {})]);
          waited.abort();
        }
        this.loop("status", 0, () => this.updateStatus().then(() => true), this.jittered(this.opts.config.nodeStatusUpdateFrequency));
        this.loop("lease", 0, () => this.renewLease().then(() => true), this.jittered((this.opts.config.nodeLeaseDurationSeconds * 1000) / 4));
        return false;
      },
      7000,
    );
  }

  isRegistered(): boolean {
    return this.registered !== undefined;
  }

  /** The Node's UID once registered (mirror pods and the lease are owned by it). */
  nodeUid(): string | undefined {
    return (this.registered?.metadata as { uid?: string } | undefined)?.uid;
  }

  /** `periodMs` plus up to 4% more, drawn for each wait (upstream wait.Jitter(period, 0.04)). */
  private jittered(periodMs: number): () => number {
    return () => periodMs * (1 + LOOP_JITTER * this.opts.random());
  }

  /**
   * Runs `fn` after `delayMs` and then again `periodMs()` after each pass ends while it
   * returns true; a failure retries after `periodMs()`.
   */
  private loop(name: string, delayMs: number, fn: () => Promise<boolean>, periodMs: number | (() => number)): void {
    if (this.stopped) return;
    const next = typeof periodMs === "number" ? () => periodMs : periodMs;
    this.timers.set(
      name,
      this.opts.clock.setTimer(delayMs, () => {
        const run = fn()
          .then((again) => again && this.loop(name, next(), fn, next))
          .catch((err) => {
            this.apiMissedUs = true;
            this.opts.logger.warn(`node ${name} failed; will retry`, { err: errorMessage(err) });
            this.loop(name, next(), fn, next);
          })
          .finally(() => this.inFlight.delete(run));
        this.inFlight.add(run);
      }),
    );
  }

  private async register(): Promise<ApiObject> {
    const { api, id, machine, config } = this.opts;
    const node = initialNode(id, machine, config);
    try {
      return await api.createNode(node);
    } catch (err) {
      if (!isApiReason(err, "AlreadyExists")) throw err;
    }
    // The node exists (a restart): reconcile the labels this agent owns.
    const existing = await api.getNode(id.nodeName);
    if (!existing) throw new Error(`node ${id.nodeName} exists but cannot be read`);
    const labels = ((existing.metadata ?? {}) as { labels?: Record<string, string> }).labels ?? {};
    const wanted = defaultLabels(id, machine);
    const drift = Object.entries(wanted).filter(([k, v]) => labels[k] !== v);
    if (drift.length) return api.patchNode(id.nodeName, { metadata: { labels: Object.fromEntries(drift) } });
    return existing;
  }

  async runtimeHealth(): Promise<RuntimeHealth> {
    const errors: string[] = [];
    let runtimeVersion = "";
    try {
      const [version, status] = await Promise.all([this.opts.cri.version(), this.opts.cri.status()]);
      runtimeVersion = `${version.runtimeName}://${version.runtimeVersion}`;
      for (const type of ["RuntimeReady", "NetworkReady"]) {
        const c = status.status?.conditions.find((c) => c.type === type);
        if (!c?.status) {
          const what = type === "RuntimeReady" ? "container runtime not ready" : "container runtime network not ready";
          errors.push(`${what}: ${type}=false reason:${c?.reason ?? ""} message:${c?.message ?? ""}`);
        }
      }
    } catch (err) {
      errors.push(`container runtime is down: ${errorMessage(err)}`);
    }
    const pleg = this.opts.pleg.healthy();
    if (!pleg.ok) errors.push(`PLEG is not healthy: ${pleg.message}`);
    const storage = this.opts.storage?.storageError();
    if (storage) errors.push(storage);
    const shutdown = this.opts.shutdown?.status();
    if (shutdown) errors.push(shutdown);
    return { errors, runtimeVersion };
  }

  /** Computes the status; patches it when it changed or the report period passed. */
  async updateStatus(): Promise<boolean> {
    const { api, clock, config } = this.opts;
    const [health, images] = await Promise.all([this.runtimeHealth(), this.opts.cri.listImages().catch(() => [])]);
    const now = clock.now();
    const status = nodeStatus({
      id: this.opts.id,
      machine: this.opts.machine,
      config,
      health,
      images: images.map((i) => ({ names: [...i.repoDigests, ...i.repoTags], sizeBytes: Number(i.size) })),
      internalIP: this.opts.internalIP,
      // Before its first update: the conditions the Node already has (written by this agent before a restart, or by the
      // kubelet it took the node over from), so a Ready that stays True keeps its lastTransitionTime, as upstream's
      // update of the API's copy does.
      previousConditions: this.lastSent?.conditions ?? registeredConditions(this.registered),
      now: rfc3339(now),
      ...(this.opts.pressure ? { pressure: this.opts.pressure.conditions() } : {}),
      ...(this.opts.extendedResources ? { extended: this.opts.extendedResources.nodeResources() } : {}),
      ...(this.registered ? { registered: this.registered } : {}),
    });
    const key = withoutHeartbeats(status);
    // Missed by the API server counts as a change: the node lifecycle controller has likely changed the API's copy.
    const last = this.lastSent;
    const changed = this.apiMissedUs || this.apiChangedOwnFields || !last || last.key !== key;
    if (last && !changed && now - last.at < config.nodeStatusReportFrequency + this.reportDelayMs) return false;
    this.reportDelayMs = changed ? config.nodeStatusReportFrequency * (this.opts.random() - 0.5) : 0;
    // Missed by the API server: its copy may have changed meanwhile, so the whole status goes.
    const sent = this.apiMissedUs ? status : statusPatch(status, this.apiNode);
    const updated = await api.patchNodeStatus(this.opts.id.nodeName, { status: sent });
    this.apiNode = updated;
    // A field left out because the API's copy had it as computed, which the answer has otherwise: another writer (an
    // admin) changed it meanwhile; it goes with the next pass, as upstream's diff against its watched Node would send it.
    const leftOut = Object.fromEntries(OWN_STATUS_FIELDS.filter((f) => f in status && !(f in sent)).map((f) => [f, status[f]]));
    this.apiChangedOwnFields = Object.keys(statusPatch(leftOut, updated)).length > 0;
    this.apiMissedUs = false;
    await this.opts.podCidr?.fromNode(updated);
    if (!this.lastSent || this.lastSent.key !== key) {
      const ready = (status.conditions as NodeCondition[]).find((c) => c.type === "Ready")!;
      this.opts.logger.info("node status updated", { ready: ready.status, reason: ready.reason, message: ready.message });
      const wasReady = this.lastSent?.conditions.find((c) => c.type === "Ready")?.status;
      if (wasReady !== ready.status) {
        const state = ready.status === "True" ? "NodeReady" : "NodeNotReady";
        this.opts.recorder?.event(nodeRef(this.opts.id.nodeName), "Normal", state, `Node ${this.opts.id.nodeName} status is now: ${state}`);
      }
    }
    this.lastSent = { key, at: now, conditions: status.conditions as NodeCondition[] };
    return true;
  }

  async renewLease(): Promise<void> {
    const { api, id, clock, config } = this.opts;
    const name = id.nodeName;
    const spec = { holderIdentity: name, leaseDurationSeconds: config.nodeLeaseDurationSeconds, renewTime: microTime(clock.now()) };
    this.lease ??= await api.getLease(LEASE_NAMESPACE, name);
    if (!this.lease) {
      const uid = (this.registered?.metadata as { uid?: string } | undefined)?.uid;
      this.lease = await api.createLease(LEASE_NAMESPACE, {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name, namespace: LEASE_NAMESPACE, ...(uid ? { ownerReferences: [{ apiVersion: "v1", kind: "Node", name, uid }] } : {}) },
        spec,
      });
      return;
    }
    try {
      this.lease = await api.updateLease(LEASE_NAMESPACE, { ...this.lease, spec: { ...(this.lease.spec as object), ...spec } });
    } catch (err) {
      this.lease = undefined; // stale or gone: read it again next time
      throw err;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    for (const cancel of this.timers.values()) cancel();
    await Promise.allSettled([...this.inFlight]);
  }
}
