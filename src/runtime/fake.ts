/**
 * An in-memory PodRuntime with real state for unit tests of the pod workers
 * and syncLoop: syncPod runs the real planner, containers run until a test
 * exits them, kills stop them, removals delete them. Calls are recorded and
 * errors can be injected.
 */
import type { Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import { Backoff } from "./backoff.ts";
import { containerHash } from "./hash.ts";
import type { PodRuntime } from "./index.ts";
import { backoffKey, planPod } from "./plan.ts";
import { actionsOutcome, type KnownPodStatus, type ObservedContainer, type ObservedPod, type PodRemoveOutcome, type PodStepOutcome, type RuntimePodRecord } from "./types.ts";
import { type PodRef, podRef } from "../pods/identity.ts";
import { containerSpecOf } from "../pods/spec.ts";

export class FakePodRuntime implements PodRuntime {
  readonly pods = new Map<string, ObservedPod>();
  readonly calls: { method: string; uid: string }[] = [];
  readonly backoff: Backoff;
  private nextId = 0;
  private failures = new Map<string, Error>();

  constructor(private readonly clock: Clock) {
    this.backoff = Backoff.crashLoop(clock);
  }

  failNext(method: keyof PodRuntime, err: Error): void {
    this.failures.set(method, err);
  }

  exitContainer(uid: string, name: string, exitCode: number): void {
    const c = this.pods.get(uid)?.containers.find((c) => c.name === name && c.state === "running");
    if (!c) throw new Error(`no running container ${name} in ${uid}`);
    Object.assign(c, { state: "exited", exitCode, finishedAt: this.clock.now(), reason: exitCode ? "Error" : "Completed" });
  }

  private check(method: string, uid: string): void {
    this.calls.push({ method, uid });
    const err = this.failures.get(method);
    if (err) {
      this.failures.delete(method);
      throw err;
    }
  }

  async observe(ref: PodRef): Promise<ObservedPod> {
    this.check("observe", ref.uid);
    const pod = this.pods.get(ref.uid);
    return structuredClone(pod ?? { uid: ref.uid, name: ref.name, namespace: ref.namespace, sandboxes: [], containers: [] });
  }

  async syncPod(pod: Pod, signal?: AbortSignal, known?: KnownPodStatus): Promise<PodStepOutcome> {
    const uid = pod.metadata.uid!;
    const observed = known ? structuredClone(known.observed) : await this.observe(podRef(pod));
    this.check("syncPod", uid);
    const planned = planPod(pod, observed, this.backoff);
    // As the CRI runtime: a pod that must stop gets nothing started.
    const actions = signal?.aborted ? { ...planned, createSandbox: false, containersToStart: [] } : planned;
    const state = this.pods.get(uid) ?? { uid, name: pod.metadata.name!, namespace: pod.metadata.namespace!, sandboxes: [], containers: [] };
    this.pods.set(uid, state);
    const now = this.clock.now();
    if (actions.killPod) this.stopAll(state);
    for (const k of actions.containersToKill) this.stop(state.containers.find((c) => c.id === k.id));
    let sandboxId = actions.sandboxId;
    if (actions.createSandbox) {
      sandboxId = `sandbox-${this.nextId++}`;
      state.sandboxes.unshift({ id: sandboxId, ready: true, attempt: actions.sandboxAttempt, createdAt: now, ip: "10.88.0.2", additionalIps: [] });
    }
    for (const s of actions.containersToStart) {
      const spec = containerSpecOf(pod, s.name)!;
      if (s.previousFinishedAt !== undefined) this.backoff.next(backoffKey(pod, spec), s.previousFinishedAt);
      const c: ObservedContainer = {
        id: `container-${this.nextId++}`,
        name: s.name,
        sandboxId: sandboxId!,
        state: "running",
        hash: containerHash(spec),
        restartCount: s.restartCount,
        image: spec.image,
        imageRef: "sha256:fake",
        createdAt: now,
        startedAt: now,
      };
      state.containers.unshift(c);
    }
    const waiting = new Map(actions.waiting.map((w) => [w.name, { reason: w.reason, message: `back-off ${Math.ceil(w.remainingMs / 1000)}s` }]));
    const retry = actions.waiting.length ? Math.min(...actions.waiting.map((w) => w.remainingMs)) : undefined;
    return {
      results: actions.containersToStart.map((s) => ({ action: "StartContainer", target: s.name })),
      waiting,
      changed: actions.createSandbox || actions.containersToStart.length > 0 || actions.containersToKill.length > 0 || actions.killPod,
      ...(retry === undefined ? {} : { retryAfterMs: retry }),
      observed: structuredClone(state),
      readAt: now,
    };
  }

  async killPod(ref: PodRef): Promise<PodStepOutcome> {
    await this.observe(ref);
    this.check("killPod", ref.uid);
    const state = this.pods.get(ref.uid);
    if (state) this.stopAll(state);
    return { ...actionsOutcome([]), observed: await this.observe(ref), readAt: this.clock.now() };
  }

  async removePod(ref: PodRef): Promise<PodRemoveOutcome> {
    await this.observe(ref);
    this.check("removePod", ref.uid);
    this.pods.delete(ref.uid);
    return { ...actionsOutcome([]), readAt: this.clock.now() };
  }

  async relist(): Promise<RuntimePodRecord[]> {
    this.check("relist", "");
    return [...this.pods.values()].map((p) => ({
      uid: p.uid,
      name: p.name,
      namespace: p.namespace,
      entities: new Map([...p.sandboxes.map((s) => [s.id, s.ready ? "running" : "exited"] as const), ...p.containers.map((c) => [c.id, c.state] as const)]),
    }));
  }

  async garbageCollect(): Promise<void> {
    this.check("garbageCollect", "");
  }

  private stop(c: ObservedContainer | undefined): void {
    if (c?.state !== "running") return;
    Object.assign(c, { state: "exited", exitCode: 137, finishedAt: this.clock.now(), reason: "Killed" });
  }

  private stopAll(state: ObservedPod): void {
    state.containers.forEach((c) => this.stop(c));
    state.sandboxes.forEach((s) => (s.ready = false));
  }
}
