/**
 * The runtime facade (PodRuntime) over the CRI: one call a pod step. It
 * reads the pod itself (observe.ts), plans (plan.ts planPod), executes the
 * plan, sandbox first, containers through containers.ts (images through
 * images.ts), and returns what it did with what it holds after. Relist
 * (observe.ts) and container GC (gc.ts) are the PLEG's and housekeeping's.
 */
import { formatDuration } from "../config/duration.ts";
import { goRpcError, isNotFound } from "../cri/index.ts";
import { nodeRef, podEventRef } from "../events/recorder.ts";
import { type PodRef, podRef, podUid } from "../pods/identity.ts";
import type { Pod } from "../pods/schema.ts";
import { containerSpecOf, isSidecar } from "../pods/spec.ts";
import { errorMessage } from "../util/errors.ts";
import { Containers, type RuntimeBase } from "./containers.ts";
import { sandboxConfig, sandboxHostnameProblem } from "./cri-config.ts";
import { podDnsConfig } from "./dns.ts";
import { collectGarbage, removeEntity } from "./gc.ts";
import { ImagePuller } from "./images.ts";
import type { PodRuntime } from "./index.ts";
import { entitiesOf, observePod, relistPods } from "./observe.ts";
import type { StartPolicy } from "./options.ts";
import { backoffKey, hasWork, planPod, type PodActions } from "./plan.ts";
import { throwIfAgentStopping } from "./cancel.ts";
import { StartGate } from "./start-gate.ts";
import {
  actionsOutcome,
  type KnownPodStatus,
  type ObservedContainer,
  type ObservedPod,
  type PodRemoveOutcome,
  type PodStepOutcome,
  type PodSyncOutcome,
  type RuntimePodRecord,
  type SyncResult,
} from "./types.ts";

/**
 * The runtime facade's options: the CRI, where configs come from
 * (options.ts `ContainerConfigSources`), what decides a start
 * (`StartPolicy`), and the pod's host side it asks for while it starts a pod.
 */
export interface CriPodRuntimeOptions extends RuntimeBase {
  start: StartPolicy;
}

/** Pods in their first start at once, and how long one keeps its slot at most (start-gate.ts). */
/**
 * A crash-looping container's waiting message, as upstream's doBackOff: the
 * back-off's whole delay in Go's duration format (10s, 20s, ..., 1m20s, 5m0s),
 * not the time left, and the pod as format.Pod prints it.
 */
export const crashLoopMessage = (pod: Pod, container: string, backoffMs: number): string =>
  `back-off ${formatDuration(backoffMs)} restarting failed container=${container} pod=${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})`;

const START_GATE_SLOTS = 8;
const START_GATE_MAX_HOLD_MS = 3000;

/** upstream minimumGracePeriodInSeconds: a kill with no grace period known. */
const MINIMUM_ORPHAN_GRACE_SECONDS = 2;

type Waiting = Map<string, { reason: string; message?: string }>;

/** A sandbox or container appeared, went or changed state between two reads of a pod: the relist would report it. */
function entitiesChanged(before: ObservedPod, after: ObservedPod): boolean {
  const entitiesBefore = entitiesOf(before);
  const entitiesAfter = entitiesOf(after);
  return entitiesAfter.size !== entitiesBefore.size || [...entitiesAfter].some(([id, state]) => entitiesBefore.get(id) !== state);
}

/** The pod's IP as upstream's runtime GetPodStatus reports it: its newest sandbox's, while that is ready (kuberuntime_manager.go GetPodStatus). */
const runtimePodIP = (observed: ObservedPod): string => (observed.sandboxes[0]?.ready ? (observed.sandboxes[0].ip ?? "") : "");

export class CriPodRuntime implements PodRuntime {
  private readonly startGate: StartGate;
  private readonly images: ImagePuller;
  private readonly containers: Containers;

  constructor(private readonly opts: CriPodRuntimeOptions) {
    const { cri, clock, logger, recorder, metrics, host, config, start } = opts;
    this.startGate = new StartGate(START_GATE_SLOTS, START_GATE_MAX_HOLD_MS, clock);
    this.images = new ImagePuller({ cri, clock, recorder, backoff: start.imagePulls, pullQueue: start.pullQueue, podObjects: config.podObjects });
    this.containers = new Containers({ cri, clock, logger, recorder, metrics, host, config, resize: start.resize, images: this.images });
  }

  observe(ref: PodRef): Promise<ObservedPod> {
    return observePod(this.opts.cri, ref);
  }

  async syncPod(pod: Pod, signal: AbortSignal = new AbortController().signal, known?: KnownPodStatus): Promise<PodStepOutcome> {
    const ref = podRef(pod);
    const readAt = known?.at ?? this.opts.clock.now();
    const observed = known?.observed ?? (await this.observe(ref));
    // A pod's first start, up to its containers started, goes through the start gate (start-gate.ts).
    let leaveGate = () => {};
    if (observed.sandboxes.length === 0) {
      try {
        const queued = this.opts.clock.now();
        leaveGate = await this.startGate.enter(signal);
        this.opts.logger.v(4).info("start gate: slot taken", { pod: pod.metadata.name, waitedMs: this.opts.clock.now() - queued });
      } catch (err) {
        if (!signal.aborted) throw err;
        throwIfAgentStopping(signal);
        this.opts.logger.info("pod is terminating; not starting it", { pod: pod.metadata.name });
        return { results: [], waiting: new Map(), changed: false, observed, readAt };
      }
    }
    let outcome: PodSyncOutcome;
    try {
      outcome = await this.sync(pod, observed, signal, { from: known ? "cache" : "read", readAt });
    } finally {
      leaveGate();
    }
    if (!outcome.changed) return { ...outcome, observed, readAt };
    const rereadAt = this.opts.clock.now();
    const reread = await this.observe(ref);
    // The relist's events for what changed are covered by this read and wake nothing (pleg/generic.ts): the next step is
    // due soon when the pod as read now has more to do (a sidecar started, then the app; a container that exited during
    // the step; a pull that failed after the sandbox was made, whose ImagePullBackOff comes with the next step).
    const dueSoon = entitiesChanged(observed, reread) && hasWork(this.plan(pod, reread));
    return { ...outcome, observed: reread, readAt: rereadAt, ...(dueSoon ? { dueSoon: true } : {}) };
  }

  /** What the planner says the pod needs, with this agent's back-offs, probe verdicts and resizes. */
  private plan(pod: Pod, observed: ObservedPod): PodActions {
    const uid = podUid(pod);
    const resize = this.opts.start.resize;
    const { probes } = this.opts.start;
    return planPod(pod, observed, this.opts.start.crashLoop, probes.unhealthy(uid), resize ? { actuated: (name) => resize.actuated(uid, name) } : undefined, {
      started: (name, id) => probes.isStarted(uid, name, id),
    });
  }
  private async sync(pod: Pod, observed: ObservedPod, signal: AbortSignal, source: { from: "cache" | "read"; readAt: number }): Promise<PodSyncOutcome> {
    await this.images.warnMissingPullSecrets(pod);
    const actions = this.plan(pod, observed);
    const results: SyncResult[] = [];
    const waiting: Waiting = new Map(
      actions.waiting.map((w) => {
        const spec = containerSpecOf(pod, w.name);
        const backoffMs = (spec && this.opts.start.crashLoop.current(backoffKey(pod, spec))) ?? w.remainingMs;
        return [w.name, { reason: w.reason, message: crashLoopMessage(pod, w.name, backoffMs) }];
      }),
    );
    const retries = actions.waiting.map((w) => w.remainingMs);
    for (const w of actions.waiting) {
      this.opts.recorder.event(
        podEventRef(pod, w.name),
        "Warning",
        "BackOff",
        `Back-off restarting failed container ${w.name} in pod ${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})`,
      );
    }
    // Upstream SyncPod: a new sandbox for a pod that had one is announced, whether or not anything of it still runs.
    if (actions.createSandbox && observed.sandboxes.length) {
      // Rare and costly (every container restarts): said at the default verbosity, with what the plan was made from.
      this.opts.logger.info("pod sandbox changed; it will be killed and re-created", {
        pod: pod.metadata.name,
        why: actions.sandboxChange,
        sandbox: observed.sandboxes[0]!.id,
        planFrom: source.from,
        readMsAgo: this.opts.clock.now() - source.readAt,
      });
      this.opts.recorder.event(podEventRef(pod), "Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.");
    }
    const changed =
      actions.killPod || actions.createSandbox || actions.containersToStart.length > 0 || actions.containersToKill.length > 0 || actions.containersToResize.length > 0;
    const grace = pod.spec.terminationGracePeriodSeconds ?? 30;

    if (actions.killPod) {
      const killed = await this.kill(observed, observed, grace, pod);
      results.push(...killed.results);
      if (killed.results.some((r) => r.error)) return { results, waiting, changed, retryAfterMs: 1000 };
    }
    for (const k of actions.containersToKill)
      results.push(
        await this.containers.stop({
          pod,
          id: k.id,
          name: k.name,
          graceSeconds: k.gracePeriodSeconds ?? grace,
          why: k.reason,
          ...(k.change !== undefined ? { change: k.change } : {}),
          podIP: runtimePodIP(observed),
        }),
      );
    if (actions.containersToResize.length) results.push(...(await this.containers.resizeInPlace(pod, actions.containersToResize)));

    // The kills above can wait out a long grace period; a pod that must stop by now gets nothing started.
    throwIfAgentStopping(signal);
    if (signal.aborted && (actions.createSandbox || actions.containersToStart.length)) {
      this.opts.logger.info("pod is terminating; not starting its containers", { pod: pod.metadata.name });
      return { results, waiting, changed };
    }
    let sandboxId = actions.sandboxId;
    let cgroupParent = this.opts.host.cgroupParent(pod);
    if (actions.createSandbox || actions.containersToStart.length) {
      try {
        cgroupParent = await this.opts.host.ensureCgroup(pod);
      } catch (err) {
        results.push({ action: "CreatePodSandbox", target: podUid(pod), error: { reason: "FailedCreatePodContainer", message: errorMessage(err) } });
        this.opts.recorder.event(podEventRef(pod), "Warning", "FailedCreatePodContainer", `unable to ensure pod container exists: ${errorMessage(err)}`);
        return { results, waiting, changed, retryAfterMs: 10_000 };
      }
    }
    let config = sandboxConfig(pod, actions.sandboxAttempt, this.opts.config.node, cgroupParent);
    if (actions.createSandbox) {
      // Upstream GetPodDNS records these at every sync; here once per new sandbox, which is when the DNS
      // config reaches the runtime (the correlator would fold the repeats into count patches to the API).
      for (const w of podDnsConfig(pod, this.opts.config.node).warnings) {
        this.opts.recorder.event(podEventRef(pod), "Warning", w.reason, w.message);
        if (w.nodeMessage) this.opts.recorder.event(nodeRef(this.opts.config.node.nodeName), "Warning", w.reason, w.nodeMessage);
      }
      try {
        // Upstream generatePodSandboxConfig: the user namespace (and its refusal) comes before the log directory.
        const runtimeHandler = await this.opts.config.runtimeClasses.handlerFor(pod.spec.runtimeClassName);
        config = sandboxConfig(pod, actions.sandboxAttempt, this.opts.config.node, cgroupParent, await this.opts.config.userNamespaces.forPod(pod, runtimeHandler));
        const hostnameProblem = sandboxHostnameProblem(pod, this.opts.config.node.clusterDomain);
        if (hostnameProblem) throw new Error(hostnameProblem);
        this.opts.host.ensureLogDirectory(config.logDirectory);
        sandboxId = await this.opts.cri.runPodSandbox(config, runtimeHandler);
        results.push({ action: "CreatePodSandbox", target: podUid(pod) });
        this.opts.logger.info("created pod sandbox", { pod: pod.metadata.name, sandbox: sandboxId, attempt: actions.sandboxAttempt });
      } catch (err) {
        results.push({ action: "CreatePodSandbox", target: podUid(pod), error: { reason: "CreatePodSandboxError", message: errorMessage(err) } });
        // Upstream prints the CRI client's error with %v (kuberuntime_manager.go:1358): grpc-go's "rpc error: code = ... desc = ...",
        // the cri-client returning RunPodSandbox's error as is (remote_runtime.go:219-222).
        this.opts.recorder.event(podEventRef(pod), "Warning", "FailedCreatePodSandBox", `Failed to create pod sandbox: ${goRpcError(err)}`);
        return { results, waiting, changed, retryAfterMs: 10_000 };
      }
    }
    if (!sandboxId) return { results, waiting, changed, ...(retries.length ? { retryAfterMs: Math.min(...retries) } : {}) };
    let sandboxIP = observed.sandboxes[0]?.ip;
    if (actions.createSandbox) {
      // Upstream reads the new sandbox's status, and a failure fails the sync with an event (kuberuntime_manager.go:1363-1373):
      // its containers would otherwise start without the pod's IP.
      try {
        sandboxIP = (await this.opts.cri.podSandboxStatus(sandboxId)).status?.network?.ip;
      } catch (err) {
        const message = `Unable to get pod sandbox status: ${goRpcError(err)}`;
        this.opts.recorder.event(podEventRef(pod), "Warning", "FailedStatusPodSandBox", message);
        results.push({ action: "CreatePodSandbox", target: podUid(pod), error: { reason: "FailedStatusPodSandBox", message } });
        return { results, waiting, changed, retryAfterMs: 10_000 };
      }
    }
    // A host-network pod's IP is the node's (upstream generateAPIPodStatus), for env and /etc/hosts; its hooks
    // read the runtime's, which containerd leaves empty for it.
    const podIP = pod.spec.hostNetwork ? this.opts.config.hostIP : sandboxIP;

    for (const start of actions.containersToStart) {
      throwIfAgentStopping(signal);
      if (signal.aborted) break;
      const spec = containerSpecOf(pod, start.name)!;
      const started = await this.containers.start({
        pod,
        spec,
        restartCount: start.restartCount,
        sandboxId,
        sandbox: config,
        podIP: podIP ?? "",
        runtimePodIP: sandboxIP ?? "",
        observed,
        signal,
      });
      results.push(...started.results);
      if (started.waiting) waiting.set(spec.name, started.waiting);
      if (started.retryAfterMs !== undefined) retries.push(started.retryAfterMs);
      // Counted from the previous death, as upstream: the next crash waits longer.
      if (start.previousFinishedAt !== undefined) this.opts.start.crashLoop.next(backoffKey(pod, spec), start.previousFinishedAt);
    }
    return { results, waiting, changed, ...(retries.length ? { retryAfterMs: Math.min(...retries) } : {}) };
  }
  async killPod(ref: PodRef, gracePeriodSeconds: number, pod?: Pod): Promise<PodStepOutcome> {
    const outcome = await this.kill(ref, await this.observe(ref), gracePeriodSeconds, pod);
    const readAt = this.opts.clock.now();
    return { ...outcome, observed: await this.observe(ref), readAt };
  }
  private async kill(ref: PodRef, observed: ObservedPod, gracePeriodSeconds: number, pod?: Pod): Promise<PodSyncOutcome> {
    const live = observed.containers.filter((c) => c.state !== "exited");
    const sidecars = (pod?.spec.initContainers ?? []).filter(isSidecar).map((c) => c.name);
    const target = pod ?? ref;
    const podIP = runtimePodIP(observed);
    // Without the pod's spec (an orphan no source wants), each container is stopped with the grace period
    // it was created with, or upstream's minimum, as upstream restores it from the container's annotations.
    const graceOf = (c: ObservedContainer) => (pod ? gracePeriodSeconds : (c.podGracePeriodSeconds ?? MINIMUM_ORPHAN_GRACE_SECONDS));
    const restoredOf = (c: ObservedContainer) => (pod ? undefined : c.restoredSpec);
    const results = await Promise.all(
      live
        .filter((c) => !sidecars.includes(c.name))
        .map((c) => this.containers.stop({ pod: target, id: c.id, name: c.name, graceSeconds: graceOf(c), podIP, restored: restoredOf(c) })),
    );
    // Sidecars serve the app containers until they are gone, then stop in reverse order (upstream).
    for (const name of [...sidecars].reverse()) {
      for (const c of live.filter((c) => c.name === name))
        results.push(await this.containers.stop({ pod: target, id: c.id, name: c.name, graceSeconds: graceOf(c), podIP, restored: restoredOf(c) }));
    }
    for (const s of observed.sandboxes) {
      try {
        await this.opts.cri.stopPodSandbox(s.id);
        results.push({ action: "KillPodSandbox", target: s.id });
      } catch (err) {
        if (!isNotFound(err)) results.push({ action: "KillPodSandbox", target: s.id, error: { reason: "KillPodSandboxError", message: errorMessage(err) } });
      }
    }
    return actionsOutcome(results);
  }
  async removePod(ref: PodRef): Promise<PodRemoveOutcome> {
    const readAt = this.opts.clock.now();
    const observed = await this.observe(ref);
    const results: SyncResult[] = [];
    for (const c of observed.containers) results.push(await removeEntity("RemoveContainer", c.id, () => this.opts.cri.removeContainer(c.id)));
    for (const s of observed.sandboxes) results.push(await removeEntity("RemovePodSandbox", s.id, () => this.opts.cri.removePodSandbox(s.id)));
    if (results.every((r) => !r.error)) {
      this.opts.start.crashLoop.forgetPrefix(`${ref.uid}/`);
      this.images.forgetPod(ref.uid);
    }
    return { ...actionsOutcome(results), readAt };
  }
  relist(): Promise<RuntimePodRecord[]> {
    return relistPods(this.opts.cri);
  }

  /**
   * Upstream's defaults (MinAge 0, MaxPerPodContainer 1): keep the newest
   * dead container per pod and name, for `logs --previous` and restart
   * counts; remove older ones, and dead sandboxes other than the newest
   * once no container uses them.
   */
  garbageCollect(): Promise<void> {
    return collectGarbage(this.opts.cri);
  }
}
