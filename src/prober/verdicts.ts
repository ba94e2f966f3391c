/**
 * Connects the prober to the pod workers and the runtime manager: it
 * remembers which container ID each probed container name had, so that a
 * liveness or startup failure marks exactly that container for restart (a
 * new container starts with a clean record), and it hands the workers the
 * readiness view and the add/remove calls they make.
 */
import type { Pod } from "../pods/schema.ts";
import type { ProbeManager, RunningContainer } from "./manager.ts";
import { podUid } from "../pods/identity.ts";

export class ProbeVerdicts {
  private readonly probed = new Map<string, Map<string, string>>(); // pod UID → container name → ID given to the prober
  private readonly restart = new Map<string, Map<string, string>>(); // pod UID → container ID → why

  /** `manager` is set after construction (the prober's callbacks come back here). */
  manager: Pick<ProbeManager, "addPod" | "removePod" | "isReady" | "isStarted"> | undefined;

  constructor(private readonly wake: (podUid: string) => void) {}

  /** The prober's onLivenessFailure: restart the container that was probed. */
  livenessFailed(podUid: string, containerName: string, message: string): void {
    const id = this.probed.get(podUid)?.get(containerName);
    if (!id) return;
    this.restart.set(podUid, new Map([...(this.restart.get(podUid) ?? []), [id, message]]));
    this.wake(podUid);
  }

  /** For the runtime manager's planner: running containers of a pod to restart. */
  unhealthy(podUid: string): ReadonlyMap<string, string> {
    return this.restart.get(podUid) ?? new Map();
  }

  isReady(podUid: string, name: string): boolean {
    return this.manager?.isReady(podUid, name) ?? true;
  }

  isStarted(podUid: string, name: string): boolean {
    return this.manager?.isStarted(podUid, name) ?? true;
  }

  addPod(pod: Pod, running: RunningContainer[], podIP: string): void {
    this.probed.set(podUid(pod), new Map(running.map((c) => [c.containerName, c.containerId])));
    this.manager?.addPod(pod, running, podIP);
  }

  removePod(podUid: string): void {
    this.probed.delete(podUid);
    this.restart.delete(podUid);
    this.manager?.removePod(podUid);
  }
}
