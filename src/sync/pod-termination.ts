/**
 * The terminating half of the pod syncer (upstream SyncTerminatingPod and
 * SyncTerminatedPod): a pod's containers stopped within its grace period and
 * its final status written, then what is left of it removed: containers and
 * sandboxes, its host side (PodHost), its status and its allocation.
 */
import type { PodAllocation } from "../allocation/index.ts";
import type { PodRef } from "../pods/identity.ts";
import type { PodLifecycle } from "../pods/lifecycle.ts";
import type { Pod } from "../pods/schema.ts";
import type { ObservedPod, PodRuntime, SyncResult } from "../runtime/index.ts";
import { podStatus, terminatedPodStatus, type PodStatusView, type PreviousStatuses, type ProbeView, type StatusSink, type WaitingReasons } from "../status/index.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { PodHost } from "./pod-host.ts";

/** Upstream's status message for a pod past its activeDeadlineSeconds. */
export const DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline";
/** Upstream nodeshutdown: the reason and message of a pod stopped because the node shuts down. */
export const NODE_SHUTDOWN_REASON = "Terminated";
export const NODE_SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown.";

export interface TerminatingPodRequest {
  ref: PodRef;
  /** The pod's latest spec; none for an orphan no source wants. */
  pod: Pod | undefined;
  state: Extract<PodLifecycle, { stage: "terminating" }>;
}

/** A step's last read of the pod's runtime state: when it began (runtime events older than that are in it) and what it saw, when it read the pod. */
export interface StepRead {
  readAt?: number;
  observed?: ObservedPod;
}

export interface PodTerminatorOptions {
  runtime: PodRuntime;
  host?: PodHost;
  status: StatusSink;
  logger: Logger;
  allocation?: Pick<PodAllocation, "removePod">;
  /**
   * The prober: a terminating pod's liveness and startup probes stop first, its readiness
   * is still probed and reported until its containers are stopped (upstream SyncTerminatingPod).
   */
  probes?: ProbeView & {
    removePod(uid: string): void;
    stopLivenessAndStartup(uid: string): void;
    watchReadiness(uid: string, fn: () => void): () => void;
  };
}

/** What the syncer knows of a pod's syncs in this process, which its final status reads as upstream's generateAPIPodStatus does. */
export interface SyncHistory {
  /** A sync ran for the pod in this process. */
  synced: boolean;
  /** The reason cache: why each container's last start failed. */
  startFailures?: WaitingReasons;
  /** The status last computed: the old status upstream's convertToAPIContainerStatuses reads. */
  lastStatus?: PodStatusView | undefined;
}

/** Kill and remove must complete before the lifecycle moves on; a failed action retries the step. */
function throwOnFailedActions(what: string, results: SyncResult[]): void {
  const failed = results.filter((r) => r.error);
  if (failed.length) throw new Error(`${what}: ${failed.map((r) => `${r.action} ${r.target}: ${r.error!.message}`).join("; ")}`);
}

/** The reason and message a stopped pod is Failed with, when its stop was not asked for by its owner. */
function failedFor(state: TerminatingPodRequest["state"]): { reason: string; message: string } | undefined {
  switch (state.reason) {
    case "evicted":
      return { reason: "Evicted", message: state.message ?? "" };
    case "deadlineExceeded":
      return { reason: "DeadlineExceeded", message: DEADLINE_MESSAGE };
    case "nodeShutdown":
      return { reason: NODE_SHUTDOWN_REASON, message: NODE_SHUTDOWN_MESSAGE };
    case "deleted":
    case "completed":
      return undefined;
  }
}

export class PodTerminator {
  constructor(private readonly opts: PodTerminatorOptions) {}

  /**
   * Stops everything of the pod within its grace period; writes its final
   * status when a sync ran for it in this process (`synced`), or when its
   * reported phase is not terminal yet (a pod this process first sees
   * terminating, after a restart: upstream's SyncTerminatingPod writes it
   * too). A pod first seen already terminal keeps the status it has.
   * Throws when a kill failed.
   */
  async kill({ ref, pod, state }: TerminatingPodRequest, { synced, startFailures = new Map(), lastStatus }: SyncHistory): Promise<StepRead & { readAt: number }> {
    const { runtime } = this.opts;
    const log = this.opts.logger.with({ pod: `${ref.name}_${ref.namespace}`, uid: ref.uid });
    const reportedTerminal = pod?.status?.phase === "Succeeded" || pod?.status?.phase === "Failed";
    const writesStatus = pod !== undefined && (synced || !reportedTerminal);
    // Upstream (kubelet.go:2149-2163, status_manager.go SetContainerReadiness): liveness and startup stop,
    // readiness is still probed while the containers stop, and a change shows in the pod's status at
    // once (a terminating pod's endpoints turn not serving); all probes go once the containers are stopped.
    this.opts.probes?.stopLivenessAndStartup(ref.uid);
    let killDone = false;
    const stopWatching = writesStatus && this.opts.probes ? this.opts.probes.watchReadiness(ref.uid, () => void this.reportReadiness(ref, pod, () => killDone)) : () => {};
    let killed: Awaited<ReturnType<PodRuntime["killPod"]>>;
    try {
      log.info("killing pod", { reason: state.reason, gracePeriodSeconds: state.gracePeriodSeconds });
      killed = await runtime.killPod(ref, state.gracePeriodSeconds, pod);
    } finally {
      killDone = true;
      stopWatching();
    }
    throwOnFailedActions("killing pod", killed.results);
    this.opts.probes?.removePod(ref.uid);
    // The final status: every container stopped, the phase terminal. As upstream's SyncTerminatingPod
    // (generateAPIPodStatus with the reason cache and the old status, kubelet.go:2215) then TerminatePod
    // (kubelet.go:2334): a container that will not be seen to end shows ContainerStatusUnknown.
    if (pod && writesStatus) {
      const previous = lastStatus ?? ((pod.status ?? {}) as PreviousStatuses);
      const final = terminatedPodStatus(pod, podStatus(pod, killed.observed, startFailures, true, undefined, previous));
      const failed = failedFor(state);
      // Upstream keeps Succeeded for a pod that had already completed when the node shut down.
      const phase = state.reason === "nodeShutdown" && final.phase === "Succeeded" ? "Succeeded" : "Failed";
      this.opts.status.set(pod, failed ? { ...final, phase, ...failed } : final);
    }
    // An evicted pod's containers and logs go at once (upstream: its content is removable), or the
    // pressure that evicted it would stay. Its status stays until the pod is deleted.
    if (state.reason === "evicted") {
      const removed = await this.removeFromRuntime(ref);
      for (const r of removed.results.filter((r) => r.error)) log.warn("removing an evicted pod's containers failed; GC will retry", { target: r.target, err: r.error!.message });
      return { readAt: removed.readAt };
    }
    return { readAt: killed.readAt, observed: killed.observed };
  }

  /** A readiness change while the pod's containers stop: its status now, unless the kill ended meanwhile (its final status wins). */
  private async reportReadiness(ref: PodRef, pod: Pod, killDone: () => boolean): Promise<void> {
    try {
      const observed = await this.opts.runtime.observe(ref);
      if (!killDone()) this.opts.status.set(pod, podStatus(pod, observed, new Map(), false, this.opts.probes));
    } catch (err) {
      this.opts.logger.v(2).info("could not report a terminating pod's readiness", { pod: `${ref.name}_${ref.namespace}`, err: errorMessage(err) });
    }
  }

  /** Removes what is left of a stopped, deleted pod (containers, sandboxes, host side, its status, its allocation); throws when a removal failed. */
  async remove(ref: PodRef, pod: Pod | undefined): Promise<{ readAt: number }> {
    const removed = await this.removeFromRuntime(ref);
    throwOnFailedActions("removing pod", removed.results);
    this.opts.status.delete(ref.uid, pod);
    this.opts.allocation?.removePod(ref.uid);
    // Probes stop with the kill; a pod whose kill never succeeded has them stopped here.
    this.opts.probes?.removePod(ref.uid);
    return { readAt: removed.readAt };
  }

  /** The runtime removes the pod's containers and sandboxes; once they are gone, its host side goes. */
  private async removeFromRuntime(ref: PodRef): Promise<{ results: SyncResult[]; readAt: number }> {
    const { results, readAt } = await this.opts.runtime.removePod(ref);
    if (results.some((r) => r.error) || !this.opts.host) return { results, readAt };
    return { results: [...results, ...(await this.opts.host.teardown(ref))], readAt };
  }
}
