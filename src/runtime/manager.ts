import { posix } from "node:path";
import {
  ContainerState as CriContainerState,
  ContainerFilter,
  LinuxContainerResources,
  PodSandboxFilter,
  PodSandboxState,
  isNotFound,
  type ContainerStatus as CriContainerStatus,
  type CriService,
  type PodSandboxConfig,
} from "../cri/index.ts";
import type { KubeletMetricsSink } from "../metrics/kubelet.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { VolumeMountError } from "../volumes/index.ts";
import { StartGate } from "./start-gate.ts";
import { containerStateOf } from "./container-state.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { containerConfig, pullPolicyOf, sandboxConfig, sandboxHostnameProblem } from "./cri-config.ts";
import { podEventRef, type EventRecorder } from "../events/recorder.ts";
import { containerEnv, EnvError } from "./env.ts";
import { PodObjectError } from "../api/objects.ts";
import { hookOf, MINIMUM_GRACE_AFTER_PRESTOP_SECONDS, runHook } from "./hooks.ts";
import { restoreOrphanSpec, type RestoredSpec } from "./orphan-spec.ts";
import { effectiveSecurityContext, SecurityContextError, verifyRunAsNonRoot } from "./security.ts";
import type { PodHostResources, PodRuntime } from "./index.ts";
import * as L from "./labels.ts";
import { backoffKey, planPod } from "./plan.ts";
import { joinPidNamespace, pidTargetOf, TargetContainerError } from "./ephemeral.ts";
import { isResizable, resourcesOf } from "./container-resources.ts";
import { podResizeSteps } from "./resize-steps.ts";
import { podDnsConfig } from "./dns.ts";
import { pullWithSecrets } from "./pull-secrets.ts";
import { terminationMessage } from "./termination.ts";
import {
  actionsOutcome,
  type ObservedContainer,
  type ObservedPod,
  type ObservedSandbox,
  type PodRemoveOutcome,
  type PodStepOutcome,
  type PodSyncOutcome,
  type RuntimePodRecord,
  type SyncResult,
} from "./types.ts";
import { type PodRef, podRef, podUid } from "../pods/identity.ts";
import { containerSpecOf, isSidecar, restartPolicyOf } from "../pods/spec.ts";
import { DeviceError, withDevices } from "../devices/index.ts";
import type { ContainerConfigSources, ContainerResourcesFn, StartPolicy } from "./options.ts";

/**
 * The runtime facade's options: the CRI, where configs come from
 * (options.ts `ContainerConfigSources`), what decides a start
 * (`StartPolicy`), and the pod's host side it asks for while it starts a pod.
 */
export interface CriPodRuntimeOptions {
  cri: CriService;
  clock: Clock;
  logger: Logger;
  /** Where Pulling/Created/Started/Killing/BackOff... go. */
  recorder: EventRecorder;
  /** kubelet_started_containers_total and its errors. */
  metrics: Pick<KubeletMetricsSink, "containerStarted">;
  /** The pod's host side the runtime asks for while it starts a pod: its cgroup, its mounts, its log directories (sync/pod-host.ts). */
  host: PodHostResources;
  config: ContainerConfigSources;
  start: StartPolicy;
}

/** Pods in their first start at once, and how long one keeps its slot at most (start-gate.ts). */
const START_GATE_SLOTS = 8;
const START_GATE_MAX_HOLD_MS = 3000;

/** The CRI message for container resource values (created with the container, or updated in place). */
const criResources = (r: ReturnType<ContainerResourcesFn>) =>
  LinuxContainerResources.create({
    ...r,
    cpuQuota: BigInt(r.cpuQuota),
    cpuPeriod: BigInt(r.cpuPeriod),
    cpuShares: BigInt(r.cpuShares),
    memoryLimitInBytes: BigInt(r.memoryLimitInBytes),
    oomScoreAdj: BigInt(r.oomScoreAdj),
    memorySwapLimitInBytes: BigInt(r.memorySwapLimitInBytes ?? 0),
  });

/** upstream minimumGracePeriodInSeconds: a kill with no grace period known. */
const MINIMUM_ORPHAN_GRACE_SECONDS = 2;
const optionalGrace = (seconds: number | undefined) => (seconds === undefined ? {} : { podGracePeriodSeconds: seconds });

const nsToMs = (ns: bigint): number | undefined => (ns > 0n ? Number(ns / 1_000_000n) : undefined);

type Waiting = Map<string, { reason: string; message?: string }>;

/** One container to start in a pod's sandbox. */
interface ContainerStart {
  pod: Pod;
  spec: ContainerSpec;
  restartCount: number;
  sandboxId: string;
  sandbox: PodSandboxConfig;
  podIP: string;
  /** What the runtime held before this sync (an ephemeral container's target is found there). */
  observed: ObservedPod;
}

/** One container to stop: its preStop hook first when the pod's spec is known. */
interface ContainerStop {
  pod: PodRef | Pod;
  id: string;
  name: string;
  graceSeconds: number;
  /** Why it is stopped (logged; a Killing event's message when it starts with "Container "); none for a pod's kill. */
  why?: string;
  podIP: string;
  /** An orphan's spec as its container's annotations restore it (its preStop hook). */
  restored?: RestoredSpec | undefined;
}

/** What a container start did; when the container does not run, why it waits and when to try again. */
interface ContainerStartResult {
  results: SyncResult[];
  waiting?: { reason: string; message: string };
  retryAfterMs?: number;
}

/** The runtime's message, and for an exited container its termination message (file or log tail) after it. */
function messageOf(s: CriContainerStatus): { message?: string } {
  if (s.state !== CriContainerState.CONTAINER_EXITED) return s.message ? { message: s.message } : {};
  const message = terminationMessage({
    exitCode: s.exitCode,
    runtimeMessage: s.message,
    mounts: s.mounts,
    terminationMessagePath: s.annotations[L.TerminationMessagePathAnnotation] ?? "",
    terminationMessagePolicy: s.annotations[L.TerminationMessagePolicyAnnotation] ?? "File",
    logPath: s.logPath,
  });
  return message ? { message } : {};
}

export class CriPodRuntime implements PodRuntime {
  private readonly startGate: StartGate;

  constructor(private readonly opts: CriPodRuntimeOptions) {
    this.startGate = new StartGate(START_GATE_SLOTS, START_GATE_MAX_HOLD_MS, opts.clock);
  }

  async observe(ref: PodRef): Promise<ObservedPod> {
    const { cri } = this.opts;
    const labelSelector = { [L.PodUidLabel]: ref.uid };
    const [sandboxes, containers] = await Promise.all([
      cri.listPodSandbox(PodSandboxFilter.create({ labelSelector })),
      cri.listContainers(ContainerFilter.create({ labelSelector })),
    ]);
    const observedSandboxes: ObservedSandbox[] = sandboxes
      .map((s) => ({
        id: s.id,
        ready: s.state === PodSandboxState.SANDBOX_READY,
        attempt: s.metadata?.attempt ?? 0,
        createdAt: nsToMs(s.createdAt) ?? 0,
        additionalIps: [] as string[],
      }))
      .sort((a, b) => b.createdAt - a.createdAt || b.attempt - a.attempt);
    const newest = observedSandboxes[0];
    if (newest?.ready) {
      const status = await cri.podSandboxStatus(newest.id).catch((err) => (isNotFound(err) ? undefined : Promise.reject(err)));
      const network = status?.status?.network;
      if (network?.ip) newest.ip = network.ip;
      newest.additionalIps = network?.additionalIps.map((a) => a.ip) ?? [];
    }
    const observedContainers = (
      await Promise.all(
        containers.map(async (c): Promise<ObservedContainer | undefined> => {
          const response = await cri.containerStatus(c.id).catch((err) => (isNotFound(err) ? undefined : Promise.reject(err)));
          const s = response?.status;
          if (!s) return undefined; // removed between list and status
          return {
            id: s.id,
            name: s.metadata?.name ?? c.labels[L.ContainerNameLabel] ?? "",
            sandboxId: c.podSandboxId,
            state: containerStateOf(s.state),
            hash: s.annotations[L.ContainerHashAnnotation] ?? c.annotations[L.ContainerHashAnnotation] ?? "",
            restartCount: Number(s.annotations[L.ContainerRestartCountAnnotation] ?? s.metadata?.attempt ?? 0),
            ...optionalGrace(L.podGracePeriodFrom(s.annotations)),
            restoredSpec: restoreOrphanSpec(s.metadata?.name ?? c.labels[L.ContainerNameLabel] ?? "", s.annotations),
            image: s.image?.image ?? "",
            imageRef: s.imageRef,
            createdAt: nsToMs(s.createdAt) ?? 0,
            startedAt: nsToMs(s.startedAt),
            finishedAt: nsToMs(s.finishedAt),
            ...(s.state === CriContainerState.CONTAINER_EXITED ? { exitCode: s.exitCode } : {}),
            ...(s.reason ? { reason: s.reason } : {}),
            ...messageOf(s),
          };
        }),
      )
    )
      .filter((c): c is ObservedContainer => c !== undefined)
      .sort((a, b) => b.createdAt - a.createdAt || b.restartCount - a.restartCount);
    return { uid: ref.uid, name: ref.name, namespace: ref.namespace, sandboxes: observedSandboxes, containers: observedContainers };
  }

  async syncPod(pod: Pod, terminating: () => boolean = () => false): Promise<PodStepOutcome> {
    const ref = podRef(pod);
    const readAt = this.opts.clock.now();
    const observed = await this.observe(ref);
    // A pod's first start, up to its containers started, goes through the start gate (start-gate.ts).
    const leaveGate = observed.sandboxes.length === 0 ? await this.startGate.enter() : () => {};
    let outcome: PodSyncOutcome;
    try {
      outcome = await this.sync(pod, observed, terminating);
    } finally {
      leaveGate();
    }
    if (!outcome.changed) return { ...outcome, observed, readAt };
    const rereadAt = this.opts.clock.now();
    return { ...outcome, observed: await this.observe(ref), readAt: rereadAt };
  }

  private async sync(pod: Pod, observed: ObservedPod, terminating: () => boolean): Promise<PodSyncOutcome> {
    const uid = podUid(pod);
    const resize = this.opts.start.resize;
    const started = this.opts.start.started;
    const actions = planPod(pod, observed, this.opts.start.crashLoop, this.opts.start.unhealthy(uid), resize ? { actuated: (name) => resize.actuated(uid, name) } : undefined, {
      started: (name, id) => started(uid, name, id),
    });
    const results: SyncResult[] = [];
    const waiting: Waiting = new Map(
      actions.waiting.map((w) => [
        w.name,
        { reason: w.reason, message: `back-off ${Math.ceil(w.remainingMs / 1000)}s restarting failed container=${w.name} pod=${pod.metadata.name}` },
      ]),
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
    if (actions.killPod && actions.createSandbox && observed.sandboxes.length) {
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
      results.push(await this.stopContainer({ pod, id: k.id, name: k.name, graceSeconds: k.gracePeriodSeconds ?? grace, why: k.reason, podIP: observed.sandboxes[0]?.ip ?? "" }));
    if (actions.containersToResize.length) results.push(...(await this.resizeInPlace(pod, actions.containersToResize)));

    // The kills above can wait out a long grace period; a pod that must stop by now gets nothing started.
    if (terminating() && (actions.createSandbox || actions.containersToStart.length)) {
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
    const config = sandboxConfig(pod, actions.sandboxAttempt, this.opts.config.node, cgroupParent);
    if (actions.createSandbox) {
      for (const w of podDnsConfig(pod, this.opts.config.node).warnings) this.opts.recorder.event(podEventRef(pod), "Warning", w.reason, w.message);
      try {
        const hostnameProblem = sandboxHostnameProblem(pod, this.opts.config.node.clusterDomain);
        if (hostnameProblem) throw new Error(hostnameProblem);
        this.opts.host.ensureLogDirectory(config.logDirectory);
        const runtimeHandler = await this.opts.config.runtimeClasses.handlerFor(pod.spec.runtimeClassName);
        sandboxId = await this.opts.cri.runPodSandbox(config, runtimeHandler);
        results.push({ action: "CreatePodSandbox", target: podUid(pod) });
        this.opts.logger.info("created pod sandbox", { pod: pod.metadata.name, sandbox: sandboxId, attempt: actions.sandboxAttempt });
      } catch (err) {
        results.push({ action: "CreatePodSandbox", target: podUid(pod), error: { reason: "CreatePodSandboxError", message: errorMessage(err) } });
        this.opts.recorder.event(podEventRef(pod), "Warning", "FailedCreatePodSandBox", `Failed to create pod sandbox: ${errorMessage(err)}`);
        return { results, waiting, changed, retryAfterMs: 10_000 };
      }
    }
    if (!sandboxId) return { results, waiting, changed, ...(retries.length ? { retryAfterMs: Math.min(...retries) } : {}) };
    // A host-network pod's IP is the node's (upstream generateAPIPodStatus), for env, hooks and /etc/hosts.
    const podIP = pod.spec.hostNetwork
      ? this.opts.config.hostIP
      : actions.createSandbox
        ? (await this.opts.cri.podSandboxStatus(sandboxId).catch(() => undefined))?.status?.network?.ip
        : observed.sandboxes[0]?.ip;

    for (const start of actions.containersToStart) {
      if (terminating()) break;
      const spec = containerSpecOf(pod, start.name)!;
      const started = await this.startContainer({ pod, spec, restartCount: start.restartCount, sandboxId, sandbox: config, podIP: podIP ?? "", observed });
      results.push(...started.results);
      if (started.waiting) waiting.set(spec.name, started.waiting);
      if (started.retryAfterMs !== undefined) retries.push(started.retryAfterMs);
      // Counted from the previous death, as upstream: the next crash waits longer.
      if (start.previousFinishedAt !== undefined) this.opts.start.crashLoop.next(backoffKey(pod, spec), start.previousFinishedAt);
    }
    return { results, waiting, changed, ...(retries.length ? { retryAfterMs: Math.min(...retries) } : {}) };
  }

  /**
   * Upstream doPodResizeAction: what grows in the pod cgroup grows before
   * the containers, what shrinks shrinks after them, so the pod limit never
   * falls below the sum of its containers'; containers whose memory limit
   * shrinks go first. Each container is updated through the CRI
   * (UpdateContainerResources) and recorded as applied once the runtime took it.
   */
  private async resizeInPlace(pod: Pod, targets: { id: string; name: string }[]): Promise<SyncResult[]> {
    const uid = podUid(pod);
    const applied = (name: string) => this.opts.start.resize?.actuated(uid, name);
    const plan = podResizeSteps(pod, applied);
    const results: SyncResult[] = [];
    const fail = (target: string, err: unknown): SyncResult[] => {
      const message = errorMessage(err);
      this.opts.logger.warn("pod resize failed", { pod: pod.metadata.name, target, err: message });
      return [...results, { action: "ResizePodInPlace", target, error: { reason: "ResizePodInPlaceError", message } }];
    };
    try {
      await this.opts.host.ensureCgroup(plan.podFirst);
    } catch (err) {
      return fail(uid, err);
    }
    const ordered = [...targets].sort((a, b) => Number(plan.memoryShrinks(b.name)) - Number(plan.memoryShrinks(a.name)));
    for (const t of ordered) {
      const spec = containerSpecOf(pod, t.name)!;
      try {
        const r = this.opts.config.resources(pod, spec);
        await this.opts.cri.updateContainerResources(t.id, criResources(r));
        this.opts.start.resize?.setActuated(uid, t.name, resourcesOf(spec));
        this.opts.logger.info("container resized in place", { pod: pod.metadata.name, container: t.name, ...r });
        results.push({ action: "ResizePodInPlace", target: t.name });
      } catch (err) {
        return fail(t.name, err);
      }
    }
    try {
      await this.opts.host.ensureCgroup(pod);
    } catch (err) {
      return fail(uid, err);
    }
    return results;
  }

  private async ensureImage(pod: Pod, container: string, image: string, policy: "Always" | "IfNotPresent" | "Never", sandbox: PodSandboxConfig): Promise<ImageInfo> {
    const { cri, clock } = this.opts;
    const ref = podEventRef(pod, container);
    const present = await cri.imageStatus({ image, annotations: {}, userSpecifiedImage: image, runtimeHandler: "" });
    if (present && policy !== "Always") {
      this.opts.recorder.event(ref, "Normal", "Pulled", `Container image "${image}" already present on machine`);
      return imageInfo(present);
    }
    if (policy === "Never") throw new ImageError("ErrImageNeverPull", `Container image "${image}" is not present with pull policy of Never`);
    const key = `${pod.metadata.uid}/${image}`;
    const wait = this.opts.start.imagePulls.remaining(key);
    if (wait > 0) {
      this.opts.recorder.event(ref, "Normal", "BackOff", `Back-off pulling image "${image}"`);
      throw new ImageError("ImagePullBackOff", `Back-off pulling image "${image}"`, wait);
    }
    try {
      this.opts.recorder.event(ref, "Normal", "Pulling", `Pulling image "${image}"`);
      const started = clock.now();
      const pulled = await this.pull(pod, image, sandbox);
      this.opts.recorder.event(ref, "Normal", "Pulled", `Successfully pulled image "${image}" in ${clock.now() - started}ms`);
      const status = await cri.imageStatus({ image: pulled, annotations: {}, userSpecifiedImage: image, runtimeHandler: "" });
      return status ? imageInfo(status) : { ref: pulled, username: "" };
    } catch (err) {
      this.opts.recorder.event(ref, "Warning", "Failed", `Failed to pull image "${image}": ${errorMessage(err)}`);
      // Upstream EnsureImageExists: with policy Always a failed pull is ErrImagePull even when a
      // local copy exists (the copy may be stale, or not one the pod's credentials may use).
      this.opts.start.imagePulls.next(key, this.opts.clock.now());
      throw new ImageError("ErrImagePull", errorMessage(err), this.opts.start.imagePulls.remaining(key));
    }
  }

  /** One pull through the node-wide queue with the pod's pull secrets; a secret that cannot be read is an event, as upstream. */
  private async pull(pod: Pod, image: string, sandbox: PodSandboxConfig): Promise<string> {
    return pullWithSecrets({
      cri: this.opts.cri,
      queue: this.opts.start.pullQueue,
      objects: this.opts.config.podObjects,
      pod,
      image,
      sandbox,
      warn: (reason, message) => this.opts.recorder.event(podEventRef(pod), "Warning", reason, message),
    });
  }

  /** Pulls, creates and starts one container (postStart included); says why it waits when it does not run. */
  private async startContainer({ pod, spec, restartCount, sandboxId, sandbox, podIP, observed }: ContainerStart): Promise<ContainerStartResult> {
    const { cri } = this.opts;
    const results: SyncResult[] = [];
    let imageRef: string;
    let imageUser: ImageInfo;
    try {
      imageUser = await this.ensureImage(pod, spec.name, spec.image, pullPolicyOf(spec), sandbox);
      imageRef = imageUser.ref;
      results.push({ action: "PullImage", target: spec.image });
    } catch (err) {
      const e = err instanceof ImageError ? err : new ImageError("ErrImagePull", errorMessage(err), 10_000);
      this.opts.recorder.event(
        podEventRef(pod, spec.name),
        "Warning",
        e.reason === "ErrImageNeverPull" ? "ErrImageNeverPull" : "Failed",
        e.reason === "ErrImageNeverPull" ? e.message : `Error: ${e.reason}`,
      );
      results.push({ action: "PullImage", target: spec.image, error: { reason: e.reason, message: e.message } });
      return { results, waiting: { reason: e.reason, message: e.message }, ...(e.retryAfterMs ? { retryAfterMs: e.retryAfterMs } : {}) };
    }
    let config;
    try {
      verifyRunAsNonRoot(effectiveSecurityContext(pod, spec), imageUser);
      const mounts = await this.opts.host.containerMounts(pod, spec, podIP ? [podIP] : []);
      const envs = await containerEnv(pod, spec, {
        values: { podIP, ...(this.opts.config.hostIP ? { hostIP: this.opts.config.hostIP } : {}) },
        objects: this.opts.config.podObjects,
        allocatable: this.opts.config.nodeAllocatable(),
        warn: (reason, message) => this.opts.recorder.event(podEventRef(pod), "Warning", reason, message),
        services: this.opts.config.serviceEnv,
      });
      config = containerConfig(pod, spec, restartCount, imageRef, envs, this.opts.config.node, mounts);
      config = withDevices(config, await this.opts.config.devices.runOptions(pod, spec.name));
      const pidTarget = pidTargetOf(pod, spec.name, observed);
      if (pidTarget) joinPidNamespace(config, pidTarget);
      config.linux = { ...config.linux!, resources: criResources(this.opts.config.resources(pod, spec)) };
      this.opts.host.ensureLogDirectory(posix.join(sandbox.logDirectory, spec.name));
    } catch (err) {
      const reason =
        err instanceof EnvError ||
        err instanceof PodObjectError ||
        err instanceof SecurityContextError ||
        err instanceof VolumeMountError ||
        err instanceof TargetContainerError ||
        err instanceof DeviceError
          ? "CreateContainerConfigError"
          : "CreateContainerError";
      this.opts.recorder.event(podEventRef(pod, spec.name), "Warning", "Failed", `Error: ${errorMessage(err)}`);
      results.push({ action: "StartContainer", target: spec.name, error: { reason, message: errorMessage(err) } });
      return { results, waiting: { reason, message: errorMessage(err) }, retryAfterMs: 10_000 };
    }
    let id: string;
    try {
      id = await cri.createContainer(sandboxId, config, sandbox);
      if (isResizable(pod, spec)) this.opts.start.resize?.setActuated(podUid(pod), spec.name, resourcesOf(spec));
      this.opts.recorder.event(podEventRef(pod, spec.name), "Normal", "Created", `Created container: ${spec.name}`);
    } catch (err) {
      this.opts.recorder.event(podEventRef(pod, spec.name), "Warning", "Failed", `Error: ${errorMessage(err)}`);
      results.push({ action: "StartContainer", target: spec.name, error: { reason: "CreateContainerError", message: errorMessage(err) } });
      return { results, waiting: { reason: "CreateContainerError", message: errorMessage(err) }, retryAfterMs: 10_000 };
    }
    const containerType = pod.spec.initContainers?.some((c) => c.name === spec.name)
      ? "init_container"
      : pod.spec.ephemeralContainers?.some((c) => c.name === spec.name)
        ? "ephemeral_container"
        : "container";
    try {
      await cri.startContainer(id);
      this.opts.metrics.containerStarted(containerType);
      this.opts.logger.info("started container", { pod: pod.metadata.name, container: spec.name, id, restartCount });
      this.opts.recorder.event(podEventRef(pod, spec.name), "Normal", "Started", `Started container ${spec.name}`);
      // postStart runs before the container is reported running; a failure kills it (upstream).
      const postStart = hookOf(spec, "postStart");
      const failure = postStart
        ? await runHook(postStart, { cri, clock: this.opts.clock, pod, container: spec, containerId: id, podIP, timeoutSeconds: pod.spec.terminationGracePeriodSeconds ?? 30 })
        : undefined;
      if (failure) {
        this.opts.recorder.event(podEventRef(pod, spec.name), "Warning", "FailedPostStartHook", failure);
        results.push(await this.stopContainer({ pod, id, name: spec.name, graceSeconds: pod.spec.terminationGracePeriodSeconds ?? 30, why: "FailedPostStartHook", podIP: "" }));
        results.push({ action: "StartContainer", target: spec.name, error: { reason: "PostStartHookError", message: failure } });
        return { results };
      }
      results.push({ action: "StartContainer", target: spec.name });
      return { results };
    } catch (err) {
      this.opts.metrics.containerStarted(containerType, "RunContainerError");
      this.opts.recorder.event(podEventRef(pod, spec.name), "Warning", "Failed", `Error: ${errorMessage(err)}`);
      // The container stays, exited as the runtime says (containerd: StartError, 128); it waits with
      // RunContainerError until the crash-loop backoff governs the retry, when it will be restarted (upstream reasonCache).
      results.push({ action: "StartContainer", target: spec.name, error: { reason: "RunContainerError", message: errorMessage(err) } });
      const waits = restartPolicyOf(pod) !== "Never" || isSidecar(spec);
      return { results, ...(waits ? { waiting: { reason: "RunContainerError", message: errorMessage(err) } } : {}) };
    }
  }

  /**
   * Stops a container: its preStop hook first, then the runtime's stop with what is left of the grace period.
   * Without the pod's spec (an orphan) the hook is the one the container's annotations restore, as upstream's.
   */
  private async stopContainer({ pod, id, name, graceSeconds, why, podIP, restored }: ContainerStop): Promise<SyncResult> {
    const meta = "metadata" in pod ? pod.metadata : pod;
    this.opts.recorder.event(podEventRef({ metadata: meta }, name), "Normal", "Killing", why?.startsWith("Container ") ? why : `Stopping container ${name}`);
    if (why) this.opts.logger.info("stopping container", { pod: `${meta.namespace}/${meta.name}`, container: name, why });
    if (!("spec" in pod) && restored && !restored.ok) {
      this.opts.logger.warn("an orphaned container's annotations do not restore its preStop hook; stopping it without", {
        pod: `${meta.namespace}/${meta.name}`,
        container: name,
        err: restored.error,
      });
    }
    const specPod: Pod | undefined =
      "spec" in pod
        ? pod
        : restored?.ok
          ? ({ metadata: { name: meta.name, namespace: meta.namespace, uid: meta.uid }, spec: { containers: [restored.container] } } as Pod)
          : undefined;
    const spec = specPod ? containerSpecOf(specPod, name) : undefined;
    const preStop = spec && why !== "FailedPostStartHook" && graceSeconds > 0 ? hookOf(spec, "preStop") : undefined;
    if (preStop && specPod) {
      const started = this.opts.clock.now();
      if (!("spec" in pod)) this.opts.logger.info("running an orphaned container's preStop hook", { pod: `${meta.namespace}/${meta.name}`, container: name });
      const failure = await runHook(preStop, { cri: this.opts.cri, clock: this.opts.clock, pod: specPod, container: spec!, containerId: id, podIP, timeoutSeconds: graceSeconds });
      if (failure) this.opts.recorder.event(podEventRef(specPod, name), "Warning", "FailedPreStopHook", failure);
      const spent = Math.floor((this.opts.clock.now() - started) / 1000);
      graceSeconds = Math.max(MINIMUM_GRACE_AFTER_PRESTOP_SECONDS, graceSeconds - spent);
    }
    try {
      await this.opts.cri.stopContainer(id, graceSeconds);
      return { action: "KillContainer", target: name };
    } catch (err) {
      if (isNotFound(err)) return { action: "KillContainer", target: name };
      return { action: "KillContainer", target: name, error: { reason: "KillContainerError", message: errorMessage(err) } };
    }
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
    const podIP = observed.sandboxes[0]?.ip ?? "";
    // Without the pod's spec (an orphan no source wants), each container is stopped with the grace period
    // it was created with, or upstream's minimum, as upstream restores it from the container's annotations.
    const graceOf = (c: ObservedContainer) => (pod ? gracePeriodSeconds : (c.podGracePeriodSeconds ?? MINIMUM_ORPHAN_GRACE_SECONDS));
    const restoredOf = (c: ObservedContainer) => (pod ? undefined : c.restoredSpec);
    const results = await Promise.all(
      live
        .filter((c) => !sidecars.includes(c.name))
        .map((c) => this.stopContainer({ pod: target, id: c.id, name: c.name, graceSeconds: graceOf(c), podIP, restored: restoredOf(c) })),
    );
    // Sidecars serve the app containers until they are gone, then stop in reverse order (upstream).
    for (const name of [...sidecars].reverse()) {
      for (const c of live.filter((c) => c.name === name))
        results.push(await this.stopContainer({ pod: target, id: c.id, name: c.name, graceSeconds: graceOf(c), podIP, restored: restoredOf(c) }));
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
    for (const c of observed.containers) results.push(await this.remove("RemoveContainer", c.id, () => this.opts.cri.removeContainer(c.id)));
    for (const s of observed.sandboxes) results.push(await this.remove("RemovePodSandbox", s.id, () => this.opts.cri.removePodSandbox(s.id)));
    if (results.every((r) => !r.error)) {
      this.opts.start.crashLoop.forgetPrefix(`${ref.uid}/`);
      this.opts.start.imagePulls.forgetPrefix(`${ref.uid}/`);
    }
    return { ...actionsOutcome(results), readAt };
  }

  private async remove(action: SyncResult["action"], id: string, fn: () => Promise<void>): Promise<SyncResult> {
    try {
      await fn();
      return { action, target: id };
    } catch (err) {
      return isNotFound(err) ? { action, target: id } : { action, target: id, error: { reason: `${action}Error`, message: errorMessage(err) } };
    }
  }

  async relist(): Promise<RuntimePodRecord[]> {
    const [sandboxes, containers] = await Promise.all([this.opts.cri.listPodSandbox(), this.opts.cri.listContainers()]);
    const pods = new Map<string, RuntimePodRecord>();
    const record = (labels: Record<string, string>) => {
      const id = L.identityFromLabels(labels);
      if (!id) return undefined; // not created by a kubelet
      let r = pods.get(id.uid);
      if (!r) pods.set(id.uid, (r = { ...id, entities: new Map() }));
      return r;
    };
    for (const s of sandboxes) {
      const r = record(s.labels);
      if (!r) continue;
      r.entities.set(s.id, s.state === PodSandboxState.SANDBOX_READY ? "running" : "exited");
      (r.sandboxIds ??= new Set()).add(s.id);
    }
    for (const c of containers) record(c.labels)?.entities.set(c.id, containerStateOf(c.state));
    return [...pods.values()];
  }

  /**
   * Upstream's defaults (MinAge 0, MaxPerPodContainer 1): keep the newest
   * dead container per pod and name, for `logs --previous` and restart
   * counts; remove older ones, and dead sandboxes other than the newest
   * once no container uses them.
   */
  async garbageCollect(): Promise<void> {
    const { cri } = this.opts;
    const [sandboxes, containers] = await Promise.all([cri.listPodSandbox(), cri.listContainers()]);
    const byKey = new Map<string, typeof containers>();
    for (const c of containers) {
      if (c.state !== CriContainerState.CONTAINER_EXITED) continue;
      const uid = c.labels[L.PodUidLabel];
      if (!uid) continue;
      const key = `${uid}/${c.metadata?.name}`;
      byKey.set(key, [...(byKey.get(key) ?? []), c]);
    }
    const removed = new Set<string>();
    for (const dead of byKey.values()) {
      dead.sort((a, b) => Number(b.createdAt - a.createdAt));
      for (const c of dead.slice(1)) {
        const r = await this.remove("RemoveContainer", c.id, () => cri.removeContainer(c.id));
        if (!r.error) removed.add(c.id);
      }
    }
    const used = new Set(containers.filter((c) => !removed.has(c.id)).map((c) => c.podSandboxId));
    const newestByPod = new Map<string, string>();
    for (const s of [...sandboxes].sort((a, b) => Number(b.createdAt - a.createdAt))) {
      const uid = s.labels[L.PodUidLabel];
      if (uid && !newestByPod.has(uid)) newestByPod.set(uid, s.id);
    }
    for (const s of sandboxes) {
      const uid = s.labels[L.PodUidLabel];
      if (!uid || s.state === PodSandboxState.SANDBOX_READY || used.has(s.id) || newestByPod.get(uid) === s.id) continue;
      await this.remove("RemovePodSandbox", s.id, () => cri.removePodSandbox(s.id));
    }
  }
}

/** An image's reference and the user its config runs as (for runAsNonRoot). */
interface ImageInfo {
  ref: string;
  uid?: number;
  username: string;
}

const imageInfo = (image: { id: string; uid?: { value: bigint }; username: string }): ImageInfo => ({
  ref: image.id,
  ...(image.uid ? { uid: Number(image.uid.value) } : {}),
  username: image.username,
});

class ImageError extends Error {
  constructor(
    readonly reason: "ErrImagePull" | "ImagePullBackOff" | "ErrImageNeverPull",
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}
