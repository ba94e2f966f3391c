/**
 * The probe manager (upstream pkg/kubelet/prober/prober_manager.go): one
 * worker per (pod, container instance, probe type), results in three
 * caches, and the answers the rest of the agent asks for: is a container
 * started, is it ready. A liveness or startup failure at its threshold is
 * handed to `onLivenessFailure`; the runtime kills and restarts the
 * container, and the next addPod with the new container ID starts fresh
 * workers (counters and hold reset, readiness back to not ready).
 *
 * Choices where upstream has no direct equivalent:
 * - onLivenessFailure's 4th argument is the probe's own
 *   terminationGracePeriodSeconds, or undefined when the probe does not set
 *   one (then the pod's applies, as upstream). It is called for startup
 *   probe failures too (upstream restarts those the same way), at most once
 *   per container instance; its 3rd argument says which probe.
 * - An invalid probe (the API server would have refused it; static pods
 *   are not validated) is logged and recorded as a Warning "InvalidProbe"
 *   event once per container instance: an invalid liveness probe is not
 *   run; an invalid readiness probe keeps the container not ready; an
 *   invalid startup probe keeps it not started (so not ready and no liveness).
 * - `spec.containers` and sidecars (init containers with restartPolicy Always) are probed, as
 *   upstream; regular init containers have no probes.
 * - Start jitter as upstream's: a worker created less than one probe period
 *   after the manager (the agent just started, with every pod's probes
 *   at once) waits a random part of that period before its first attempt.
 * - A container instance the pod's API status already shows ready (or
 *   started), by its container ID, starts its readiness (startup) worker
 *   from that result instead of not ready: after a restart of this agent, or
 *   when it takes a node over from the upstream kubelet, a ready pod stays
 *   Ready (and in its Services' endpoints) until a probe fails. Upstream
 *   starts from not ready and the pod flaps (kubernetes#100277, open).
 */
import type { CriService } from "../cri/index.ts";
import { podEventRef, type EventRecorder } from "../events/recorder.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { runProbe, type ProbeOutcome, type ProbeTarget } from "./probes.ts";
import { ResultsCache } from "./results.ts";
import { parseProbe, probeField, type ProbeSpec, type ProbeType } from "./schema.ts";
import { ProbeWorker } from "./worker.ts";
import { probeErrored } from "./types.ts";
import { podFullName, podUid } from "../pods/identity.ts";
import { isSidecar } from "../pods/spec.ts";
import type { RequestSink } from "../util/requests.ts";

export interface RunningContainer {
  containerName: string;
  containerId: string;
  /** ms since the epoch. */
  startedAt: number;
}

/** Restarts a container whose liveness (or startup) probe failed (verdicts.ts: LivenessRestarts). */
export interface LivenessFailures {
  /** `gracePeriodSeconds` is the probe's terminationGracePeriodSeconds override, undefined when it has none. */
  livenessFailed(podUid: string, containerName: string, probe: "liveness" | "startup", gracePeriodSeconds?: number): void;
}

/** Where probe runs are counted, for `/metrics/probes` (metrics/probes.ts: ProbeMetrics). */
export interface ProbeRunSink {
  /** Every probe run with its outcome and duration. */
  observe(run: ProbeRun): void;
  /** A pod's probes are gone for good (its metric series can go too). */
  forgetPod(uid: string): void;
}

/**
 * What the API server's copy of the pod's status last said of a container
 * instance (a static pod's: its mirror's), as written by the kubelet that
 * ran it before; undefined when it says nothing of that container ID
 * (status/api.ts: LastReported).
 */
export interface ReportedContainers {
  reportedContainer(pod: Pod, containerName: string, containerId: string): { ready: boolean; started: boolean } | undefined;
  /** Resolves once reportedContainer can answer for the pod (a static pod's mirror pods were listed); undefined when it can now. */
  pending(pod: Pod): Promise<void> | undefined;
}

/**
 * How long after the prober started a container that was running before it
 * waits for its report (the API server's mirror pods, for a static pod)
 * before it is probed without it: the API server is then out of reach, and
 * the status nowhere to be sent either.
 */
export const REPORT_WAIT_MS = 5_000;

export interface ProbeManagerOptions {
  cri: Pick<CriService, "execSync">;
  clock: Clock;
  /** Numbers in [0, 1): the first attempt's jitter right after the agent started. */
  random: () => number;
  logger: Logger;
  recorder?: EventRecorder;
  /**
   * A liveness (or startup) probe reached failureThreshold: kill and restart
   * the container. Told at most once per container instance, from a timer,
   * never from within addPod.
   */
  restarts: LivenessFailures;
  /** Asked to sync a pod when a container's readiness or started state changed. */
  syncRequests?: RequestSink<string>;
  /** Replaces runProbe; for tests. */
  probe?: (spec: ProbeSpec, target: ProbeTarget, signal: AbortSignal) => Promise<ProbeOutcome>;
  /** Probe runs and removed pods, for `/metrics/probes`. */
  metrics?: ProbeRunSink;
  /** What the kubelet before this one reported of a container: a ready pod stays Ready. */
  reported?: ReportedContainers;
}

export interface ProbeRun {
  type: ProbeType;
  pod: Pod;
  container: string;
  result: ProbeOutcome["result"];
  durationMs: number;
}

export interface ProbeManager {
  /**
   * Called on every sync of a pod with its running containers. Starts
   * workers for containers not probed yet, restarts them for a container
   * with a new ID, stops them for containers no longer running, and probes
   * the readiness of started containers that are not ready at once. Never
   * throws (invalid probes are reported).
   */
  addPod(pod: Pod, running: RunningContainer[], podIP: string): void;
  /**
   * Before addPod: waits until what the kubelet before this one reported of
   * the running containers can be read, when one of them ran before the
   * prober started, is not probed yet and has a readiness or startup probe
   * to carry over; at most until REPORT_WAIT_MS after the prober started.
   * A static pod's status computed without its mirror's would say not Ready
   * and be sent once the mirror is known: a Ready pod would drop. Never throws.
   */
  awaitReports(pod: Pod, running: RunningContainer[], signal: AbortSignal): Promise<void>;
  /**
   * The pod is terminating (upstream StopLivenessAndStartup, kubelet.go:2149): its liveness
   * and startup workers stop, their last results stay; readiness is still probed while its
   * containers stop. Idempotent.
   */
  stopLivenessAndStartup(uid: string): void;
  /** Calls `fn` whenever the readiness of one of the pod's containers changes; returns the unsubscribe function. */
  watchReadiness(uid: string, fn: () => void): () => void;
  /** Stops the pod's workers and forgets its results. Idempotent. */
  removePod(uid: string): void;
  /** Started and passing readiness (or started, when there is no readiness probe). False for unknown containers. */
  isReady(uid: string, containerName: string): boolean;
  /**
   * The startup probe succeeded, or there is none and the container runs. False for unknown
   * containers; with `containerId`, false unless that instance is the one probed.
   */
  isStarted(uid: string, containerName: string, containerId?: string): boolean;
  /** Stops every worker and waits for running probes to end. */
  [Symbol.asyncDispose](): Promise<void>;
}

interface ContainerEntry {
  name: string;
  containerId: string;
  workers: Map<ProbeType, ProbeWorker>;
  /** Probe types the container declares, valid or not. */
  declared: Set<ProbeType>;
  killRequested: boolean;
}

interface PodEntry {
  pod: Pod;
  podIP: string;
  containers: Map<string, ContainerEntry>;
}

const TYPES: ProbeType[] = ["startup", "readiness", "liveness"];

/** The containers that are probed, by name: the app containers and the sidecars (restartable init containers). */
const probedContainers = (pod: Pod): Map<string, ContainerSpec> => new Map([...(pod.spec.initContainers ?? []).filter(isSidecar), ...pod.spec.containers].map((c) => [c.name, c]));

export function createProbeManager(opts: ProbeManagerOptions): ProbeManager {
  const caches: Record<ProbeType, ResultsCache> = { liveness: new ResultsCache(), readiness: new ResultsCache(), startup: new ResultsCache() };
  const pods = new Map<string, PodEntry>();
  const stopping = new Set<Promise<void>>();
  const managerStartedAt = opts.clock.now();
  // Upstream worker.run: probes started within one period of the kubelet's start are spread over that period.
  const firstAttemptDelayMs = (periodSeconds: number): number => {
    const periodMs = periodSeconds * 1000;
    return periodMs > opts.clock.now() - managerStartedAt ? opts.random() * periodMs : 0;
  };

  const notify = (podUid: string) => opts.syncRequests?.request(podUid);
  caches.readiness.onUpdate((u) => notify(u.podUid));
  caches.startup.onUpdate((u) => {
    notify(u.podUid);
    // Upstream UpdatePodStatus: a started container that is not ready gets a readiness probe at once.
    if (u.result === "success") findByContainerId(u.podUid, u.containerId)?.workers.get("readiness")?.trigger();
  });

  function findByContainerId(uid: string, containerId: string): ContainerEntry | undefined {
    for (const c of pods.get(uid)?.containers.values() ?? []) if (c.containerId === containerId) return c;
    return undefined;
  }

  function stopContainer(c: ContainerEntry): void {
    for (const [type, w] of c.workers) {
      const p = w.stop().finally(() => stopping.delete(p));
      stopping.add(p);
      caches[type].remove(c.containerId);
    }
    c.workers.clear();
  }

  const runOne = opts.probe ?? ((spec: ProbeSpec, target: ProbeTarget, signal: AbortSignal) => runProbe(spec, target, { cri: opts.cri, signal }));
  function timedProbe(type: ProbeType, container: string) {
    return async (spec: ProbeSpec, target: ProbeTarget, signal: AbortSignal): Promise<ProbeOutcome> => {
      const started = opts.clock.now();
      const outcome = await runOne(spec, target, signal);
      // Upstream worker.go:313-316 throws an errored probe's result away before it is counted.
      if (!probeErrored(outcome)) opts.metrics?.observe({ type, pod: target.pod, container, result: outcome.result, durationMs: opts.clock.now() - started });
      return outcome;
    };
  }

  function started(c: ContainerEntry): boolean {
    if (!c.declared.has("startup")) return true;
    return caches.startup.get(c.containerId) === "success";
  }

  function startContainer(entry: PodEntry, spec: ContainerSpec, run: RunningContainer): ContainerEntry {
    const uid = podUid(entry.pod);
    const c: ContainerEntry = { name: spec.name, containerId: run.containerId, workers: new Map(), declared: new Set(), killRequested: false };
    const logger = opts.logger.with({ pod: podFullName(entry.pod), container: spec.name, containerId: run.containerId });
    const reported = opts.reported?.reportedContainer(entry.pod, spec.name, run.containerId);
    const carried: Partial<Record<ProbeType, "success">> = { ...(reported?.started ? { startup: "success" } : {}), ...(reported?.ready ? { readiness: "success" } : {}) };
    if (reported?.ready || reported?.started)
      logger.v(2).info("probe results carried over from the pod's reported status until probed", { ready: reported.ready, started: reported.started });
    for (const type of TYPES) {
      const raw = (spec as Record<string, unknown>)[probeField[type]];
      if (raw == null) continue;
      c.declared.add(type);
      const parsed = parseProbe(type, raw);
      if (!parsed.ok) {
        logger.error("invalid probe", { probe: type, err: parsed.error });
        opts.recorder?.event(podEventRef(entry.pod, spec.name), "Warning", "InvalidProbe", `${probeField[type]} is invalid: ${parsed.error}`);
        continue;
      }
      const probe = parsed.probe;
      const worker = new ProbeWorker({
        type,
        spec: probe,
        target: () => ({ pod: entry.pod, container: spec, containerId: run.containerId, podIP: entry.podIP }),
        startedAt: run.startedAt,
        firstAttemptDelayMs: firstAttemptDelayMs(probe.periodSeconds),
        ...(carried[type] ? { initial: carried[type] } : {}),
        isStarted: () => started(c),
        results: caches[type],
        cri: opts.cri,
        clock: opts.clock,
        logger: logger.with({ probe: type }),
        recorder: opts.recorder,
        probe: timedProbe(type, spec.name),
        onFailureThreshold: () => {
          // The worker calls this for liveness and startup only.
          if (c.killRequested || type === "readiness") return;
          c.killRequested = true;
          logger.info("container failed probe; it is to be killed", { probe: type });
          opts.restarts.livenessFailed(uid, spec.name, type, probe.terminationGracePeriodSeconds ?? undefined);
        },
      });
      c.workers.set(type, worker);
    }
    // Start after all are built: a startup probe's first result may trigger readiness.
    for (const w of c.workers.values()) w.start();
    return c;
  }

  return {
    async awaitReports(pod, running, signal) {
      const remainingMs = managerStartedAt + REPORT_WAIT_MS - opts.clock.now();
      if (remainingMs <= 0) return;
      const entry = pods.get(podUid(pod));
      const specs = probedContainers(pod);
      const carries = running.some((run) => {
        const spec = specs.get(run.containerName) as Record<string, unknown> | undefined;
        const probed = entry?.containers.get(run.containerName)?.containerId === run.containerId;
        return !probed && run.startedAt < managerStartedAt && (spec?.readinessProbe != null || spec?.startupProbe != null);
      });
      const pending = carries ? opts.reported?.pending(pod) : undefined;
      if (!pending) return;
      const waited = new AbortController();
      const timeout = opts.clock.sleep(remainingMs, AbortSignal.any([signal, waited.signal])).catch(() => {});
      await Promise.race([pending, timeout]);
      waited.abort();
    },

    addPod(pod, running, podIP) {
      const uid = podUid(pod);
      let entry = pods.get(uid);
      if (!entry) pods.set(uid, (entry = { pod, podIP, containers: new Map() }));
      entry.pod = pod;
      entry.podIP = podIP;
      const specs = probedContainers(pod);
      for (const [name, c] of entry.containers) {
        const run = running.find((r) => r.containerName === name);
        if (!specs.has(name) || !run || run.containerId !== c.containerId) {
          stopContainer(c);
          entry.containers.delete(name);
        }
      }
      const known = new Set(entry.containers.keys());
      for (const run of running) {
        const spec = specs.get(run.containerName);
        if (!spec || entry.containers.has(spec.name)) continue;
        entry.containers.set(spec.name, startContainer(entry, spec, run));
      }
      // Upstream UpdatePodStatus (prober_manager.go:298-314), run by every sync's status: a started
      // container that is not ready is probed for readiness at once, not at its next period
      // (a new container's first probe runs at once anyway).
      for (const name of known) {
        const c = entry.containers.get(name);
        if (c && started(c) && caches.readiness.get(c.containerId) !== "success") c.workers.get("readiness")?.trigger();
      }
    },

    stopLivenessAndStartup(uid) {
      for (const c of pods.get(uid)?.containers.values() ?? []) {
        for (const type of ["liveness", "startup"] as const) {
          const w = c.workers.get(type);
          if (!w) continue;
          const p = w.stop().finally(() => stopping.delete(p));
          stopping.add(p);
          c.workers.delete(type);
        }
      }
    },

    watchReadiness(uid, fn) {
      return caches.readiness.onUpdate((u) => {
        if (u.podUid === uid) fn();
      });
    },

    removePod(uid) {
      const entry = pods.get(uid);
      if (!entry) return;
      for (const c of entry.containers.values()) stopContainer(c);
      pods.delete(uid);
      opts.metrics?.forgetPod(uid);
    },

    isStarted(uid, containerName, containerId) {
      const c = pods.get(uid)?.containers.get(containerName);
      return c !== undefined && (containerId === undefined || c.containerId === containerId) && started(c);
    },

    isReady(uid, containerName) {
      const c = pods.get(uid)?.containers.get(containerName);
      if (!c || !started(c)) return false;
      if (!c.declared.has("readiness")) return true;
      return caches.readiness.get(c.containerId) === "success";
    },

    async [Symbol.asyncDispose]() {
      for (const uid of [...pods.keys()]) this.removePod(uid);
      await Promise.all([...stopping]);
    },
  };
}
