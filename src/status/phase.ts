/**
 * Pod phase and container statuses computed from what the runtime shows,
 * after upstream's getPhase and convertToAPIContainerStatuses (the subset
 * the agent has the facts for so far).
 */
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { ObservedContainer, ObservedPod } from "../runtime/types.ts";
import { isSidecar, restartPolicyOf } from "../pods/spec.ts";
import { currentSandbox } from "../runtime/observed.ts";
import { podUid } from "../pods/identity.ts";
import { isApiPod } from "../pods/source.ts";

export type PodPhase = "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";

export type ContainerStateView =
  /** No reason: upstream's empty waiting state (`waiting: {}`) of a container created but not started, or in an unknown state. */
  | { waiting: { reason?: string; message?: string } }
  | { running: { startedAt: string } }
  /** No containerID: a termination inferred from a container the runtime lost (upstream sets none then). */
  | { terminated: { exitCode: number; reason: string; message?: string; startedAt?: string; finishedAt?: string; containerID?: string } };

export interface ContainerStatusView {
  name: string;
  state: ContainerStateView;
  lastState: ContainerStateView | Record<string, never>;
  ready: boolean;
  started: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  containerID?: string;
  /** In-place resize: the requests allocated to the container (cpu, memory). */
  allocatedResources?: Record<string, string | number>;
  /** In-place resize: the cpu and memory the runtime applied to the running container. */
  resources?: { requests?: Record<string, string | number>; limits?: Record<string, string | number> };
}

export interface PodStatusView {
  phase: PodPhase;
  /** Init containers not yet done (Initialized is False while any are), in spec order. */
  initPending?: string[];
  initContainerStatuses?: ContainerStatusView[];
  /** The newest sandbox is ready with its network (PodReadyToStartContainers). */
  sandboxReady: boolean;
  podIP?: string;
  podIPs: { ip: string }[];
  startTime?: string;
  containerStatuses: ContainerStatusView[];
  /** Ephemeral containers (kubectl debug); never ready (upstream probes only regular containers). */
  ephemeralContainerStatuses?: ContainerStatusView[];
  /** In-place resize: a resize waiting (PodResizePending) or being applied (PodResizeInProgress; `error` when the last attempt failed). */
  resize?: { pending?: { reason: "Infeasible" | "Deferred"; message: string }; inProgress?: { error?: string } };
  reason?: string;
  message?: string;
}

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

function stateOf(c: ObservedContainer): ContainerStateView {
  switch (c.state) {
    case "running":
      return { running: { startedAt: iso(c.startedAt ?? c.createdAt)! } };
    case "exited":
      return {
        terminated: {
          exitCode: c.exitCode ?? 0,
          reason: c.reason || (c.exitCode === 0 ? "Completed" : "Error"),
          ...(c.message ? { message: c.message } : {}),
          ...(c.startedAt ? { startedAt: iso(c.startedAt) } : {}),
          ...(c.finishedAt ? { finishedAt: iso(c.finishedAt) } : {}),
          containerID: `containerd://${c.id}`,
        },
      };
    // Upstream convertContainerStatus (kubelet_pods.go:2136-2170): created and unknown containers are "waiting to
    // be running" with no reason, unless an unknown one was running before (containerStatuses).
    case "created":
    case "unknown":
      return { waiting: {} };
  }
}

/** Upstream's reason and exit code for a container the runtime lost track of after it ran (kubelet_pods.go:2150-2154, 2332-2336). */
export const CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown";
const LOST_EXIT_CODE = 137;
/** The container is in an unknown state now, and was running at the previous status. */
export const LOST_WHILE_TERMINATING = "The container could not be located when the pod was terminated";
/** The runtime has no record of the container now, and it was running at the previous status (two spaces: upstream's). */
export const LOST_WHILE_DELETING = "The container could not be located when the pod was deleted.  The container used to be Running";

/**
 * Upstream ShouldContainerBeRestarted (container/helpers.go:82-118) as
 * convertToAPIContainerStatuses asks it: only a container that will be
 * started again shows its last start failure; by the pod's restartPolicy,
 * never once the pod is being deleted, and not an init container that succeeded.
 */
function shownWaiting(pod: Pod, latest: ObservedContainer | undefined, isInit: boolean): boolean {
  if ((pod.metadata as { deletionTimestamp?: string }).deletionTimestamp) return false;
  if (!latest || latest.state === "created" || latest.state === "unknown") return true;
  if (latest.state === "running") return false;
  if (isInit && latest.exitCode === 0) return false;
  const policy = restartPolicyOf(pod);
  return policy === "Always" || (policy === "OnFailure" && latest.exitCode !== 0);
}

/** Why each container's last start failed (CrashLoopBackOff, ErrImagePull...), kept until it starts (the syncer's reason cache), by container. */
export type WaitingReasons = ReadonlyMap<string, { reason: string; message?: string }>;

/** Probe verdicts for running containers; without probes, running means ready and started. */
export interface ProbeView {
  isReady(podUid: string, container: string): boolean;
  isStarted(podUid: string, container: string): boolean;
}

/**
 * Which init containers are not done, judged in the newest sandbox like the
 * planner: a regular one until it succeeded, a sidecar until it runs and (with
 * a startupProbe, when `probes` are given) is started, as upstream's
 * Initialized condition. Once an app container ran there, all count as done.
 */
export function initProgress(pod: Pod, observed: ObservedPod, probes?: Pick<ProbeView, "isStarted">): { pending: string[]; failed: boolean } {
  const { here, appStarted } = currentSandbox(pod, observed);
  const started = (spec: ContainerSpec) => (spec as Record<string, unknown>).startupProbe == null || (probes?.isStarted(podUid(pod), spec.name) ?? true);
  const pending: string[] = [];
  let failed = false;
  for (const spec of pod.spec.initContainers ?? []) {
    const latest = here.containers.find((c) => c.name === spec.name);
    const sidecar = isSidecar(spec);
    // Once app containers ran, the pod stays initialized (a restarting sidecar does not undo that).
    if (appStarted || (sidecar ? latest?.state === "running" && started(spec) : latest?.state === "exited" && latest.exitCode === 0)) continue;
    if (!sidecar && restartPolicyOf(pod) === "Never" && latest?.state === "exited") failed = true;
    pending.push(spec.name);
  }
  return { pending, failed };
}

/** What upstream's convertToAPIContainerStatuses reads of the previous status: the containers' states and restart counts. */
export type PreviousStatuses = Partial<Pick<PodStatusView, "containerStatuses" | "initContainerStatuses" | "ephemeralContainerStatuses">>;

/**
 * Upstream convertToAPIContainerStatuses: a container the runtime has no
 * record of waits with reason PodInitializing in a pod with init containers
 * (init and app containers alike), ContainerCreating otherwise, unless its
 * last start failed (ErrImagePull...) and it will be started again.
 * `previous`: the containers' previous statuses; a container that was
 * running then and is lost now shows it ended (ContainerStatusUnknown).
 */
export function containerStatuses(
  pod: Pod,
  observed: ObservedPod,
  waiting: WaitingReasons,
  specs = pod.spec.containers,
  probes?: ProbeView,
  previousStatuses: readonly ContainerStatusView[] = [],
): ContainerStatusView[] {
  const uid = podUid(pod);
  const notCreated = pod.spec.initContainers?.length ? "PodInitializing" : "ContainerCreating";
  const isInit = specs === pod.spec.initContainers;
  return specs.map((spec) => {
    const [latest, previous] = observed.containers.filter((c) => c.name === spec.name);
    // The API server's copy may come from any writer (a manifest's status, an older agent): missing parts read as empty.
    const found = previousStatuses.find((s) => s.name === spec.name);
    const before = found && { ...found, state: found.state ?? {}, lastState: found.lastState ?? {}, restartCount: found.restartCount ?? 0 };
    const wasRunning = before !== undefined && "running" in before.state;
    const waitingReason = shownWaiting(pod, latest, isInit) ? waiting.get(spec.name) : undefined;
    const base = { name: spec.name, image: spec.image, imageID: latest?.imageRef ?? "", restartCount: latest?.restartCount ?? 0 };
    if (!latest) {
      // Upstream keeps the previous restart count and last state of a container it has no record of, and
      // its previous termination whole (kubelet_pods.go:2281-2290); one that was running ended unseen (2295-2342).
      if (before && "terminated" in before.state) return waitingReason ? { ...before, state: { waiting: waitingReason }, lastState: before.state } : before;
      const lost = wasRunning && !("terminated" in before.lastState);
      const restartCount = (before?.restartCount ?? 0) + (lost && !(pod.metadata as { deletionTimestamp?: string }).deletionTimestamp ? 1 : 0);
      const lastState = lost ? { terminated: { exitCode: LOST_EXIT_CODE, reason: CONTAINER_STATUS_UNKNOWN, message: LOST_WHILE_DELETING } } : (before?.lastState ?? {});
      return { ...base, restartCount, state: { waiting: waitingReason ?? { reason: notCreated } }, lastState, ready: false, started: false };
    }
    // Upstream: an unknown container that was running ended unseen; not "never ran", so no waiting (kubelet_pods.go:2145-2157).
    const lost = latest.state === "unknown" && wasRunning;
    const current: ContainerStateView = lost ? { terminated: { exitCode: LOST_EXIT_CODE, reason: CONTAINER_STATUS_UNKNOWN, message: LOST_WHILE_TERMINATING } } : stateOf(latest);
    const restartCount = lost ? before.restartCount + 1 : base.restartCount;
    return {
      ...base,
      restartCount,
      containerID: `containerd://${latest.id}`,
      state: waitingReason ? { waiting: waitingReason } : current,
      // A waiting reason replaces only a termination as the last state (kubelet_pods.go:2461-2463).
      lastState: waitingReason && "terminated" in current ? current : previous ? stateOf(previous) : {},
      ready: latest.state === "running" && (probes?.isReady(uid, spec.name) ?? true),
      started: latest.state === "running" && (probes?.isStarted(uid, spec.name) ?? true),
    };
  });
}

/** What upstream's getPhase reads of a container's status (the API server's copy may lack parts). */
export type PhaseInput = Pick<ContainerStatusView, "name"> & {
  state?: ContainerStatusView["state"] | Record<string, never>;
  lastState?: ContainerStatusView["lastState"];
  started?: boolean;
};

/**
 * Upstream getPhase (kubelet_pods.go:1654-1862), from the API container
 * statuses (app and init): a regular init container not done keeps the pod
 * Pending, a failed one fails it under restartPolicy Never; a sidecar counts
 * as running while it runs and keeps the pod Pending until it is started
 * (not once the pod initialized: `podHasInitialized`, an app container ran
 * in the current sandbox), a stopped one not at all; an app container that
 * ran and waits to restart counts as stopped. A terminal pod whose
 * containers all stopped is Succeeded or Failed, unless it is a static pod
 * (upstream's TODO #116484). ContainerRestartRules (alpha, off) is not applied.
 */
export function getPhase(pod: Pod, info: readonly PhaseInput[], podIsTerminal: boolean, podHasInitialized: boolean): PodPhase {
  const statusOf = (name: string) => info.find((s) => s.name === name);
  const is = (state: PhaseInput["state"] | undefined, kind: "running" | "terminated" | "waiting") => !!state && kind in state;
  const exitOf = (state: PhaseInput["state"] | undefined) => (state && "terminated" in state ? state.terminated.exitCode : 0);
  let pendingRegularInit = 0;
  let pendingSidecars = 0;
  let failedInitialization = 0;
  for (const container of pod.spec.initContainers ?? []) {
    if (isSidecar(container)) continue;
    const status = statusOf(container.name);
    if (!status) pendingRegularInit++;
    else if (is(status.state, "running")) pendingRegularInit++;
    else if (is(status.state, "terminated")) failedInitialization += exitOf(status.state) !== 0 ? 1 : 0;
    else if (is(status.state, "waiting") && is(status.lastState, "terminated")) failedInitialization += exitOf(status.lastState) !== 0 ? 1 : 0;
    else pendingRegularInit++;
  }
  let unknown = 0;
  let running = 0;
  let waiting = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const container of pod.spec.initContainers ?? []) {
    if (!isSidecar(container)) continue;
    const status = statusOf(container.name);
    if (!status) unknown++;
    else if (is(status.state, "running")) {
      if (status.started !== true) pendingSidecars++;
      running++;
    } else if (is(status.state, "terminated")) {
      // A stopped sidecar does not count for the phase.
    } else if (is(status.state, "waiting")) {
      if (!is(status.lastState, "terminated")) {
        pendingSidecars++;
        waiting++;
      }
    } else {
      pendingSidecars++;
      unknown++;
    }
  }
  for (const container of pod.spec.containers) {
    const status = statusOf(container.name);
    if (!status) unknown++;
    else if (is(status.state, "running")) running++;
    else if (is(status.state, "terminated")) {
      stopped++;
      if (exitOf(status.state) === 0) succeeded++;
    } else if (is(status.state, "waiting")) {
      if (is(status.lastState, "terminated")) stopped++;
      else waiting++;
    } else unknown++;
  }
  const policy = restartPolicyOf(pod);
  if (failedInitialization > 0 && policy === "Never") return "Failed";
  if (pendingRegularInit > 0 || (pendingSidecars > 0 && !podHasInitialized) || waiting > 0) return "Pending";
  if (running > 0 && unknown === 0) return "Running";
  if (running === 0 && stopped > 0 && unknown === 0) {
    if (podIsTerminal && isApiPod(pod)) return stopped === succeeded ? "Succeeded" : "Failed";
    if (policy === "Always") return "Running";
    if (stopped === succeeded) return "Succeeded";
    if (policy === "Never") return "Failed";
    return "Running";
  }
  return "Pending";
}

/** The phase of the pod the runtime shows, as podStatus computes it (tests and callers without the statuses at hand). */
export function podPhase(pod: Pod, observed: ObservedPod, podIsTerminal = false): PodPhase {
  return podStatus(pod, observed, new Map(), podIsTerminal).phase;
}

/**
 * Upstream prober manager UpdatePodStatus: a regular init container is ready
 * once it exited with code 0 (not while it runs); a sidecar (restartPolicy
 * Always) while it runs, started, and passing its readiness probe, as an app container.
 */
function initContainerStatuses(pod: Pod, observed: ObservedPod, waiting: WaitingReasons, probes?: ProbeView, previous?: readonly ContainerStatusView[]): ContainerStatusView[] {
  const specs = pod.spec.initContainers ?? [];
  return containerStatuses(pod, observed, waiting, specs, probes, previous).map((status, i) => {
    if (isSidecar(specs[i]!)) return status;
    return { ...status, ready: "terminated" in status.state && status.state.terminated.exitCode === 0 };
  });
}

const NEVER_READY: ProbeView = { isReady: () => false, isStarted: () => true };

export const isTerminalPhase = (phase: PodPhase): boolean => phase === "Succeeded" || phase === "Failed";

export function podStatus(pod: Pod, observed: ObservedPod, waiting: WaitingReasons, podIsTerminal = false, probes?: ProbeView, previous: PreviousStatuses = {}): PodStatusView {
  const sandbox = observed.sandboxes[0];
  const ips = sandbox?.ip ? [sandbox.ip, ...sandbox.additionalIps] : [];
  const init = initProgress(pod, observed, probes);
  // App containers wait with reason PodInitializing until the init containers are done, as upstream.
  const appWaiting: WaitingReasons = init.pending.length ? new Map(pod.spec.containers.map((c) => [c.name, waiting.get(c.name) ?? { reason: "PodInitializing" }])) : waiting;
  const apps = containerStatuses(pod, observed, appWaiting, pod.spec.containers, probes, previous.containerStatuses);
  const inits = pod.spec.initContainers?.length ? initContainerStatuses(pod, observed, waiting, probes, previous.initContainerStatuses) : undefined;
  return {
    phase: getPhase(pod, [...apps, ...(inits ?? [])], podIsTerminal, currentSandbox(pod, observed).appStarted),
    ...(inits ? { initPending: init.pending, initContainerStatuses: inits } : {}),
    sandboxReady: !!sandbox?.ready && (ips.length > 0 || !!pod.spec.hostNetwork),
    ...(ips[0] ? { podIP: ips[0] } : {}),
    podIPs: ips.map((ip) => ({ ip })),
    ...(sandbox ? { startTime: iso(sandbox.createdAt) } : {}),
    containerStatuses: apps,
    ...(pod.spec.ephemeralContainers?.length
      ? { ephemeralContainerStatuses: containerStatuses(pod, observed, waiting, pod.spec.ephemeralContainers, NEVER_READY, previous.ephemeralContainerStatuses) }
      : {}),
  };
}

/** Upstream's `State.Waiting != nil`: a state of none of the three (`{}`) is not waiting. */
const isWaiting = (state: ContainerStateView | Record<string, never> | undefined): boolean => !!state && "waiting" in state;
const isTerminated = (state: ContainerStateView | Record<string, never> | undefined): boolean => !!state && "terminated" in state;

/**
 * Upstream hasPodInitialized (status_manager.go:622-660), read from the pod
 * object's own status (the API server's copy; none for a static pod):
 * without init containers, or once a container left waiting, or the last
 * init container completed (a sidecar: ran and started).
 */
function hasPodInitialized(pod: Pod): boolean {
  const inits = pod.spec.initContainers ?? [];
  if (!inits.length) return true;
  const status = (pod.status ?? {}) as PreviousStatuses;
  if ((status.containerStatuses ?? []).some((c) => isTerminated(c.lastState) || !isWaiting(c.state))) return true;
  const initStatuses = status.initContainerStatuses ?? [];
  const last = initStatuses[initStatuses.length - 1];
  // Upstream finds the last status's container by its index in the spec.
  const spec = inits[initStatuses.length - 1];
  if (!last || !spec) return false;
  if (isSidecar(spec)) return !!last.state && "running" in last.state && last.started === true;
  const completed = (s: ContainerStateView | Record<string, never> | undefined) => !!s && "terminated" in s && s.terminated.exitCode === 0;
  return completed(last.lastState) || completed(last.state);
}

/** Upstream initializedContainers (status_manager.go:662-676): all but the suffix still waiting with no earlier end; at least the first. */
function initializedCount(statuses: readonly ContainerStatusView[]): number {
  for (let i = statuses.length - 1; i >= 0; i--) if (!isWaiting(statuses[i]!.state) || isTerminated(statuses[i]!.lastState)) return i + 1;
  return Math.min(statuses.length, 1);
}

const unknownEnd = (status: ContainerStatusView): ContainerStatusView =>
  "terminated" in status.state ? status : { ...status, state: { terminated: { exitCode: LOST_EXIT_CODE, reason: CONTAINER_STATUS_UNKNOWN, message: LOST_WHILE_TERMINATING } } };

/**
 * Upstream status manager TerminatePod (status_manager.go:556-620), the
 * final status of a pod whose containers are all stopped: since it is not
 * known whether a container that never ended in view succeeded, each one
 * that is not terminated shows ContainerStatusUnknown, exit code 137 (once
 * the pod initialized: an app container that never started included); of
 * the init containers, those up to the last that ever started. A pod
 * still Pending or Running is Failed, unless it is a static pod (upstream's
 * TODO #116484).
 */
export function terminatedPodStatus(pod: Pod, status: PodStatusView): PodStatusView {
  const inits = status.initContainerStatuses;
  const initialized = inits ? initializedCount(inits) : 0;
  // A pod that is not static ends terminal: Pending or Running (containers that never ran, or a sidecar's) is Failed.
  const phase = isApiPod(pod) && (status.phase === "Pending" || status.phase === "Running") ? "Failed" : status.phase;
  return {
    ...status,
    phase,
    containerStatuses: hasPodInitialized(pod) ? status.containerStatuses.map(unknownEnd) : status.containerStatuses,
    ...(inits ? { initContainerStatuses: inits.map((c, i) => (i < initialized ? unknownEnd(c) : c)) } : {}),
  };
}

/** The status of a pod that node admission rejected: Failed, with upstream's reason and message, no container statuses. */
export function rejectedStatus(reason: string, message: string): PodStatusView {
  return { phase: "Failed", sandboxReady: false, podIPs: [], containerStatuses: [], reason, message };
}
