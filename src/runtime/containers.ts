/**
 * One container at a time through the CRI: started (image, config, create,
 * start, postStart), stopped (preStop, then the runtime's stop with what is
 * left of the grace period) and resized in place (upstream
 * doPodResizeAction's order). Each returns SyncResults; nothing is passed
 * out through its arguments.
 */
import { posix } from "node:path";
import { goRpcError, isNotFound, LinuxContainerResources, runtimeMessage, type CriService, type PodSandboxConfig, type UserNamespace } from "../cri/index.ts";
import { withDevices, DeviceError } from "../devices/index.ts";
import { podEventRef, type EventRecorder } from "../events/recorder.ts";
import type { KubeletMetricsSink } from "../metrics/kubelet.ts";
import type { PodRef } from "../pods/identity.ts";
import { podUid } from "../pods/identity.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { containerSpecOf, isSidecar, restartPolicyOf } from "../pods/spec.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { VolumeMountError } from "../volumes/index.ts";
import { PodObjectError } from "../api/objects.ts";
import { isResizable, resourcesOf } from "./container-resources.ts";
import { containerConfig, idmappedMounts, pullPolicyOf, withUserNamespace } from "./cri-config.ts";
import { UserNamespaceError } from "../userns/index.ts";
import { joinPidNamespace, pidTargetOf, TargetContainerError } from "./ephemeral.ts";
import { containerEnv, EnvError } from "./env.ts";
import { hookOf, MINIMUM_GRACE_AFTER_PRESTOP_SECONDS, runHook } from "./hooks.ts";
import { ImageError, type ImageInfo, type ImagePuller } from "./images.ts";
import type { PodHostResources } from "./index.ts";
import type { ActuatedResources, ContainerConfigSources } from "./options.ts";
import type { ContainerCriResources } from "../cgroups/container-values.ts";
import { throwIfAgentStopping } from "./cancel.ts";
import type { RestoredSpec } from "./orphan-spec.ts";
import { podResizeSteps } from "./resize-steps.ts";
import { effectiveSecurityContext, SecurityContextError, verifyRunAsNonRoot } from "./security.ts";
import type { ObservedPod, SyncResult } from "./types.ts";

/** What the runtime facade and its containers are both built with (manager.ts CriPodRuntimeOptions). */
export interface RuntimeBase {
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
}

export interface ContainersOptions extends RuntimeBase {
  /** What was applied to each container (in-place resize); undefined when InPlacePodVerticalScaling is off. */
  resize: ActuatedResources | undefined;
  images: ImagePuller;
}

/** The CRI message for container resource values (created with the container, or updated in place). */
const criResources = (r: ContainerCriResources) =>
  LinuxContainerResources.create({
    ...r,
    cpuQuota: BigInt(r.cpuQuota),
    cpuPeriod: BigInt(r.cpuPeriod),
    cpuShares: BigInt(r.cpuShares),
    memoryLimitInBytes: BigInt(r.memoryLimitInBytes),
    oomScoreAdj: BigInt(r.oomScoreAdj),
    memorySwapLimitInBytes: BigInt(r.memorySwapLimitInBytes ?? 0),
    hugepageLimits: (r.hugepageLimits ?? []).map((h) => ({ pageSize: h.pageSize, limit: BigInt(h.limit) })),
  });

/** One container to start in a pod's sandbox. */
export interface ContainerStart {
  pod: Pod;
  spec: ContainerSpec;
  restartCount: number;
  sandboxId: string;
  sandbox: PodSandboxConfig;
  /** The pod's IP for its env and files (a host-network pod's is the node's). */
  podIP: string;
  /** The pod's IP as the runtime reports it, which hooks use (none for a host-network pod). */
  runtimePodIP: string;
  /** What the runtime held before this sync (an ephemeral container's target is found there). */
  observed: ObservedPod;
  /** Aborted when the pod must stop or the agent stops: an image pull or postStart hook still under way is abandoned. */
  signal?: AbortSignal;
}

/** One container to stop: its preStop hook first when the pod's spec is known. */
export interface ContainerStop {
  pod: PodRef | Pod;
  id: string;
  name: string;
  graceSeconds: number;
  /** Why it is stopped (logged; a Killing event's message when it starts with "Container " or "Init container "); none for a pod's kill. */
  why?: string;
  /** What of a changed spec differs, logged with `why`. */
  change?: string;
  /** The pod's IP as the runtime reports it, for its preStop hook (none for a host-network pod). */
  podIP: string;
  /** An orphan's spec as its container's annotations restore it (its preStop hook). */
  restored?: RestoredSpec | undefined;
}

/** What a container start did; when the container does not run, why it waits and when to try again. */
export interface ContainerStartResult {
  results: SyncResult[];
  waiting?: { reason: string; message: string };
  retryAfterMs?: number;
}

/** A container that failed to start is started again unless its pod never restarts it (a sidecar always is). */
const willRestart = (pod: Pod, spec: ContainerSpec): boolean => restartPolicyOf(pod) !== "Never" || isSidecar(spec);

export class Containers {
  constructor(private readonly opts: ContainersOptions) {}

  /** Pulls, creates and starts one container (postStart included); says why it waits when it does not run. */
  async start({ pod, spec, restartCount, sandboxId, sandbox, podIP, runtimePodIP, observed, signal }: ContainerStart): Promise<ContainerStartResult> {
    const { cri } = this.opts;
    const results: SyncResult[] = [];
    let imageRef: string;
    let imageUser: ImageInfo;
    try {
      imageUser = await this.opts.images.ensure(pod, spec.name, spec.image, pullPolicyOf(spec), sandbox, signal);
      imageRef = imageUser.ref;
      results.push({ action: "PullImage", target: spec.image });
    } catch (err) {
      throwIfAgentStopping(signal);
      const e = err instanceof ImageError ? err : new ImageError("ErrImagePull", errorMessage(err));
      // Upstream startContainer (kuberuntime_container.go:215-219): "Error: <reason>" after the image manager's own event.
      this.opts.recorder.event(podEventRef(pod, spec.name), "Warning", "Failed", `Error: ${e.reason}`);
      results.push({ action: "PullImage", target: spec.image, error: { reason: e.reason, message: e.message } });
      // Tried again after upstream pod workers' error period (10 s, pod_workers.go:1523), not when the image's
      // back-off ends: a sync within the back-off waits with ImagePullBackOff and the previous pull's error.
      return { results, waiting: { reason: e.reason, message: e.message }, retryAfterMs: 10_000 };
    }
    let config;
    let userns: UserNamespace | undefined;
    try {
      verifyRunAsNonRoot(effectiveSecurityContext(pod, spec), imageUser);
      const mounts = await this.opts.host.containerMounts(pod, spec, podIP ? [podIP] : []);
      const envs = await containerEnv(pod, spec, {
        values: { podIP, ...(this.opts.config.hostIP ? { hostIP: this.opts.config.hostIP } : {}) },
        objects: this.opts.config.podObjects,
        allocatable: this.opts.config.nodeAllocatable,
        warn: (reason, message) => this.opts.recorder.event(podEventRef(pod), "Warning", reason, message),
        services: this.opts.config.serviceEnv,
      });
      // Upstream generateContainerConfig: the pod's user namespace again (read back from the pod's directory).
      userns = await this.opts.config.userNamespaces.forPod(pod, await this.opts.config.runtimeClasses.handlerFor(pod.spec.runtimeClassName));
      config = containerConfig(pod, spec, restartCount, imageRef, envs, this.opts.config.node, mounts, userns);
      config = withDevices(config, await this.opts.config.devices.runOptions(pod, spec.name));
      config.mounts = idmappedMounts(config.mounts, userns);
      const pidTarget = pidTargetOf(pod, spec.name, observed);
      if (pidTarget) joinPidNamespace(config, pidTarget);
      config.linux = { ...config.linux!, resources: criResources(this.opts.config.resources.resourcesOf(pod, spec)) };
      this.opts.host.ensureLogDirectory(posix.join(sandbox.logDirectory, spec.name));
    } catch (err) {
      const reason =
        err instanceof EnvError ||
        err instanceof PodObjectError ||
        err instanceof SecurityContextError ||
        err instanceof VolumeMountError ||
        err instanceof TargetContainerError ||
        err instanceof DeviceError ||
        err instanceof UserNamespaceError
          ? "CreateContainerConfigError"
          : "CreateContainerError";
      const message = runtimeMessage(err);
      this.opts.recorder.event(podEventRef(pod, spec.name), "Warning", "Failed", `Error: ${message}`);
      results.push({ action: "StartContainer", target: spec.name, error: { reason, message } });
      return { results, waiting: { reason, message }, retryAfterMs: 10_000 };
    }
    let id: string;
    try {
      id = await cri.createContainer(sandboxId, config, withUserNamespace(sandbox, userns));
      if (isResizable(pod, spec)) this.opts.resize?.setActuated(podUid(pod), spec.name, resourcesOf(spec));
      this.opts.recorder.event(podEventRef(pod, spec.name), "Normal", "Created", `Created container: ${spec.name}`);
    } catch (err) {
      // Upstream's events and statuses carry the runtime's words alone (grpc status Message(), kuberuntime_container.go:277-281).
      const message = runtimeMessage(err);
      this.opts.recorder.event(podEventRef(pod, spec.name), "Warning", "Failed", `Error: ${message}`);
      results.push({ action: "StartContainer", target: spec.name, error: { reason: "CreateContainerError", message } });
      return { results, waiting: { reason: "CreateContainerError", message }, retryAfterMs: 10_000 };
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
      // postStart runs before the container is reported running, with no time limit; a failure kills it (upstream).
      const postStart = hookOf(spec, "postStart");
      const failure = postStart
        ? await runHook(postStart, {
            cri,
            clock: this.opts.clock,
            pod,
            container: spec,
            containerId: id,
            podIP: runtimePodIP,
            timeoutSeconds: undefined,
            warn: (reason, message) => this.opts.recorder.event(podEventRef(pod), "Warning", reason, message),
            ...(signal ? { signal } : {}),
          })
        : undefined;
      if (failure) {
        // The agent stops: upstream's kubelet exits with the hook under way, and its container runs on.
        throwIfAgentStopping(signal);
        // Upstream leaves the hook's message out of the event: its output may hold secrets. The log and the result keep it.
        this.opts.logger.warn("postStart hook failed", { pod: pod.metadata.name, container: spec.name, message: failure });
        this.opts.recorder.event(podEventRef(pod, spec.name), "Warning", "FailedPostStartHook", "PostStartHook failed");
        // Abandoned because the pod must stop: its termination, next, kills the container within the pod's
        // grace period (upstream's kill here runs under the cancelled context and does nothing).
        if (signal?.aborted) this.opts.logger.info("postStart hook abandoned: the pod must stop", { pod: pod.metadata.name, container: spec.name });
        else results.push(await this.stop({ pod, id, name: spec.name, graceSeconds: pod.spec.terminationGracePeriodSeconds ?? 30, why: "FailedPostStartHook", podIP: "" }));
        results.push({ action: "StartContainer", target: spec.name, error: { reason: "PostStartHookError", message: failure } });
        // The killed container waits with the hook's failure until it is started again (upstream's reason
        // cache, kubelet_pods.go convertToAPIContainerStatuses), unless it will not be.
        return { results, ...(willRestart(pod, spec) && !signal?.aborted ? { waiting: { reason: "PostStartHookError", message: failure } } : {}) };
      }
      results.push({ action: "StartContainer", target: spec.name });
      return { results };
    } catch (err) {
      throwIfAgentStopping(signal);
      this.opts.metrics.containerStarted(containerType, "RunContainerError");
      const message = runtimeMessage(err);
      // Upstream recordContainerEvent: the event names the container, not its ID (kuberuntime_container.go:96-101, 292-296).
      this.opts.recorder.event(podEventRef(pod, spec.name), "Warning", "Failed", `Error: ${message.replaceAll(id, spec.name)}`);
      // The container stays, exited as the runtime says (containerd: StartError, 128); it waits with
      // RunContainerError until the crash-loop backoff governs the retry, when it will be restarted (upstream reasonCache).
      results.push({ action: "StartContainer", target: spec.name, error: { reason: "RunContainerError", message } });
      return { results, ...(willRestart(pod, spec) ? { waiting: { reason: "RunContainerError", message } } : {}) };
    }
  }
  /**
   * Stops a container: its preStop hook first, then the runtime's stop with what is left of the grace period.
   * Without the pod's spec (an orphan) the hook is the one the container's annotations restore, as upstream's.
   */
  async stop({ pod, id, name, graceSeconds, why, change, podIP, restored }: ContainerStop): Promise<SyncResult> {
    const meta = "metadata" in pod ? pod.metadata : pod;
    this.opts.recorder.event(
      podEventRef("spec" in pod ? pod : { metadata: meta }, name),
      "Normal",
      "Killing",
      why && /^(Init c|C)ontainer /.test(why) ? why : `Stopping container ${name}`,
    );
    if (why) this.opts.logger.info("stopping container", { pod: `${meta.namespace}/${meta.name}`, container: name, why, ...(change !== undefined ? { change } : {}) });
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
      const failure = await runHook(preStop, {
        cri: this.opts.cri,
        clock: this.opts.clock,
        pod: specPod,
        container: spec!,
        containerId: id,
        podIP,
        timeoutSeconds: graceSeconds,
        warn: (reason, message) => this.opts.recorder.event(podEventRef(specPod), "Warning", reason, message),
      });
      if (failure) {
        // As postStart's: the message, which may hold secrets, goes to the log only.
        this.opts.logger.warn("preStop hook failed", { pod: specPod.metadata.name, container: name, message: failure });
        this.opts.recorder.event(podEventRef(specPod, name), "Warning", "FailedPreStopHook", "PreStopHook failed");
      }
      const spent = Math.floor((this.opts.clock.now() - started) / 1000);
      graceSeconds = Math.max(MINIMUM_GRACE_AFTER_PRESTOP_SECONDS, graceSeconds - spent);
    }
    try {
      // Upstream killContainer (kuberuntime_container.go:863-865): every stop gets at least
      // minimumGracePeriodInSeconds, a probe's terminationGracePeriodSeconds: 1 and a zero grace too.
      await this.opts.cri.stopContainer(id, Math.max(MINIMUM_GRACE_AFTER_PRESTOP_SECONDS, graceSeconds));
      return { action: "KillContainer", target: name };
    } catch (err) {
      if (isNotFound(err)) return { action: "KillContainer", target: name };
      return { action: "KillContainer", target: name, error: { reason: "KillContainerError", message: errorMessage(err) } };
    }
  }
  /**
   * Upstream doPodResizeAction: what grows in the pod cgroup grows before
   * the containers, what shrinks shrinks after them, so the pod limit never
   * falls below the sum of its containers'; containers whose memory limit
   * shrinks go first. Each container is updated through the CRI
   * (UpdateContainerResources) and recorded as applied once the runtime took it.
   */
  async resizeInPlace(pod: Pod, targets: { id: string; name: string }[]): Promise<SyncResult[]> {
    const uid = podUid(pod);
    const applied = (name: string) => this.opts.resize?.actuated(uid, name);
    const plan = podResizeSteps(pod, applied);
    const results: SyncResult[] = [];
    const fail = (target: string, err: unknown): SyncResult[] => {
      this.opts.logger.warn("pod resize failed", { pod: pod.metadata.name, target, err: errorMessage(err) });
      // The PodResizeInProgress condition's message: upstream's errResize.Error() of the cri-client's error as it
      // returns it (kuberuntime_manager.go:850-870, kubelet.go:2106; cri-client remote_runtime.go:487-489).
      return [...results, { action: "ResizePodInPlace", target, error: { reason: "ResizePodInPlaceError", message: goRpcError(err) } }];
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
        const r = this.opts.config.resources.resourcesOf(pod, spec);
        await this.opts.cri.updateContainerResources(t.id, criResources(r));
        this.opts.resize?.setActuated(uid, t.name, resourcesOf(spec));
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
}
