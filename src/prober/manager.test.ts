import { describe, expect, test } from "bun:test";
import { FakeCri } from "../cri/fake.ts";
import type { EventRecorder } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { createProbeManager, type ProbeManagerOptions } from "./manager.ts";
import type { ProbeTarget } from "./probes.ts";
import type { ProbeSpec } from "./schema.ts";
import type { ProbeOutcome, ProbeResult } from "./types.ts";

/**
 * Probes are scripted by their exec command's first word: `answers[word]`
 * is what the next run returns; `calls` counts runs per word.
 */
function setup(extra: Partial<ProbeManagerOptions> = {}) {
  const clock = new FakeClock();
  const answers: Record<string, ProbeResult | "hang" | "failure with an error"> = {};
  const calls: Record<string, number> = {};
  const events: string[] = [];
  const kills: { uid: string; name: string; probe: string; grace?: number }[] = [];
  const changes: string[] = [];
  const recorder: EventRecorder = { event: (_o, type, reason, message) => events.push(`${type} ${reason} ${message}`) };
  const probe = (spec: ProbeSpec, _t: ProbeTarget, signal: AbortSignal): Promise<ProbeOutcome> => {
    const word = spec.exec?.command[0] ?? "";
    calls[word] = (calls[word] ?? 0) + 1;
    const a = answers[word] ?? "success";
    if (a === "hang") return new Promise((resolve) => signal.addEventListener("abort", () => resolve({ result: "unknown", output: "canceled" })));
    if (a === "failure with an error") return Promise.resolve({ result: "failure", errored: true, output: `${word} body unread` });
    return Promise.resolve({ result: a, output: a === "failure" ? `${word} said no` : "" });
  };
  const manager = createProbeManager({
    cri: new FakeCri({ clock }),
    clock,
    random: () => 0, // no start jitter unless a test asks for it
    logger: memoryLogger().logger,
    recorder,
    probe,
    restarts: { livenessFailed: (uid, name, probe, grace) => void kills.push({ uid, name, probe, grace }) },
    syncRequests: { request: (uid) => void changes.push(uid) },
    ...extra,
  });
  /** Advances the clock and lets the probes it started finish. */
  const tick = async (ms: number) => {
    clock.advance(ms);
    await Bun.sleep(1);
  };
  return { clock, answers, calls, events, kills, changes, manager, tick };
}

const exec = (word: string, extra: Record<string, unknown> = {}) => ({ exec: { command: [word] }, ...extra });

function pod(uid: string, probes: Record<string, unknown>, name = "app"): Pod {
  return { metadata: { name: `pod-${uid}`, namespace: "default", uid }, spec: { containers: [{ name, image: "busybox", ...probes }] } } as Pod;
}

const running = (id: string, startedAt: number, name = "app") => [{ containerName: name, containerId: id, startedAt }];

describe("probe manager", () => {
  test("right after the agent starts, a first probe waits a random part of its period (upstream worker.run); a period later none does", async () => {
    const t = setup({ random: () => 0.5 });
    t.manager.addPod(pod("u1", { readinessProbe: exec("early", { periodSeconds: 10 }) }), running("c1", t.clock.now()), "");
    await t.tick(4_999);
    expect(t.calls.early).toBeUndefined();
    await t.tick(1);
    expect(t.calls.early).toBe(1);
    await t.tick(10_000); // then every period, counted from the first attempt
    expect(t.calls.early).toBe(2);
    // Added 15 s after the manager started: more than this probe's period, so no wait.
    t.manager.addPod(pod("u2", { readinessProbe: exec("late", { periodSeconds: 10 }) }), running("c2", t.clock.now()), "");
    await t.tick(0);
    expect(t.calls.late).toBe(1);
    // A longer period than the time since the start still gets the jitter: 0.5 x 60 s.
    t.manager.addPod(pod("u3", { readinessProbe: exec("slow", { periodSeconds: 60 }) }), running("c3", t.clock.now()), "");
    await t.tick(29_999);
    expect(t.calls.slow).toBeUndefined();
    await t.tick(1);
    expect(t.calls.slow).toBe(1);
    await t.manager[Symbol.asyncDispose]();
  });

  test("a sidecar (init container with restartPolicy Always) is probed like an app container; a regular init container is not", async () => {
    const t = setup();
    t.answers.ready = "failure";
    t.answers.alive = "failure";
    const p = {
      metadata: { name: "pod-u9", namespace: "default", uid: "u9" },
      spec: {
        initContainers: [
          { name: "setup", image: "busybox", readinessProbe: exec("never") },
          { name: "proxy", image: "busybox", restartPolicy: "Always", readinessProbe: exec("ready"), livenessProbe: exec("alive", { failureThreshold: 1 }) },
        ],
        containers: [{ name: "app", image: "busybox" }],
      },
    } as unknown as Pod;
    t.manager.addPod(p, [...running("s1", t.clock.now(), "setup"), ...running("p1", t.clock.now(), "proxy"), ...running("a1", t.clock.now(), "app")], "10.0.0.9");
    await t.tick(0);
    expect(t.calls.ready).toBe(1);
    expect(t.calls.never).toBeUndefined();
    expect(t.manager.isReady("u9", "proxy")).toBe(false);
    expect(t.kills.map((k) => k.name)).toEqual(["proxy"]);
    t.answers.ready = "success";
    await t.tick(10_000);
    expect(t.manager.isReady("u9", "proxy")).toBe(true);
    await t.manager[Symbol.asyncDispose]();
  });

  test("readiness starts not ready and follows success/failure thresholds", async () => {
    const t = setup();
    t.answers.ready = "success";
    t.manager.addPod(pod("u1", { readinessProbe: exec("ready", { successThreshold: 2, failureThreshold: 3 }) }), running("c1", t.clock.now()), "10.0.0.1");
    expect(t.manager.isReady("u1", "app")).toBe(false);
    await t.tick(0);
    expect(t.calls.ready).toBe(1);
    expect(t.manager.isReady("u1", "app")).toBe(false); // one success of two
    await t.tick(10_000);
    expect(t.manager.isReady("u1", "app")).toBe(true);
    expect(t.changes).toEqual(["u1", "u1"]); // the initial "not ready", then ready
    t.answers.ready = "failure";
    await t.tick(10_000);
    await t.tick(10_000);
    expect(t.manager.isReady("u1", "app")).toBe(true); // two failures of three
    await t.tick(10_000);
    expect(t.manager.isReady("u1", "app")).toBe(false);
    expect(t.events).toContain("Warning Unhealthy Readiness probe failed: ready said no");
    expect(t.kills).toEqual([]); // readiness never restarts
    await t.manager[Symbol.asyncDispose]();
    expect(t.clock.pendingTimers()).toBe(0);
  });

  test("each sync probes a started, not ready container's readiness at once (upstream UpdatePodStatus's manual trigger); a ready one waits for its period", async () => {
    const t = setup();
    t.answers.ready = "failure";
    const p = pod("u1", { readinessProbe: exec("ready") });
    t.manager.addPod(p, running("c1", t.clock.now()), "10.0.0.1");
    await t.tick(0);
    expect(t.calls.ready).toBe(1);
    // A sync 2 s later (a PLEG event, the readiness change's own sync): probed again now, not at 10 s.
    await t.tick(2_000);
    t.answers.ready = "success";
    t.manager.addPod(p, running("c1", t.clock.now() - 2_000), "10.0.0.1");
    await t.tick(0);
    expect(t.calls.ready).toBe(2);
    expect(t.manager.isReady("u1", "app")).toBe(true);
    // The period counts from that probe; a ready container is not probed by a sync.
    t.manager.addPod(p, running("c1", t.clock.now() - 2_000), "10.0.0.1");
    await t.tick(9_000);
    expect(t.calls.ready).toBe(2);
    await t.tick(1_000);
    expect(t.calls.ready).toBe(3);
    await t.manager[Symbol.asyncDispose]();
  });

  test("a terminating pod: liveness and startup stop, readiness is still probed and its changes are told (upstream StopLivenessAndStartup)", async () => {
    const t = setup();
    t.answers.ready = "success";
    t.answers.live = "failure";
    t.manager.addPod(pod("u1", { readinessProbe: exec("ready"), livenessProbe: exec("live") }), running("c1", t.clock.now()), "10.0.0.1");
    await t.tick(0);
    expect(t.manager.isReady("u1", "app")).toBe(true);
    const told: string[] = [];
    const unwatch = t.manager.watchReadiness("u1", () => told.push("u1"));
    t.manager.stopLivenessAndStartup("u1");
    const live = t.calls.live;
    t.answers.ready = "failure";
    for (let i = 0; i < 3; i++) await t.tick(10_000);
    expect(t.calls.live).toBe(live);
    expect(t.kills).toEqual([]);
    expect(t.manager.isReady("u1", "app")).toBe(false);
    expect(told).toEqual(["u1"]);
    unwatch();
    await t.manager[Symbol.asyncDispose]();
  });

  test("a container the pod's reported status shows ready and started keeps both until its probes say otherwise; another container ID does not", async () => {
    const reported: Record<string, { ready: boolean; started: boolean }> = { c1: { ready: true, started: true } };
    const t = setup({ reported: { reportedContainer: (_pod, _name, id) => reported[id], pending: () => undefined } });
    t.answers.ready = "failure";
    const probes = { startupProbe: exec("start", { periodSeconds: 60 }), readinessProbe: exec("ready", { failureThreshold: 2 }) };
    t.manager.addPod(pod("u1", probes), running("c1", t.clock.now()), "10.0.0.1");
    expect(t.manager.isStarted("u1", "app")).toBe(true);
    expect(t.manager.isReady("u1", "app")).toBe(true);
    await t.tick(0);
    expect(t.calls.start).toBeUndefined(); // started already: the startup probe does not run again
    expect(t.manager.isReady("u1", "app")).toBe(true); // one failure of two
    await t.tick(10_000);
    expect(t.manager.isReady("u1", "app")).toBe(false);
    // A new instance (a restart) starts from the usual values: not started, not ready.
    t.manager.addPod(pod("u1", probes), running("c2", t.clock.now()), "10.0.0.1");
    expect(t.manager.isStarted("u1", "app")).toBe(false);
    expect(t.manager.isReady("u1", "app")).toBe(false);
    await t.manager[Symbol.asyncDispose]();
  });

  test("a container that ran before the prober started waits for its report (a static pod's mirror pods), then carries it over", async () => {
    const listed = Promise.withResolvers<void>();
    const reported: Record<string, { ready: boolean; started: boolean }> = {};
    let pending: Promise<void> | undefined = listed.promise;
    const t = setup({ reported: { reportedContainer: (_pod, _name, id) => reported[id], pending: () => pending } });
    const before = t.clock.now() - 60_000;
    const p = pod("u1", { readinessProbe: exec("ready", { periodSeconds: 60 }) });
    let done = false;
    const waiting = t.manager.awaitReports(p, running("c1", before), new AbortController().signal).then(() => (done = true));
    await t.tick(1_000);
    expect(done).toBe(false);
    // The API source delivered: the mirror says c1 was ready.
    reported.c1 = { ready: true, started: true };
    pending = undefined;
    listed.resolve();
    await waiting;
    t.manager.addPod(p, running("c1", before), "10.0.0.1");
    expect(t.manager.isReady("u1", "app")).toBe(true);
    await t.manager[Symbol.asyncDispose]();
  });

  test("the wait for reports ends 5 s after the prober started, and is not made where nothing would be carried over", async () => {
    const never = new Promise<void>(() => {});
    const t = setup({ reported: { reportedContainer: () => undefined, pending: () => never } });
    const signal = new AbortController().signal;
    const before = t.clock.now() - 1;
    const withReadiness = pod("u1", { readinessProbe: exec("ready") });
    const settled = async (p: Promise<void>) => Promise.race([p.then(() => true), Bun.sleep(20).then(() => false)]);
    // Nothing to carry: no readiness or startup probe, or a container this prober saw start.
    expect(await settled(t.manager.awaitReports(pod("u2", { livenessProbe: exec("live") }), running("c2", before), signal))).toBe(true);
    expect(await settled(t.manager.awaitReports(withReadiness, running("c3", t.clock.now()), signal))).toBe(true);
    // A container already probed waits no more.
    t.manager.addPod(withReadiness, running("c4", before), "10.0.0.1");
    expect(await settled(t.manager.awaitReports(withReadiness, running("c4", before), signal))).toBe(true);
    // An aborted step does not wait.
    const aborted = new AbortController();
    aborted.abort();
    expect(await settled(t.manager.awaitReports(withReadiness, running("c5", before), aborted.signal))).toBe(true);
    // The API server out of reach: the wait ends at 5 s after the start, and later steps do not wait.
    const waiting = t.manager.awaitReports(withReadiness, running("c5", before), signal);
    await t.tick(4_999);
    expect(await settled(waiting)).toBe(false);
    await t.tick(1);
    expect(await settled(waiting)).toBe(true);
    expect(await settled(t.manager.awaitReports(withReadiness, running("c6", before), signal))).toBe(true);
    await t.manager[Symbol.asyncDispose]();
  });

  test("no readiness probe: ready and started once running; unknown containers are neither", async () => {
    const t = setup();
    t.manager.addPod(pod("u1", { livenessProbe: exec("live") }), running("c1", t.clock.now()), "10.0.0.1");
    expect(t.manager.isReady("u1", "app")).toBe(true);
    expect(t.manager.isStarted("u1", "app")).toBe(true);
    expect(t.manager.isReady("u1", "other")).toBe(false);
    expect(t.manager.isStarted("nope", "app")).toBe(false);
    t.manager.addPod(pod("u1", { livenessProbe: exec("live") }), [], "10.0.0.1");
    expect(t.manager.isReady("u1", "app")).toBe(false);
    await t.manager[Symbol.asyncDispose]();
  });

  test("liveness: restart requested once at failureThreshold, counters reset for a new container", async () => {
    const t = setup();
    t.answers.live = "failure";
    const p = pod("u1", { livenessProbe: exec("live", { failureThreshold: 3, terminationGracePeriodSeconds: 7 }) });
    t.manager.addPod(p, running("c1", t.clock.now()), "10.0.0.1");
    await t.tick(0);
    await t.tick(10_000);
    expect(t.kills).toEqual([]);
    await t.tick(10_000);
    expect(t.kills).toEqual([{ uid: "u1", name: "app", probe: "liveness", grace: 7 }]);
    expect(t.events.filter((e) => e === "Warning Unhealthy Liveness probe failed: live said no")).toHaveLength(3);
    // On hold: no more probes of this container instance, no second kill.
    await t.tick(50_000);
    expect(t.calls.live).toBe(3);
    expect(t.kills).toHaveLength(1);
    // The same container again changes nothing; a new container ID starts over.
    t.manager.addPod(p, running("c1", t.clock.now()), "10.0.0.1");
    expect(t.calls.live).toBe(3);
    t.manager.addPod(p, running("c2", t.clock.now()), "10.0.0.1");
    await t.tick(0);
    await t.tick(10_000);
    expect(t.calls.live).toBe(5);
    expect(t.kills).toHaveLength(1); // two failures of three on the new container
    await t.tick(10_000);
    expect(t.kills).toHaveLength(2);
    await t.manager[Symbol.asyncDispose]();
  });

  test("liveness success resets the failure run", async () => {
    const t = setup();
    t.manager.addPod(pod("u1", { livenessProbe: exec("live", { failureThreshold: 2 }) }), running("c1", t.clock.now()), "");
    t.answers.live = "failure";
    await t.tick(0);
    t.answers.live = "success";
    await t.tick(10_000);
    t.answers.live = "failure";
    await t.tick(10_000);
    expect(t.kills).toEqual([]);
    await t.tick(10_000);
    expect(t.kills).toHaveLength(1);
    await t.manager[Symbol.asyncDispose]();
  });

  test("startup gates liveness and readiness; readiness runs as soon as startup succeeds", async () => {
    const t = setup();
    t.answers.start = "failure";
    const p = pod("u1", {
      startupProbe: exec("start", { failureThreshold: 30, periodSeconds: 5 }),
      livenessProbe: exec("live"),
      readinessProbe: exec("ready", { periodSeconds: 60 }),
    });
    t.manager.addPod(p, running("c1", t.clock.now()), "10.0.0.1");
    await t.tick(0);
    await t.tick(5_000);
    expect(t.calls.start).toBe(2);
    expect(t.calls.live ?? 0).toBe(0);
    expect(t.calls.ready ?? 0).toBe(0);
    expect(t.manager.isStarted("u1", "app")).toBe(false);
    expect(t.manager.isReady("u1", "app")).toBe(false);
    t.answers.start = "success";
    await t.tick(5_000);
    expect(t.manager.isStarted("u1", "app")).toBe(true);
    // Asked for one container instance: only the one probed counts.
    expect(t.manager.isStarted("u1", "app", "c1")).toBe(true);
    expect(t.manager.isStarted("u1", "app", "c0")).toBe(false);
    expect(t.calls.ready).toBe(1); // triggered, not 60 s later
    expect(t.manager.isReady("u1", "app")).toBe(true);
    await t.tick(10_000);
    expect(t.calls.live).toBeGreaterThanOrEqual(1);
    await t.tick(30_000);
    expect(t.calls.start).toBe(3); // not probed after it succeeded
    await t.manager[Symbol.asyncDispose]();
  });

  test("startup failing at its threshold asks for a restart", async () => {
    const t = setup();
    t.answers.start = "failure";
    t.manager.addPod(pod("u1", { startupProbe: exec("start", { failureThreshold: 2 }) }), running("c1", t.clock.now()), "");
    await t.tick(0);
    await t.tick(10_000);
    expect(t.kills.map((k) => [k.probe, k.grace])).toEqual([["startup", undefined]]);
    await t.manager[Symbol.asyncDispose]();
  });

  test("initialDelaySeconds counts from the container's start", async () => {
    const t = setup();
    const startedAt = t.clock.now();
    t.manager.addPod(pod("u1", { readinessProbe: exec("ready", { initialDelaySeconds: 15 }) }), running("c1", startedAt), "");
    await t.tick(0);
    await t.tick(10_000);
    expect(t.calls.ready ?? 0).toBe(0);
    await t.tick(10_000);
    expect(t.calls.ready).toBe(1);
    expect(t.manager.isReady("u1", "app")).toBe(true);
    await t.manager[Symbol.asyncDispose]();
  });

  test("a probe that cannot run is retried 3 times, reported, and not counted", async () => {
    const t = setup();
    t.answers.live = "unknown";
    t.manager.addPod(pod("u1", { livenessProbe: exec("live", { failureThreshold: 1 }) }), running("c1", t.clock.now()), "");
    await t.tick(0);
    await t.tick(10_000);
    expect(t.calls.live).toBe(6);
    expect(t.kills).toEqual([]);
    // Upstream prober.go:105's words.
    expect(t.events.at(-1)).toStartWith("Warning Unhealthy Liveness probe errored and resulted in unknown state: ");
    await t.manager[Symbol.asyncDispose]();
  });

  test("a failure that came with an error (an HTTP body not read) is retried, reported with its state and thrown away (prober.go:105, worker.go:313-316)", async () => {
    const counted: string[] = [];
    const t = setup({ metrics: { observe: (run) => void counted.push(`${run.type} ${run.result}`), forgetPod: () => {} } });
    t.answers.live = "failure with an error";
    t.answers.ready = "failure with an error";
    t.manager.addPod(pod("u1", { livenessProbe: exec("live", { failureThreshold: 1 }), readinessProbe: exec("ready", { successThreshold: 1 }) }), running("c1", t.clock.now()), "");
    await t.tick(0);
    await t.tick(10_000);
    expect(t.calls.live).toBe(6);
    expect(t.kills).toEqual([]);
    expect(t.events).toContain("Warning Unhealthy Liveness probe errored and resulted in failure state: live body unread");
    expect(t.events.filter((e) => e.includes("probe failed"))).toEqual([]);
    expect(counted).toEqual([]);
    // Readiness keeps its initial result, not ready, and is not counted as a failure: one success makes it ready.
    expect(t.manager.isReady("u1", "app")).toBe(false);
    t.answers.ready = "success";
    await t.tick(10_000);
    expect(t.manager.isReady("u1", "app")).toBe(true);
    await t.manager[Symbol.asyncDispose]();
  });

  test("an invalid probe is reported, never a crash; invalid readiness keeps the container not ready", async () => {
    const t = setup();
    t.manager.addPod(pod("u1", { readinessProbe: { periodSeconds: "ten" }, livenessProbe: { exec: { command: ["x"] }, httpGet: { port: 80 } } }), running("c1", t.clock.now()), "");
    await t.tick(10_000);
    expect(t.manager.isReady("u1", "app")).toBe(false);
    expect(t.events.filter((e) => e.startsWith("Warning InvalidProbe"))).toHaveLength(2);
    expect(t.events.join("\n")).toContain("may not specify more than 1 handler type");
    await t.manager[Symbol.asyncDispose]();
  });

  test("a hung probe blocks neither other pods nor dispose", async () => {
    const t = setup();
    t.answers.stuck = "hang";
    t.manager.addPod(pod("a", { readinessProbe: exec("stuck") }), running("ca", t.clock.now()), "");
    t.manager.addPod(pod("b", { readinessProbe: exec("ready") }), running("cb", t.clock.now()), "");
    await t.tick(0);
    await t.tick(10_000);
    expect(t.calls.ready).toBe(2);
    expect(t.calls.stuck).toBe(1);
    expect(t.manager.isReady("b", "app")).toBe(true);
    await t.manager[Symbol.asyncDispose]();
    expect(t.clock.pendingTimers()).toBe(0);
  });

  test("removePod stops its workers and forgets its results", async () => {
    const t = setup();
    t.manager.addPod(pod("u1", { readinessProbe: exec("ready") }), running("c1", t.clock.now()), "");
    await t.tick(0);
    expect(t.manager.isReady("u1", "app")).toBe(true);
    t.manager.removePod("u1");
    t.manager.removePod("u1");
    await t.tick(30_000);
    expect(t.calls.ready).toBe(1);
    expect(t.manager.isReady("u1", "app")).toBe(false);
    expect(t.clock.pendingTimers()).toBe(0);
    await t.manager[Symbol.asyncDispose]();
  });

  test("a terminating pod's liveness probe is not run", async () => {
    const t = setup();
    t.answers.live = "failure";
    const p = pod("u1", { livenessProbe: exec("live", { failureThreshold: 1 }) });
    p.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
    t.manager.addPod(p, running("c1", t.clock.now()), "");
    await t.tick(30_000);
    expect(t.calls.live ?? 0).toBe(0);
    expect(t.kills).toEqual([]);
    await t.manager[Symbol.asyncDispose]();
  });

  test("exec probes through FakeCri end to end", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: ["busybox"] });
    const config = { metadata: { name: "p", namespace: "n", uid: "u1", attempt: 0 } };
    const sandbox = await cri.runPodSandbox(config);
    const id = await cri.createContainer(sandbox, { metadata: { name: "app" }, image: { image: "busybox" } }, config);
    await cri.startContainer(id);
    let ok = false;
    cri.setExecHandler(() => (ok ? {} : { exitCode: 1, stderr: "cat: /tmp/ok: No such file" }));
    const events: string[] = [];
    const manager = createProbeManager({
      cri,
      clock,
      random: () => 0,
      logger: memoryLogger().logger,
      recorder: { event: (_o, _t, _r, m) => events.push(m) },
      restarts: { livenessFailed: () => {} },
    });
    manager.addPod(pod("u1", { readinessProbe: { exec: { command: ["cat", "/tmp/ok"] }, periodSeconds: 1 } }), running(id, clock.now()), "");
    await Bun.sleep(1);
    expect(manager.isReady("u1", "app")).toBe(false);
    expect(events).toContain("Readiness probe failed: cat: /tmp/ok: No such file");
    ok = true;
    clock.advance(1000);
    await Bun.sleep(1);
    expect(manager.isReady("u1", "app")).toBe(true);
    await manager[Symbol.asyncDispose]();
  });
});
