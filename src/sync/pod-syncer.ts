/**
 * The host work of one pod step (upstream's podSyncer: SyncPod,
 * SyncTerminatingPod, SyncTerminatedPod). The pod workers decide when a pod
 * is synced, killed or cleaned up and in which order; the syncer does it:
 * allocation, the active deadline, volumes, probes, statuses, the final
 * reason of a stopped pod, the pod's start latency, and the teardown of its
 * host side (PodHost, pod-host.ts). Each step makes one runtime call, which
 * reads the pod itself and returns what it holds after.
 */
import type { PodAllocation } from "../allocation/index.ts";
import { podEventRef, type EventRecorder } from "../events/recorder.ts";
import type { KubeletMetricsSink } from "../metrics/kubelet.ts";
import type { PodRef } from "../pods/identity.ts";
import type { LifecycleEvent } from "../pods/lifecycle.ts";
import type { Pod } from "../pods/schema.ts";
import { defaultGracePeriodSeconds } from "../pods/spec.ts";
import type { PodAdmitter } from "../node/admission.ts";
import type { RuntimePodPresence } from "../pleg/view.ts";
import { emptyObservedPod, type KnownPodStatus } from "../runtime/types.ts";
import type { PodRuntime, PodStepOutcome } from "../runtime/index.ts";
import { isTerminalPhase, podStatus, rejectedStatus, type PodStatusView, type PreviousStatuses, type ProbeView, type StatusSink } from "../status/index.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { PodHost, VolumesNotReady } from "./pod-host.ts";
import { DEADLINE_MESSAGE, PodTerminator, type StepRead, type TerminatingPodRequest } from "./pod-termination.ts";

export { DEADLINE_MESSAGE, NODE_SHUTDOWN_MESSAGE, NODE_SHUTDOWN_REASON, type StepRead, type TerminatingPodRequest } from "./pod-termination.ts";

export interface SyncPodRequest {
  ref: PodRef;
  /** The desired pod, as its source has it. */
  pod: Pod;
  /** When the pod workers first saw the pod (its start latency counts from it). */
  seenAt: number;
  /** The other active pods, asked for only when a resize is to be decided. */
  others: () => Pod[];
  /** Aborts once the pod must stop (a delete arrived during this step): nothing more is started, a running postStart hook is abandoned. */
  signal: AbortSignal;
  /** The pod's runtime state as the PLEG's cache holds it, still current: the step plans from it rather than reading the runtime. */
  known?: KnownPodStatus;
}

export type SyncPodResult =
  /** The pod must stop for good: it completed, or its active deadline passed. */
  (
    | { kind: "terminate"; event: Extract<LifecycleEvent, { type: "completed" | "deadlineExceeded" }> }
    /**
     * The pod runs: sync it again after `retryAfterMs` (a backoff) or the resync period; a failed action means the error delay; never later than `deadlineMs`;
     * within a second when the runtime says so (`dueSoon`, see PodStepOutcome).
     */
    | { kind: "running"; retryAfterMs?: number; failed: boolean; deadlineMs?: number; dueSoon?: boolean }
  ) &
    /** The step's last read of the pod (when it began, clock ms, and what it saw); none when it read nothing (past its deadline). */
    StepRead;

/** What the pod workers call (sync/podworkers.ts); unit-tested with the real syncer over the fake runtime. */
export interface PodSyncer {
  /** One step toward the pod's spec; throws when the runtime cannot be read (the workers retry). */
  syncPod(req: SyncPodRequest): Promise<SyncPodResult>;
  /** Stops everything of the pod within its grace period and writes its final status; throws when a kill failed. */
  syncTerminatingPod(req: TerminatingPodRequest): Promise<StepRead & { readAt: number }>;
  /** Removes what is left of a stopped, deleted pod (containers, sandboxes, its status, its allocation); throws when a removal failed. */
  syncTerminatedPod(ref: PodRef, pod: Pod | undefined): Promise<{ readAt: number }>;
  /** Node admission of a new pod against the active ones; a refused pod is Failed with the reason and an event, and never started. */
  admitPod(pod: Pod, active: Pod[]): boolean;
  /** Only the pod's status changed at its source (a reconcile): the status manager compares it with what it sent. */
  reconcile(pod: Pod): void;
  /** The pod with its allocated resources: what admission, QoS cgroups and eviction weigh. */
  allocatedPod(pod: Pod): Pod;
  /** A resize of the pod waits for room (Deferred): it is decided again when another pod's resources are freed. */
  resizePending(uid: string): boolean;
}

export interface PodSyncerOptions {
  runtime: PodRuntime;
  /** Node admission (upstream canAdmitPod over its admit handlers); every pod is admitted without it. */
  admission?: PodAdmitter;
  /** Volumes before each step, the pod's cgroup, files and log directory torn down after its removal; none without it. */
  host?: PodHost;
  status: StatusSink;
  /**
   * Whether the runtime held a pod at the PLEG's last relist. A pod it did not
   * hold gets its status (Pending, containers waiting in ContainerCreating)
   * before its first step runs, as upstream's SyncPod sets the status from
   * its cache before the runtime's SyncPod: `/pods` and the API server show
   * it while its volumes, sandbox and image pulls are under way.
   */
  runtimePods?: RuntimePodPresence;
  clock: Clock;
  logger: Logger;
  recorder?: EventRecorder;
  /** kubelet_pod_start_duration_seconds. */
  metrics?: Pick<KubeletMetricsSink, "podStarted">;
  /** In-place resize: runs each pod with its allocated resources and reports resizes in its status. */
  allocation?: PodAllocation;
  /** The node's IP: a host-network pod's IP, which its probes without a host target (upstream status.PodIP). */
  hostIP?: string;
  /** The prober: told about running containers after each sync, asked for readiness; on termination its liveness and startup stop first, readiness once the containers are stopped. */
  probes?: ProbeView & {
    awaitReports(pod: Pod, running: { containerName: string; containerId: string; startedAt: number }[], signal: AbortSignal): Promise<void>;
    addPod(pod: Pod, running: { containerName: string; containerId: string; startedAt: number }[], podIP: string): void;
    removePod(uid: string): void;
    stopLivenessAndStartup(uid: string): void;
    watchReadiness(uid: string, fn: () => void): () => void;
  };
}

/** The API server's copy of the pod's container statuses: the old status of a pod this process has not synced yet (upstream reads pod.Status then). */
const apiStatusOf = (pod: Pod): PreviousStatuses => (pod.status ?? {}) as PreviousStatuses;

/** What the syncer remembers of a pod between its steps; dropped once the pod is cleaned up. */
interface PodRecord {
  /** A sync ran for the pod in this process; only then does its kill write a final status. */
  synced: boolean;
  /** When the pod became active here (activeDeadlineSeconds counts from it; the API's startTime wins). */
  activeSince: number | undefined;
  /** Its start was measured, or it was first seen already running or done (adopted: not this agent's to measure). */
  startSeen: boolean;
  /**
   * Upstream's reason cache (reason_cache.go): why each container's last start failed, kept across
   * syncs that start nothing (the sandbox cannot be created, volumes not ready) until it starts.
   */
  startFailures: Map<string, { reason: string; message?: string }>;
  /** The status last computed, which upstream's convertToAPIContainerStatuses reads as the old one. */
  lastStatus: PodStatusView | undefined;
}

export class HostPodSyncer implements PodSyncer {
  private readonly records = new Map<string, PodRecord>();
  private readonly terminator: PodTerminator;

  constructor(private readonly opts: PodSyncerOptions) {
    this.terminator = new PodTerminator(opts);
  }

  async syncPod({ ref, pod: desired, seenAt, others, signal, known }: SyncPodRequest): Promise<SyncPodResult> {
    const { runtime, clock } = this.opts;
    const log = this.logFor(ref);
    const record = this.record(ref.uid);
    const pod = this.opts.allocation?.allocate(desired, others) ?? desired;
    const deadlineMs = this.activeDeadlineRemaining(record, pod);
    if (deadlineMs !== undefined && deadlineMs <= 0) {
      log.info("pod exceeded its activeDeadlineSeconds; stopping it");
      this.opts.recorder?.event(podEventRef(pod), "Normal", "DeadlineExceeded", DEADLINE_MESSAGE);
      return { kind: "terminate", event: { type: "deadlineExceeded", gracePeriodSeconds: defaultGracePeriodSeconds(pod) } };
    }
    if (!record.synced && this.opts.runtimePods?.heldAtLastRelist(ref.uid) === false) {
      const nothing = emptyObservedPod(ref.uid, ref.name, ref.namespace);
      this.opts.status.set(desired, podStatus(pod, nothing, new Map(), false, this.opts.probes, apiStatusOf(desired)));
    }
    record.synced = true;
    const volumesNotReady = await this.opts.host?.setupVolumes(pod);
    const outcome: PodStepOutcome = volumesNotReady ? await this.volumesNotReady(ref, volumesNotReady) : await runtime.syncPod(pod, signal, known);
    for (const r of outcome.results) {
      if (r.error) log.warn("sync action failed", { action: r.action, target: r.target, reason: r.error.reason, message: r.error.message });
      else log.v(2).info("sync action done", { action: r.action, target: r.target });
    }
    const after = outcome.observed;
    const running = after.containers.filter((c) => c.state === "running" && c.sandboxId === after.sandboxes[0]?.id);
    // Upstream probes status.PodIP, which is the node's for a host-network pod (its sandbox has none).
    const podIP = pod.spec.hostNetwork ? (this.opts.hostIP ?? "") : (after.sandboxes[0]?.ip ?? "");
    const probed = running.map((c) => ({ containerName: c.name, containerId: c.id, startedAt: c.startedAt ?? c.createdAt }));
    // A static pod's readiness before this agent started is its mirror's to tell: not Ready meanwhile would drop it.
    await this.opts.probes?.awaitReports(pod, probed, signal);
    this.opts.probes?.addPod(pod, probed, podIP);
    this.rememberStartFailures(record, outcome);
    const computed = podStatus(pod, after, record.startFailures, false, this.opts.probes, record.lastStatus ?? apiStatusOf(desired));
    record.lastStatus = computed;
    const status = this.opts.allocation?.resizeStatus(computed, pod, after, outcome.results) ?? computed;
    this.opts.status.set(desired, status);
    // Adopted pods already ran before this agent saw them: their start is not this agent's to measure.
    if (!record.startSeen && (status.phase === "Running" || isTerminalPhase(status.phase))) {
      if (outcome.changed && status.phase === "Running") this.opts.metrics?.podStarted(seenAt, clock.now());
      record.startSeen = true;
    }
    if (isTerminalPhase(status.phase)) {
      log.info("pod completed; stopping it", { phase: status.phase });
      return { kind: "terminate", event: { type: "completed", gracePeriodSeconds: defaultGracePeriodSeconds(pod) }, readAt: outcome.readAt, observed: after };
    }
    const failed = outcome.results.some((r) => r.error);
    return {
      kind: "running",
      failed,
      readAt: outcome.readAt,
      observed: after,
      ...(outcome.dueSoon ? { dueSoon: true } : {}),
      ...(outcome.retryAfterMs === undefined ? {} : { retryAfterMs: outcome.retryAfterMs }),
      ...(deadlineMs === undefined ? {} : { deadlineMs }),
    };
  }

  syncTerminatingPod(req: TerminatingPodRequest): Promise<StepRead & { readAt: number }> {
    const record = this.records.get(req.ref.uid);
    return this.terminator.kill(req, record ?? { synced: false });
  }

  async syncTerminatedPod(ref: PodRef, pod: Pod | undefined): Promise<{ readAt: number }> {
    const removed = await this.terminator.remove(ref, pod);
    this.records.delete(ref.uid);
    return removed;
  }

  admitPod(pod: Pod, active: Pod[]): boolean {
    const result = this.opts.admission?.admit(pod, active) ?? { admit: true };
    if (result.admit) return true;
    const { reason, message } = result;
    this.opts.logger.warn("pod rejected by node admission", { pod: `${pod.metadata.namespace}/${pod.metadata.name}`, reason, message });
    this.opts.recorder?.event(podEventRef(pod), "Warning", reason, message);
    this.opts.status.set(pod, rejectedStatus(reason, message));
    return false;
  }

  reconcile(pod: Pod): void {
    this.opts.status.reconcile?.(pod);
  }

  allocatedPod(pod: Pod): Pod {
    return this.opts.allocation?.allocatedPod(pod) ?? pod;
  }

  resizePending(uid: string): boolean {
    return Boolean(this.opts.allocation?.pendingResize(uid));
  }

  /** Nothing of the pod starts while its volumes are not ready: the step reads the pod for its status and is retried. */
  private async volumesNotReady(ref: PodRef, { result, retryAfterMs }: VolumesNotReady): Promise<PodStepOutcome> {
    const readAt = this.opts.clock.now();
    return { results: [result], waiting: new Map(), changed: false, retryAfterMs, observed: await this.opts.runtime.observe(ref), readAt };
  }

  private record(uid: string): PodRecord {
    let record = this.records.get(uid);
    if (!record) this.records.set(uid, (record = { synced: false, activeSince: undefined, startSeen: false, startFailures: new Map(), lastStatus: undefined }));
    return record;
  }

  /** Upstream ReasonCache.Update: a failed start (a pull, a create, a back-off...) is remembered, a successful one forgets it. */
  private rememberStartFailures(record: PodRecord, outcome: PodStepOutcome): void {
    for (const r of outcome.results) if (r.action === "StartContainer" && !r.error) record.startFailures.delete(r.target);
    for (const [name, why] of outcome.waiting) record.startFailures.set(name, why);
  }

  private logFor(ref: PodRef): Logger {
    return this.opts.logger.with({ pod: `${ref.name}_${ref.namespace}`, uid: ref.uid });
  }

  /** Milliseconds left before activeDeadlineSeconds, counted from the pod's start; undefined without a deadline. */
  private activeDeadlineRemaining(record: PodRecord, pod: Pod): number | undefined {
    const deadline = pod.spec.activeDeadlineSeconds;
    if (!deadline) return undefined;
    const apiStart = Date.parse(((pod.status ?? {}) as { startTime?: string }).startTime ?? "");
    record.activeSince ??= Number.isNaN(apiStart) ? this.opts.clock.now() : apiStart;
    return record.activeSince + deadline * 1000 - this.opts.clock.now();
  }
}
