/**
 * The status manager for pods from the API server (upstream
 * status_manager.go): turns computed statuses into v1 PodStatus, patches
 * only when something changed, one request in flight per pod with the
 * latest status winning, retries with backoff, never moves a pod back out
 * of a terminal phase, and deletes the pod object (grace 0, UID
 * precondition) once a deleted pod's worker has finished.
 */
import type { KubeApi } from "../api/index.ts";
import { podQosClass } from "../cgroups/qos.ts";
import type { Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { StatusSink } from "./index.ts";
import { isTerminalPhase, type PodStatusView } from "./phase.ts";
import { isApiPod } from "../pods/source.ts";
import { podUid } from "../pods/identity.ts";
import { isSidecar } from "../pods/spec.ts";
import type { MirrorOf, MirrorsListed } from "../mirror/index.ts";
import type { MirrorPodsObserver } from "../sources/apiserver.ts";

export interface PodCondition {
  type: string;
  observedGeneration?: number;
  status: "True" | "False";
  reason?: string;
  message?: string;
  lastProbeTime: null;
  lastTransitionTime: string;
}

export type ApiPodStatus = Record<string, unknown> & { phase: string; conditions: PodCondition[] };

const rfc3339 = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/** Upstream kubetypes.PodConditionsByKubelet: the condition types this agent writes; others belong to other writers. */
const KUBELET_CONDITIONS = new Set(["PodScheduled", "Ready", "Initialized", "ContainersReady", "PodReadyToStartContainers", "PodResizePending", "PodResizeInProgress"]);
export const isKubeletCondition = (type: string): boolean => KUBELET_CONDITIONS.has(type);

/** The conditions of a status that other writers own (readiness gates' conditions, DisruptionTarget...). */
export const foreignConditions = (status: { conditions?: unknown } | undefined): PodCondition[] =>
  Array.isArray(status?.conditions) ? (status.conditions as PodCondition[]).filter((c) => c && typeof c.type === "string" && !isKubeletCondition(c.type)) : [];

/**
 * Upstream GeneratePodReadyCondition's readiness gates: why the pod is not
 * Ready although its containers are (empty when every gate's condition is True).
 */
export function unreadyGates(pod: Pod, conditions: readonly PodCondition[]): string[] {
  const out: string[] = [];
  for (const gate of pod.spec.readinessGates ?? []) {
    const c = conditions.find((x) => x.type === gate.conditionType);
    if (!c) out.push(`corresponding condition of pod readiness gate "${gate.conditionType}" does not exist.`);
    else if (c.status !== "True") out.push(`the status of pod readiness gate "${gate.conditionType}" is not "True", but ${c.status}`);
  }
  return out;
}

/** What the API server's copy of a pod (a static pod's: its mirror) last said of a container instance, for the prober. */
export class LastReported {
  constructor(private readonly mirrors: (MirrorOf & MirrorsListed) | undefined) {}

  reportedContainer(pod: Pod, containerName: string, containerId: string): { ready: boolean; started: boolean } | undefined {
    return reportedContainer(isApiPod(pod) ? pod.status : this.mirrors?.mirrorOf(pod)?.status, containerName, containerId);
  }

  /** A static pod's report is its mirror's: until the API server's mirror pods were listed, it is not known yet. */
  pending(pod: Pod): Promise<void> | undefined {
    return isApiPod(pod) ? undefined : this.mirrors?.whenListed();
  }
}

/**
 * What a pod's API status (a static pod's: its mirror's) says of one
 * container instance: ready and started as the kubelet that wrote it last
 * judged them, or undefined when it names another container ID (or none).
 * The API's containerID is `<runtime>://<id>`.
 */
export function reportedContainer(status: unknown, containerName: string, containerId: string): { ready: boolean; started: boolean } | undefined {
  // Sidecars (restartable init containers) are probed too: their statuses are the init containers'.
  const of = (key: "containerStatuses" | "initContainerStatuses") => (status as Record<string, unknown> | undefined)?.[key];
  const list = [of("containerStatuses"), of("initContainerStatuses")].flatMap((l) => (Array.isArray(l) ? (l as unknown[]) : []));
  const c = list.find((x): x is { name: string; containerID?: unknown; ready?: unknown; started?: unknown } => !!x && (x as { name?: unknown }).name === containerName);
  if (!c || typeof c.containerID !== "string" || !c.containerID.endsWith(`://${containerId}`)) return undefined;
  return { ready: c.ready === true, started: c.started === true };
}

/**
 * v1 PodStatus from the computed view; pure, so conditions and phase rules
 * are unit-tested. `apiConditions`: the conditions of the API server's copy
 * (the newest the agent saw); those of other writers are kept, first, as
 * upstream's mergePodStatus does, and readiness gates are judged on them
 * (the patch leaves them out: ApiStatusManager's strategic merge keeps the
 * API server's own copy of them).
 */
export function apiPodStatus(
  pod: Pod,
  view: PodStatusView,
  ctx: { hostIPs: readonly string[]; previous: ApiPodStatus | undefined; now: number; apiConditions?: readonly PodCondition[]; apiPhase?: string },
): ApiPodStatus {
  const previous = ctx.previous;
  // Upstream generateAPIPodStatus: a computed non-terminal phase never undoes a terminal one, whether
  // the agent sent it or another writer set it on the API server's copy since.
  const terminalBefore = [previous?.phase, ctx.apiPhase].find((p) => p !== undefined && isTerminalPhase(p as PodStatusView["phase"]));
  const phase = !isTerminalPhase(view.phase) && terminalBefore ? terminalBefore : view.phase;
  const terminal = phase === "Succeeded" || phase === "Failed";
  // Upstream GenerateContainersReadyCondition: sidecars (restartable init containers) first, then the app containers.
  const sidecars = new Set((pod.spec.initContainers ?? []).filter(isSidecar).map((c) => c.name));
  const unready = [...(view.initContainerStatuses ?? []).filter((c) => sidecars.has(c.name)), ...view.containerStatuses].filter((c) => !c.ready).map((c) => c.name);
  // Upstream PodObservedGenerationTracking (beta, on in 1.34): which spec generation (a resize bumps it) this status reflects.
  const generation = (pod.metadata as { generation?: number }).generation;
  const observed = typeof generation === "number" ? { observedGeneration: generation } : {};
  const condition = (type: string, ok: boolean, reason?: string, message?: string): PodCondition => {
    const status = ok ? "True" : "False";
    const before = previous?.conditions?.find((c) => c.type === type);
    return {
      type,
      ...observed,
      status,
      ...(reason ? { reason } : {}),
      ...(message ? { message } : {}),
      lastProbeTime: null,
      lastTransitionTime: before && before.status === status ? before.lastTransitionTime : rfc3339(ctx.now),
    };
  };
  // Upstream generate.go: a terminal pod's containers are not ready, reason PodFailed or PodCompleted.
  const notReady = terminal ? [phase === "Failed" ? "PodFailed" : "PodCompleted", undefined] : ["ContainersNotReady", `containers with unready status: [${unready.join(" ")}]`];
  const containersReady = !terminal && unready.length === 0;
  const foreign = (ctx.apiConditions ?? []).filter((c) => !isKubeletCondition(c.type));
  const gates = containersReady ? unreadyGates(pod, foreign) : [];
  const ready = containersReady && gates.length === 0;
  const readyWhy = containersReady ? ["ReadinessGatesNotReady", gates.join(", ")] : notReady;
  const initialized = !view.initPending?.length;
  const conditions = [
    ...foreign,
    condition("PodReadyToStartContainers", view.sandboxReady && !terminal),
    condition(
      "Initialized",
      initialized,
      ...(!initialized
        ? (["ContainersNotInitialized", `containers with incomplete status: [${view.initPending!.join(" ")}]`] as const)
        : phase === "Succeeded"
          ? (["PodCompleted"] as const)
          : []),
    ),
    condition("Ready", ready, ...(ready ? [] : (readyWhy as [string, string | undefined]))),
    condition("ContainersReady", containersReady, ...(containersReady ? [] : (notReady as [string, string | undefined]))),
    condition("PodScheduled", true),
    // Upstream (1.33+): present only while a resize waits or is being applied.
    ...(view.resize?.pending ? [condition("PodResizePending", true, view.resize.pending.reason, view.resize.pending.message)] : []),
    ...(view.resize?.inProgress ? [condition("PodResizeInProgress", true, ...(view.resize.inProgress.error ? (["Error", view.resize.inProgress.error] as const) : []))] : []),
  ];
  return {
    ...observed,
    phase,
    conditions,
    ...(view.reason ? { reason: view.reason, message: view.message ?? "" } : terminal && previous?.reason ? { reason: previous.reason, message: previous.message } : {}),
    hostIP: ctx.hostIPs[0] ?? "",
    hostIPs: ctx.hostIPs.map((ip) => ({ ip })),
    // A host-network pod's IPs are the node's (upstream generateAPIPodStatus); the runtime reports none for it.
    ...(pod.spec.hostNetwork && ctx.hostIPs.length
      ? { podIP: ctx.hostIPs[0], podIPs: ctx.hostIPs.map((ip) => ({ ip })) }
      : view.podIP
        ? { podIP: view.podIP, podIPs: view.podIPs }
        : previous?.podIP
          ? { podIP: previous.podIP, podIPs: previous.podIPs }
          : {}),
    startTime: (previous?.startTime as string | undefined) ?? view.startTime ?? rfc3339(ctx.now),
    ...(view.initContainerStatuses ? { initContainerStatuses: view.initContainerStatuses } : {}),
    containerStatuses: view.containerStatuses,
    ...(view.ephemeralContainerStatuses ? { ephemeralContainerStatuses: view.ephemeralContainerStatuses } : {}),
    qosClass: podQosClass(pod),
  };
}

export interface ApiStatusManagerOptions {
  api: Pick<KubeApi, "patchPodStatus" | "deletePod">;
  /** The node's addresses, as the pods' hostIPs (and podIPs with hostNetwork). */
  hostIPs: readonly string[];
  clock: Clock;
  logger: Logger;
  /** Also keeps statuses for local readers (/pods). */
  local?: StatusSink;
  /** A static pod's status goes to its mirror pod. */
  mirrors?: MirrorOf;
}

interface Entry {
  pod: Pod;
  /** The API object the status is written to: the pod itself, or a static pod's mirror. */
  target: { namespace: string; name: string; uid: string };
  sent: ApiPodStatus | undefined;
  pending: ApiPodStatus | undefined;
  /** The last computed view, to send again when another writer changed the API's copy. */
  view: PodStatusView | undefined;
  flushing: boolean;
  deleteWhenDone: boolean;
  retryMs: number;
}

export class ApiStatusManager implements StatusSink, MirrorPodsObserver, AsyncDisposable {
  private readonly entries = new Map<string, Entry>();
  /** Aborted to cut the retry waits short (a flush at shutdown). */
  private retryWake = new AbortController();
  private stopped = false;
  /** Latest view of each static pod, re-sent when its mirror appears or is replaced. */
  private readonly staticViews = new Map<string, { pod: Pod; view: PodStatusView }>();

  constructor(private readonly opts: ApiStatusManagerOptions) {}

  set(pod: Pod, view: PodStatusView): void {
    this.opts.local?.set(pod, view);
    if (!isApiPod(pod)) this.staticViews.set(podUid(pod), { pod, view });
    const object = isApiPod(pod) ? pod : this.opts.mirrors?.mirrorOf(pod);
    if (!object) return; // a static pod whose mirror does not exist yet
    const uid = podUid(pod);
    const target = { namespace: object.metadata.namespace ?? "default", name: object.metadata.name ?? "", uid: podUid(object) };
    let entry = this.entries.get(uid);
    if (!entry || entry.target.uid !== target.uid) {
      entry = { pod, target, sent: object.status as ApiPodStatus | undefined, pending: undefined, view: undefined, flushing: false, deleteWhenDone: false, retryMs: 500 };
      this.entries.set(uid, entry);
    }
    entry.pod = pod;
    entry.view = view;
    const base = entry.pending ?? entry.sent;
    const apiConditions = foreignConditions(object.status as ApiPodStatus | undefined);
    const apiPhase = (object.status as ApiPodStatus | undefined)?.phase;
    const next = apiPodStatus(pod, view, { hostIPs: this.opts.hostIPs, previous: base, now: this.opts.clock.now(), apiConditions, apiPhase });
    if (entry.sent && sameStatus(entry.sent, next)) {
      entry.pending = undefined;
      return;
    }
    entry.pending = next;
    this.flush(uid, entry);
  }

  /**
   * The API server's copy of a pod's status changed (a reconcile). When
   * another writer changed what this agent owns, its status is sent again:
   * the node lifecycle controller marks the pods of a node it lost touch
   * with not Ready, and they would stay so after the node is back (their
   * Services without endpoints) until something else changed. The agent's
   * own patches coming back differ in nothing it owns: no request.
   */
  reconcile(pod: Pod): void {
    if (!isApiPod(pod)) return;
    const entry = this.entries.get(podUid(pod));
    const api = pod.status as ApiPodStatus | undefined;
    if (!entry?.sent || !entry.view || !api || entry.deleteWhenDone) return;
    // Another writer's condition changed (a readiness gate's): Ready follows it, and the next patch
    // keeps it (also when a patch is on its way: the drain sends the newest).
    if (!sameForeign(entry.pending ?? entry.sent, api)) {
      this.set(pod, entry.view);
      return;
    }
    if (entry.pending || entry.flushing) return;
    if (!ownedFieldsDiffer(entry.sent, api)) return;
    this.opts.logger.info("pod status changed by another writer; sending the agent's again", { pod: `${entry.target.namespace}/${entry.target.name}` });
    entry.sent = api;
    this.set(pod, entry.view);
  }

  /** Mirror pods changed (after MirrorPods heard of them): send static pods' statuses to mirrors that are new or replaced. */
  mirrorPodsChanged(): void {
    for (const { pod, view } of this.staticViews.values()) this.set(pod, view);
  }

  delete(uid: string, pod?: Pod): void {
    this.opts.local?.delete(uid);
    this.staticViews.delete(uid);
    let entry = this.entries.get(uid);
    if (!entry && pod && isApiPod(pod)) {
      const target = { namespace: pod.metadata.namespace ?? "default", name: pod.metadata.name ?? "", uid };
      entry = { pod, target, sent: undefined, pending: undefined, view: undefined, flushing: false, deleteWhenDone: false, retryMs: 500 };
      this.entries.set(uid, entry);
    }
    if (!entry) return;
    if (pod) entry.pod = pod;
    if (isApiPod(entry.pod) && entry.pod.metadata.deletionTimestamp) {
      entry.deleteWhenDone = true;
      this.flush(uid, entry);
    } else {
      this.entries.delete(uid);
    }
  }

  /** Statuses not yet accepted by the API server; for tests and shutdown. */
  pendingCount(): number {
    return [...this.entries.values()].filter((e) => e.pending || e.deleteWhenDone || e.flushing).length;
  }

  /**
   * Retries every pending status at once and waits until the API server has
   * them all or `timeoutMs` passed; true when nothing is left. Called at
   * shutdown, so that the last statuses are not lost when the API is up.
   */
  async flushPending(timeoutMs: number): Promise<boolean> {
    const { clock } = this.opts;
    const deadline = clock.now() + timeoutMs;
    this.retryWake.abort();
    this.retryWake = new AbortController();
    while (this.pendingCount() > 0 && clock.now() < deadline) await clock.sleep(Math.min(50, deadline - clock.now()));
    return this.pendingCount() === 0;
  }

  /** Shutdown: one last attempt with a short deadline (2s), then no more retries. */
  async [Symbol.asyncDispose](): Promise<void> {
    const left = (await this.flushPending(2000)) ? 0 : this.pendingCount();
    if (left > 0) this.opts.logger.warn("stopping with pod statuses the API server has not accepted; they are sent again after the restart", { pods: left });
    this.stopped = true;
    this.retryWake.abort();
  }

  private flush(uid: string, entry: Entry): void {
    if (entry.flushing || this.stopped) return;
    entry.flushing = true;
    void this.drain(uid, entry).finally(() => (entry.flushing = false));
  }

  private async drain(uid: string, entry: Entry): Promise<void> {
    const { api, logger, clock } = this.opts;
    const { namespace: ns, name, uid: targetUid } = entry.target;
    while ((entry.pending || entry.deleteWhenDone) && !this.stopped) {
      try {
        if (entry.pending) {
          const status = entry.pending;
          // Only the agent's own conditions: the strategic merge keeps other writers' (readiness gates',
          // DisruptionTarget) as the API server has them, even when they changed after this status was computed.
          const own = status.conditions.filter((c) => isKubeletCondition(c.type));
          // A merge by type never removes: an own condition the API has and this status has not (PodResizePending
          // once the resize is done) goes with a delete directive, as upstream's two-way patch does.
          const sentTypes = (entry.sent?.conditions ?? []).map((c) => c.type).filter((t) => isKubeletCondition(t) && !own.some((c) => c.type === t));
          const removed = [...new Set(sentTypes)].map((type) => ({ type, $patch: "delete" }) as unknown as PodCondition);
          await api.patchPodStatus(ns, name, { metadata: { uid: targetUid }, status: replacingAddressLists({ ...status, conditions: [...own, ...removed] }) });
          entry.sent = status;
          if (entry.pending === status) entry.pending = undefined;
          logger.v(3).info("pod status patched", { pod: `${ns}/${name}`, phase: status.phase });
        } else {
          await api.deletePod(ns, name, { uid: targetUid, gracePeriodSeconds: 0 });
          logger.info("pod deleted from the API server", { pod: `${ns}/${name}`, uid });
          entry.deleteWhenDone = false;
          this.entries.delete(uid);
        }
        entry.retryMs = 500;
      } catch (err) {
        const reason = (err as { reason?: string }).reason;
        if (reason === "NotFound") {
          // The pod is gone from the API server: nothing left to report.
          this.entries.delete(uid);
          return;
        }
        // Warned once per failure streak: an edge node offline for days must not log every pod every 10s.
        const log = entry.retryMs === 500 ? logger.warn : logger.v(4).info;
        log("pod status update failed; will retry", { pod: `${ns}/${name}`, err: errorMessage(err), retryInMs: entry.retryMs });
        await clock.sleep(entry.retryMs, this.retryWake.signal).catch(() => {});
        entry.retryMs = Math.min(entry.retryMs * 2, 10_000);
      }
    }
  }
}

/** The phase and the status of each condition the agent sets: what others may overwrite. */
function ownedFieldsDiffer(sent: ApiPodStatus, api: Partial<ApiPodStatus>): boolean {
  if (sent.phase !== api.phase) return true;
  // `sent` may be the API's own copy, read when the entry was made: conditions can be missing there.
  return (sent.conditions ?? []).some((c) => api.conditions?.find((a) => a.type === c.type)?.status !== c.status);
}

/** Other writers' conditions (type and status) are the same in both. */
function sameForeign(sent: ApiPodStatus, api: Partial<ApiPodStatus>): boolean {
  const key = (s: { conditions?: unknown }) =>
    JSON.stringify(
      foreignConditions(s)
        .map((c) => [c.type, c.status, c.reason ?? "", c.message ?? ""])
        .sort(),
    );
  return key(sent) === key(api);
}

function sameStatus(a: ApiPodStatus, b: ApiPodStatus): boolean {
  const strip = (s: ApiPodStatus) => JSON.stringify({ ...s, conditions: s.conditions?.map(({ lastProbeTime: _, ...c }) => c) });
  return strip(a) === strip(b);
}

/**
 * The strategic merge patch merges `podIPs` and `hostIPs` by ip (PodStatus' patchMergeKey), so a pod
 * whose sandbox came back with another address would list both, which the API server refuses (422,
 * "status.podIPs: Invalid value"). They are the agent's alone: each replaces the API's list.
 */
function replacingAddressLists(status: ApiPodStatus): ApiPodStatus {
  const patch: ApiPodStatus = { ...status };
  for (const field of ["podIPs", "hostIPs"]) {
    const list = status[field];
    if (Array.isArray(list)) patch[field] = [...list, { $patch: "replace" }];
  }
  return patch;
}
