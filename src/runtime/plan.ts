/**
 * planPod: a pure function of (desired pod, observed pod, backoff view) that
 * says what must happen next, after upstream's computePodActions. The
 * executor (manager.ts) carries it out; tests check plans case by case.
 */
import type { ProbeFailure } from "../prober/types.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { resizeAction, type ContainerResources } from "./container-resources.ts";
import { containerHash, specChange } from "./hash.ts";
import type { ObservedContainer, ObservedPod } from "./types.ts";
import { restartPolicyOf, isSidecar } from "../pods/spec.ts";
import { currentSandbox } from "./observed.ts";

export interface ContainerStart {
  name: string;
  restartCount: number;
  reason: string;
  /** When restarting a dead container: its finish time, which the backoff is counted from. */
  previousFinishedAt?: number;
}

export interface ContainerKill {
  id: string;
  name: string;
  reason: string;
  /** A failed probe's own terminationGracePeriodSeconds, which overrides the pod's for this kill. */
  gracePeriodSeconds?: number;
  /** What of a changed spec differs (logged with the kill; upstream's event message does not name it). */
  change?: string;
}

/** A running container whose cpu or memory is changed in place (CRI UpdateContainerResources). */
export interface ContainerResize {
  id: string;
  name: string;
}

export interface ContainerWaiting {
  name: string;
  reason: "CrashLoopBackOff";
  remainingMs: number;
}

export interface PodActions {
  /** Stop every container and sandbox of the pod before anything else. */
  killPod: boolean;
  createSandbox: boolean;
  /** Why the newest sandbox is not kept, when it is not (logged with the kill, as upstream does). */
  sandboxChange?: SandboxChange;
  /** The ready sandbox to start containers in, when it is kept. */
  sandboxId?: string;
  /** Attempt number of the sandbox to create. */
  sandboxAttempt: number;
  containersToStart: ContainerStart[];
  containersToKill: ContainerKill[];
  /** In-place resizes, applied with the pod cgroup in upstream's order (manager.ts). */
  containersToResize: ContainerResize[];
  waiting: ContainerWaiting[];
  /** A regular init container failed and will not be restarted (restartPolicy Never): the pod fails. */
  initFailed: boolean;
}

/** The plan starts, stops or resizes something, or a container waits in its back-off (the pod is due again when it ends). */
export function hasWork(actions: PodActions): boolean {
  return (
    actions.killPod ||
    actions.createSandbox ||
    actions.containersToStart.length > 0 ||
    actions.containersToKill.length > 0 ||
    actions.containersToResize.length > 0 ||
    actions.waiting.length > 0
  );
}

/** The read side of the crash-loop backoff the planner needs. */
export interface BackoffView {
  remainingSince(key: string, eventTime: number): number;
}

/** What the runtime last applied to each container (allocation/); a running container whose spec differs is resized. */
export interface ResizeView {
  actuated(containerName: string): ContainerResources | undefined;
}

/**
 * The prober's startup verdict on one container instance: its startupProbe
 * succeeded. False while the probe has not succeeded yet or has not run.
 */
export interface StartupView {
  started(containerName: string, containerId: string): boolean;
}

/** Running containers the prober found unhealthy (liveness or startup failed): container ID → failure. */
export type Unhealthy = ReadonlyMap<string, ProbeFailure>;

export const backoffKey = (pod: Pod, container: ContainerSpec): string => `${pod.metadata.uid}/${container.name}/${containerHash(container)}`;

/** Upstream ShouldContainerBeRestarted, for a container that is not running. */
export function shouldRestart(pod: Pod, latest: ObservedContainer | undefined): boolean {
  if (!latest || latest.state === "created" || latest.state === "unknown") return true;
  switch (restartPolicyOf(pod)) {
    case "Always":
      return true;
    case "OnFailure":
      return latest.exitCode !== 0;
    case "Never":
      return false;
  }
}

const latestByName = (observed: ObservedPod, name: string) => observed.containers.find((c) => c.name === name);

export type SandboxChange = "no sandbox" | "sandbox not ready" | "sandbox has no IP";

/** Why the pod needs a new sandbox (upstream podSandboxChanged), or undefined when its newest one is kept. */
export function sandboxChange(pod: Pod, observed: ObservedPod): SandboxChange | undefined {
  const newest = observed.sandboxes[0];
  if (!newest) return "no sandbox";
  if (!newest.ready) return "sandbox not ready";
  // A pod network without an address is broken; upstream recreates it.
  return !pod.spec.hostNetwork && !newest.ip ? "sandbox has no IP" : undefined;
}

/** Upstream: regular init containers restart like OnFailure unless the pod never restarts; sidecars always. */
const policyFor = (pod: Pod, container: ContainerSpec, kind: "init" | "app"): "Always" | "OnFailure" | "Never" => {
  if (kind === "app") return restartPolicyOf(pod);
  if (container.restartPolicy === "Always") return "Always";
  return restartPolicyOf(pod) === "Never" ? "Never" : "OnFailure";
};

type Decision = "running" | "starting" | "waiting" | "succeeded" | "failed";

/**
 * The Killing message for a probe failure, upstream's words: an app container's
 * says ", will be restarted" unless the pod never restarts
 * (kuberuntime_manager.go:1163-1183); a sidecar's is "Init container ..."
 * without it (kuberuntime_container.go:1118,1161).
 */
function probeKillMessage(container: ContainerSpec, probe: ProbeFailure["probe"], policy: "Always" | "OnFailure" | "Never"): string {
  if (isSidecar(container)) return `Init container ${container.name} failed ${probe} probe`;
  return `Container ${container.name} failed ${probe} probe${policy === "Never" ? "" : ", will be restarted"}`;
}

/** One container's next step under `policy`; adds its kills and starts to `actions`. */
function decide(
  pod: Pod,
  container: ContainerSpec,
  kind: "init" | "app",
  latest: ObservedContainer | undefined,
  policy: "Always" | "OnFailure" | "Never",
  backoff: BackoffView,
  actions: PodActions,
  unhealthy: Unhealthy,
): Decision {
  if (latest?.state === "running") {
    const failedProbe = unhealthy.get(latest.id);
    if (failedProbe !== undefined) {
      // Upstream: a failed liveness probe kills the container (within the probe's own
      // terminationGracePeriodSeconds when it has one); it starts again at once (policy allowing).
      const grace = failedProbe.gracePeriodSeconds !== undefined ? { gracePeriodSeconds: failedProbe.gracePeriodSeconds } : {};
      const message = probeKillMessage(container, failedProbe.probe, policy);
      actions.containersToKill.push({ id: latest.id, name: container.name, reason: message, ...grace });
      if (policy === "Never") return "failed";
      actions.containersToStart.push({ name: container.name, restartCount: latest.restartCount + 1, reason: message });
      return "starting";
    }
    // Upstream waits for a running regular init container whatever its spec (computeInitContainerActions).
    if (kind === "init" && !isSidecar(container)) return "running";
    const change = specChange(container, latest);
    if (change === undefined) return "running";
    // Upstream's Killing messages (kuberuntime_container.go:1140, kuberuntime_manager.go:1157,1182): an app
    // container restarts whatever the policy; what changed goes to the log only.
    const reason = isSidecar(container) ? `Init container ${container.name} definition changed` : `Container ${container.name} definition changed, will be restarted`;
    actions.containersToKill.push({ id: latest.id, name: container.name, reason, change });
    actions.containersToStart.push({ name: container.name, restartCount: latest.restartCount + 1, reason });
    return "starting";
  }
  if (latest?.state === "unknown") {
    actions.containersToKill.push({ id: latest.id, name: container.name, reason: "container state is unknown" });
  }
  const restart = !latest || latest.state === "created" || latest.state === "unknown" || policy === "Always" || (policy === "OnFailure" && latest.exitCode !== 0);
  if (!restart) return latest?.exitCode === 0 ? "succeeded" : "failed";
  if (latest?.state === "exited" && latest.finishedAt !== undefined) {
    const remainingMs = backoff.remainingSince(backoffKey(pod, container), latest.finishedAt);
    if (remainingMs > 0) {
      actions.waiting.push({ name: container.name, reason: "CrashLoopBackOff", remainingMs });
      return "waiting";
    }
  }
  actions.containersToStart.push({
    name: container.name,
    restartCount: latest ? latest.restartCount + 1 : 0,
    reason: latest ? `container exited (${latest.reason ?? "exit code " + latest.exitCode})` : "container is not created",
    ...(latest?.state === "exited" && latest.finishedAt !== undefined ? { previousFinishedAt: latest.finishedAt } : {}),
  });
  return "starting";
}

/**
 * `startup` answers for sidecars with a startupProbe; without it (no prober)
 * every running sidecar counts as started.
 */
export function planPod(pod: Pod, observed: ObservedPod, backoff: BackoffView, unhealthy: Unhealthy = new Map(), resize?: ResizeView, startup?: StartupView): PodActions {
  const newest = observed.sandboxes[0];
  const initContainers = pod.spec.initContainers ?? [];
  const actions: PodActions = {
    killPod: false,
    createSandbox: false,
    sandboxAttempt: newest ? newest.attempt + 1 : 0,
    containersToStart: [],
    containersToKill: [],
    containersToResize: [],
    waiting: [],
    initFailed: false,
  };

  const change = sandboxChange(pod, observed);
  if (change) {
    actions.sandboxChange = change;
    const hasRuntimeState = observed.sandboxes.length > 0 || observed.containers.length > 0;
    actions.killPod = observed.sandboxes.some((s) => s.ready) || observed.containers.some((c) => c.state === "running");
    // A pod that must not restart, whose sandbox died after containers ran, stays down.
    if (restartPolicyOf(pod) === "Never" && hasRuntimeState && observed.containers.length > 0) return actions;
    const restartCount = (name: string) => {
      const latest = latestByName(observed, name);
      return latest ? latest.restartCount + 1 : 0;
    };
    const reason = newest ? "pod sandbox changed" : "new pod";
    if (initContainers.length) {
      // A new sandbox runs the init containers again, from the first.
      actions.containersToStart.push({ name: initContainers[0]!.name, restartCount: restartCount(initContainers[0]!.name), reason });
    } else {
      for (const container of pod.spec.containers) {
        const latest = latestByName(observed, container.name);
        if (latest && latest.state === "exited" && !shouldRestart(pod, latest)) continue;
        actions.containersToStart.push({ name: container.name, restartCount: restartCount(container.name), reason });
      }
    }
    // OnFailure with every container succeeded: nothing left to run.
    actions.createSandbox = actions.containersToStart.length > 0 || !hasRuntimeState;
    return actions;
  }

  actions.sandboxId = newest!.id;
  const ephemeral = pod.spec.ephemeralContainers ?? [];
  const wanted = new Set([...initContainers, ...pod.spec.containers, ...ephemeral].map((c) => c.name));
  for (const c of observed.containers) {
    if (c.state === "running" && !wanted.has(c.name)) {
      actions.containersToKill.push({ id: c.id, name: c.name, reason: "container is not in the pod spec" });
    }
  }
  // Upstream: ephemeral containers start even before initialization is complete, once, and are
  // never restarted (any container of that name, in any sandbox, counts as having run).
  for (const container of ephemeral) {
    if (!latestByName(observed, container.name)) {
      actions.containersToStart.push({ name: container.name, restartCount: 0, reason: "ephemeral container is not created" });
    }
  }
  // Init containers, in order, judged by what ran in this sandbox: a regular one must succeed,
  // a sidecar must be running and started (its startupProbe succeeded, when it has one: upstream
  // computeInitContainerActions), before the next starts. Once app containers ran the pod is
  // initialized: regular init containers are done, and a sidecar that restarts holds nothing back.
  const { here: inSandbox, appStarted } = currentSandbox(pod, observed);
  for (const container of initContainers) {
    if (!isSidecar(container) && appStarted) continue;
    const latest = latestByName(inSandbox, container.name);
    const decision = decide(pod, container, "init", latest, policyFor(pod, container, "init"), backoff, actions, unhealthy);
    // Sidecars are resized like regular containers (upstream, 1.33+).
    if (isSidecar(container) && decision === "running" && latest && resize) planResize(container, latest, resize.actuated(container.name), actions);
    if (appStarted) continue;
    if (isSidecar(container) ? decision === "running" && sidecarStarted(container, latest!, startup) : decision === "succeeded") continue;
    if (decision === "failed") actions.initFailed = true;
    return actions;
  }
  let appsGoingOn = false;
  for (const container of pod.spec.containers) {
    const latest = latestByName(observed, container.name);
    const decision = decide(pod, container, "app", latest, policyFor(pod, container, "app"), backoff, actions, unhealthy);
    if (decision === "running" && latest && resize) planResize(container, latest, resize.actuated(container.name), actions);
    // Kept running, or started now or after its back-off (upstream's ContainersToStart has it either way).
    if (decision === "running" || decision === "starting" || decision === "waiting") appsGoingOn = true;
  }
  // Upstream computePodActions (kuberuntime_manager.go:1196-1201): with no app container kept or to start, the pod
  // is killed, sidecars and sandbox included, and no sidecar restarts; its phase then follows from the ends.
  if (!appsGoingOn) {
    actions.killPod = true;
    actions.containersToStart = actions.containersToStart.filter((s) => !initContainers.some((c) => c.name === s.name));
  }
  return actions;
}

/** A running sidecar is started once its startupProbe succeeded; one without a startupProbe at once. */
const sidecarStarted = (container: ContainerSpec, latest: ObservedContainer, startup: StartupView | undefined): boolean =>
  (container as Record<string, unknown>).startupProbe == null || startup === undefined || startup.started(container.name, latest.id);

/**
 * Upstream computePodResizeAction: a running container whose allocated cpu
 * or memory differs from what was applied is resized in place, or restarted
 * when its resizePolicy says RestartContainer for a resource that changed.
 * Unknown applied resources (nothing recorded) are taken as in the spec.
 */
function planResize(container: ContainerSpec, latest: ObservedContainer, actuated: ContainerResources | undefined, actions: PodActions): void {
  if (!actuated) return;
  const action = resizeAction(container, actuated);
  if (action === "inPlace") actions.containersToResize.push({ id: latest.id, name: container.name });
  if (action === "restart") {
    const reason = `Container ${container.name} resize requires restart`;
    actions.containersToKill.push({ id: latest.id, name: container.name, reason });
    actions.containersToStart.push({ name: container.name, restartCount: latest.restartCount + 1, reason });
  }
}

/** True when the plan changes nothing: the pod is converged. */
export const isNoop = (a: PodActions): boolean =>
  !a.killPod && !a.createSandbox && a.containersToStart.length === 0 && a.containersToKill.length === 0 && a.containersToResize.length === 0;
