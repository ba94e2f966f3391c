/**
 * Connects the prober to the pod workers and the runtime manager.
 * `LivenessRestarts` is built before the prober (which reports liveness and
 * startup failures to it): it remembers which container ID each probed
 * container name had, so that a failure marks exactly that container for
 * restart (a new container starts with a clean record), and asks for a sync
 * of the pod. `ProbeVerdicts` is what the workers see: the prober's
 * readiness view and the add/remove calls they make, the restarts kept in step.
 */
import type { Pod } from "../pods/schema.ts";
import type { LivenessFailures, ProbeManager, RunningContainer } from "./manager.ts";
import type { RequestSink } from "../util/requests.ts";
import type { ProbeFailure } from "./types.ts";
import { podUid } from "../pods/identity.ts";

export class LivenessRestarts implements LivenessFailures {
  private readonly probed = new Map<string, Map<string, string>>(); // pod UID → container name → ID given to the prober
  private readonly restart = new Map<string, Map<string, ProbeFailure>>(); // pod UID → container ID → why

  constructor(private readonly syncRequests: RequestSink<string>) {}

  /**
   * The prober's liveness failures: restart the container that was probed,
   * within the probe's terminationGracePeriodSeconds when it has one.
   */
  livenessFailed(podUid: string, containerName: string, probe: ProbeFailure["probe"], gracePeriodSeconds?: number): void {
    const id = this.probed.get(podUid)?.get(containerName);
    if (!id) return;
    const failure: ProbeFailure = gracePeriodSeconds !== undefined ? { probe, gracePeriodSeconds } : { probe };
    this.restart.set(podUid, new Map([...(this.restart.get(podUid) ?? []), [id, failure]]));
    this.syncRequests.request(podUid);
  }

  /** For the runtime manager's planner: running containers of a pod to restart. */
  unhealthy(podUid: string): ReadonlyMap<string, ProbeFailure> {
    return this.restart.get(podUid) ?? new Map();
  }

  /** The containers now given to the prober. */
  probing(pod: Pod, running: RunningContainer[]): void {
    this.probed.set(podUid(pod), new Map(running.map((c) => [c.containerName, c.containerId])));
  }

  forget(podUid: string): void {
    this.probed.delete(podUid);
    this.restart.delete(podUid);
  }
}

export class ProbeVerdicts {
  constructor(
    private readonly manager: Pick<ProbeManager, "awaitReports" | "addPod" | "removePod" | "isReady" | "isStarted" | "stopLivenessAndStartup" | "watchReadiness">,
    private readonly restarts: LivenessRestarts,
  ) {}

  isReady(podUid: string, name: string): boolean {
    return this.manager.isReady(podUid, name);
  }

  /** Running containers of the pod whose liveness or startup probe failed: restart them (container ID → why). */
  unhealthy(podUid: string): ReadonlyMap<string, ProbeFailure> {
    return this.restarts.unhealthy(podUid);
  }

  /** With `containerId`, false unless that container instance is the one probed. */
  isStarted(podUid: string, name: string, containerId?: string): boolean {
    return this.manager.isStarted(podUid, name, containerId);
  }

  awaitReports(pod: Pod, running: RunningContainer[], signal: AbortSignal): Promise<void> {
    return this.manager.awaitReports(pod, running, signal);
  }

  addPod(pod: Pod, running: RunningContainer[], podIP: string): void {
    this.restarts.probing(pod, running);
    this.manager.addPod(pod, running, podIP);
  }

  removePod(podUid: string): void {
    this.restarts.forget(podUid);
    this.manager.removePod(podUid);
  }

  /** The pod is terminating: readiness is still probed, liveness and startup are not (upstream StopLivenessAndStartup). */
  stopLivenessAndStartup(podUid: string): void {
    this.manager.stopLivenessAndStartup(podUid);
  }

  watchReadiness(podUid: string, fn: () => void): () => void {
    return this.manager.watchReadiness(podUid, fn);
  }
}
