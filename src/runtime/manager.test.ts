import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { PodHost } from "../sync/pod-host.ts";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeCri } from "../cri/fake.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { PodSyncCancelledError } from "./cancel.ts";
import { CriPodRuntime } from "./manager.ts";
import { testRuntimeOptions, testNode } from "./testing.ts";
import { podRef } from "../pods/identity.ts";
import type { ProbeFailure } from "../prober/types.ts";

let logs: string;
beforeEach(() => (logs = mkdtempSync(join(tmpdir(), "podlogs-"))));
afterEach(() => rmSync(logs, { recursive: true, force: true }));

const pod = (over: Partial<Pod["spec"]["containers"][number]> = {}, restartPolicy: "Always" | "Never" = "Always"): Pod => ({
  metadata: { name: "web", namespace: "default", uid: "uid-1", labels: { app: "web" } },
  spec: { restartPolicy, containers: [{ name: "app", image: "busybox:1.0", ...over }] },
});

function setup(clock = new FakeClock(), cri = new FakeCri({ clock, images: ["busybox:1.0"] }), verdicts?: ReadonlyMap<string, ProbeFailure>) {
  const node = testNode({ podLogsDir: logs, podsCgroupParent: "/test/kubepods", hostDns: { servers: ["1.1.1.1"], searches: [], options: [] } });
  const host = PodHost.forNode(node);
  const events: string[] = [];
  /** `<kind>/<name> <reason>` of each event: what it was recorded on. */
  const eventsOn: string[] = [];
  const log = memoryLogger();
  const runtime = new CriPodRuntime(
    testRuntimeOptions({
      cri,
      clock,
      logger: log.logger,
      node,
      host,
      recorder: {
        event: (ref, type, reason, message) => {
          events.push(`${type} ${reason} ${message}`);
          eventsOn.push(`${ref.kind}/${ref.name} ${reason}`);
        },
      },
      ...(verdicts ? { start: { probes: { unhealthy: () => verdicts, isStarted: () => true } } } : {}),
    }),
  );
  return { clock, cri, runtime, host, events, eventsOn, logLines: log.lines };
}

/** A runtime whose prober's failed verdicts (container id → failed probe) the test sets. */
function withVerdicts() {
  const verdicts = new Map<string, ProbeFailure>();
  return { ...setup(undefined, undefined, verdicts), verdicts };
}

/** Lets the promise chains of a step in flight run up to their next wait. */
/** A pod whose one container's postStart hook never ends (its exec is held by the test), with a 2 s grace period. */
const endlessPostStartPod = (): Pod => ({
  metadata: { name: "web", namespace: "default", uid: "uid-1" },
  spec: { terminationGracePeriodSeconds: 2, containers: [{ name: "app", image: "busybox:1.0", lifecycle: { postStart: { exec: { command: ["sleep", "3600"] } } } }] },
});

const settle = async () => {
  for (let i = 0; i < 50; i++) await Bun.sleep(0);
};

async function sync(runtime: CriPodRuntime, p: Pod, signal?: AbortSignal) {
  return runtime.syncPod(p, signal);
}

describe("CriPodRuntime", () => {
  test("a ClusterFirst pod on a node without clusterDNS: MissingClusterDNS on the pod and on the Node, as upstream, once per new sandbox", async () => {
    const { cri, runtime, events, eventsOn } = setup();
    await sync(runtime, pod());
    await sync(runtime, pod());
    const message = 'kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.';
    expect(events.filter((e) => e.includes("MissingClusterDNS"))).toEqual([
      `Warning MissingClusterDNS pod: "web_default(uid-1)". ${message}`,
      `Warning MissingClusterDNS ${message}`,
    ]);
    expect(eventsOn.filter((e) => e.includes("MissingClusterDNS"))).toEqual(["Pod/web MissingClusterDNS", "Node/test-node MissingClusterDNS"]);
    expect(cri.callsOf("runPodSandbox")).toHaveLength(1);
  });

  test("a pod whose sandbox died is killed and gets a new one: the log says why and what the plan was read from", async () => {
    const { cri, runtime, events, logLines } = setup();
    const first = await sync(runtime, pod());
    const [sandbox] = first.observed!.sandboxes;
    await cri.stopPodSandbox(sandbox!.id);
    await sync(runtime, pod());
    expect(events).toContain("Normal SandboxChanged Pod sandbox changed, it will be killed and re-created.");
    const line = logLines.find((l) => l.includes("pod sandbox changed; it will be killed and re-created"));
    expect(line).toContain(`why="sandbox not ready" sandbox=${sandbox!.id} planFrom=read`);
    expect(cri.callsOf("runPodSandbox")).toHaveLength(2);
  });

  test("first starts go 8 at a time through to their containers started: the 9th pod's sandbox waits for a slot", async () => {
    const { cri, runtime } = setup();
    const pods = Array.from({ length: 9 }, (_, i): Pod => ({ ...pod(), metadata: { name: `web-${i}`, namespace: "default", uid: `uid-${i}` } }));
    // The first 8 container starts hang: those pods keep their slots until then.
    const releases = Array.from({ length: 8 }, () => cri.holdNext("startContainer"));
    const syncs = pods.map((p) => sync(runtime, p));
    const sandboxesAsked = async () => {
      for (let i = 0; i < 50; i++) await Bun.sleep(0);
      return cri.callsOf("runPodSandbox").length;
    };
    expect(await sandboxesAsked()).toBe(8);
    releases[0]!();
    expect(await sandboxesAsked()).toBe(9);
    for (const release of releases) release();
    await Promise.all(syncs);
    expect(cri.callsOf("runPodSandbox")).toHaveLength(9);
    expect(cri.callsOf("startContainer")).toHaveLength(9);
  });

  test("a liveness kill uses the probe's terminationGracePeriodSeconds; a pod that must stop meanwhile gets nothing started again", async () => {
    const { cri, runtime, verdicts } = withVerdicts();
    const p: Pod = { ...pod(), spec: { ...pod().spec, terminationGracePeriodSeconds: 500 } };
    await sync(runtime, p);
    const first = (await runtime.observe(podRef(p))).containers[0]!;
    verdicts.set(first.id, { probe: "liveness", gracePeriodSeconds: 5 });
    await sync(runtime, p);
    expect(cri.callsOf("stopContainer")).toEqual([[first.id, 5]]);
    expect(cri.callsOf("startContainer")).toHaveLength(2);

    // Deleted while the kill waited: the container is stopped, not started again.
    const second = (await runtime.observe(podRef(p))).containers.find((c) => c.state === "running")!;
    verdicts.set(second.id, { probe: "liveness" });
    const deleted = new AbortController();
    const release = cri.holdNext("stopContainer");
    const syncing = runtime.syncPod(p, deleted.signal);
    for (let i = 0; i < 20; i++) await Bun.sleep(0);
    deleted.abort();
    release();
    await syncing;
    expect(cri.callsOf("stopContainer").at(-1)).toEqual([second.id, 500]);
    expect(cri.callsOf("startContainer")).toHaveLength(2);
    expect((await runtime.observe(podRef(p))).containers.filter((c) => c.state === "running")).toEqual([]);
  });

  test("a stop gets at least 2 s (upstream minimumGracePeriodInSeconds): a probe's terminationGracePeriodSeconds: 1, a pod's 0", async () => {
    const { cri, runtime, verdicts } = withVerdicts();
    const p: Pod = { ...pod(), spec: { ...pod().spec, terminationGracePeriodSeconds: 0 } };
    await sync(runtime, p);
    const first = (await runtime.observe(podRef(p))).containers[0]!;
    verdicts.set(first.id, { probe: "liveness", gracePeriodSeconds: 1 });
    await sync(runtime, p);
    expect(cri.callsOf("stopContainer")).toEqual([[first.id, 2]]);
    const second = (await runtime.observe(podRef(p))).containers.find((c) => c.state === "running")!;
    await runtime.killPod(podRef(p), 0, p);
    expect(cri.callsOf("stopContainer").at(-1)).toEqual([second.id, 2]);
  });

  test("a probe kill's Killing event has upstream's words: a sidecar's 'Init container ... failed liveness probe'", async () => {
    const { runtime, events, verdicts } = withVerdicts();
    const p: Pod = { ...pod(), spec: { ...pod().spec, initContainers: [{ name: "proxy", image: "busybox:1.0", restartPolicy: "Always" }] } };
    await sync(runtime, p);
    await sync(runtime, p);
    const running = (await runtime.observe(podRef(p))).containers.filter((c) => c.state === "running");
    expect(running.map((c) => c.name).sort()).toEqual(["app", "proxy"]);
    verdicts.set(running.find((c) => c.name === "proxy")!.id, { probe: "liveness" });
    verdicts.set(running.find((c) => c.name === "app")!.id, { probe: "startup" });
    await sync(runtime, p);
    expect(events.filter((e) => e.includes("Killing")).sort()).toEqual([
      "Normal Killing Container app failed startup probe, will be restarted",
      "Normal Killing Init container proxy failed liveness probe",
    ]);
  });

  test("creates the sandbox and container with upstream labels, annotations and log paths", async () => {
    const { cri, runtime } = setup();
    const p = pod();
    const outcome = await sync(runtime, p);
    expect(outcome.results.filter((r) => r.error)).toEqual([]);
    const [sandbox] = await cri.listPodSandbox();
    expect(sandbox!.labels).toMatchObject({ app: "web", "io.kubernetes.pod.uid": "uid-1", "io.kubernetes.pod.name": "web" });
    const [created] = cri.callsOf("createContainer") as [
      string,
      { logPath: string; annotations: Record<string, string> },
      { logDirectory: string; linux: { cgroupParent: string } },
    ][];
    expect(created![1].logPath).toBe("app/0.log");
    expect(created![1].annotations["io.kubernetes.container.restartCount"]).toBe("0");
    expect(created![2].logDirectory).toBe(join(logs, "default_web_uid-1"));
    expect(created![2].linux.cgroupParent).toBe("/test/kubepods/poduid-1");
    expect(existsSync(join(logs, "default_web_uid-1", "app"))).toBe(true);
    const observed = await runtime.observe(podRef(p));
    expect(observed.containers).toMatchObject([{ name: "app", state: "running", restartCount: 0 }]);
  });

  test("a new agent on the same runtime adopts the pod without touching it", async () => {
    const { clock, cri, runtime } = setup();
    const p = pod();
    await sync(runtime, p);
    const before = cri.calls.length;
    const restarted = setup(clock, cri).runtime;
    const outcome = await sync(restarted, p);
    expect(outcome.changed).toBe(false);
    const mutating = cri.calls.slice(before).filter((c) => !["listPodSandbox", "listContainers", "podSandboxStatus", "containerStatus"].includes(c.method));
    expect(mutating).toEqual([]);
  });

  test("crash loop: immediate first restart, then CrashLoopBackOff with the wait to retry", async () => {
    const { clock, cri, runtime } = setup();
    const p = pod();
    await sync(runtime, p);
    const first = (await runtime.observe(podRef(p))).containers[0]!;
    cri.exitContainer(first.id, 1);
    await sync(runtime, p);
    const second = (await runtime.observe(podRef(p))).containers[0]!;
    expect(second).toMatchObject({ state: "running", restartCount: 1 });
    clock.advance(2000);
    cri.exitContainer(second.id, 1);
    const waiting = await sync(runtime, p);
    expect(waiting.waiting.get("app")?.reason).toBe("CrashLoopBackOff");
    expect(waiting.retryAfterMs).toBe(10_000);
    clock.advance(10_000);
    await sync(runtime, p);
    expect((await runtime.observe(podRef(p))).containers[0]).toMatchObject({ state: "running", restartCount: 2 });
  });

  test("a crash-looping container's waiting message names the whole back-off, as upstream (10s, then 20s), not the time left", async () => {
    const { clock, cri, runtime } = setup();
    const p = pod();
    await sync(runtime, p);
    const crash = async () => {
      const c = (await runtime.observe(podRef(p))).containers[0]!;
      cri.exitContainer(c.id, 1);
    };
    await crash();
    await sync(runtime, p); // the first restart is immediate
    await crash();
    clock.advance(3000);
    const first = await sync(runtime, p);
    expect(first.retryAfterMs).toBe(7000);
    expect(first.waiting.get("app")).toEqual({ reason: "CrashLoopBackOff", message: "back-off 10s restarting failed container=app pod=web_default(uid-1)" });
    clock.advance(7000);
    await sync(runtime, p);
    await crash();
    const second = await sync(runtime, p);
    expect(second.retryAfterMs).toBe(20_000);
    expect(second.waiting.get("app")?.message).toBe("back-off 20s restarting failed container=app pod=web_default(uid-1)");
  });

  test("image pull policy Never with the image absent waits with ErrImageNeverPull", async () => {
    const { runtime } = setup();
    const outcome = await sync(runtime, pod({ image: "absent:1", imagePullPolicy: "Never" }));
    expect(outcome.waiting.get("app")?.reason).toBe("ErrImageNeverPull");
  });

  test("pull policy Always: a failed pull is ErrImagePull even with the image present (no silent local copy), as upstream", async () => {
    const { cri, runtime } = setup();
    cri.failNext("pullImage", "Unavailable", "registry unreachable");
    const outcome = await sync(runtime, pod({ imagePullPolicy: "Always" }));
    expect(outcome.waiting.get("app")).toMatchObject({ reason: "ErrImagePull" });
    expect(cri.callsOf("createContainer")).toEqual([]);
  });

  test("a failed pull backs off 10s, then is pulled again and the container starts", async () => {
    const { clock, cri, runtime } = setup();
    cri.failNext("pullImage", "Unavailable", "registry unreachable");
    const p = pod({ imagePullPolicy: "Always" });
    const failed = await sync(runtime, p);
    expect(failed.waiting.get("app")).toMatchObject({ reason: "ErrImagePull" });
    expect(failed.retryAfterMs).toBe(10_000);
    clock.advance(5000);
    const early = await sync(runtime, p);
    expect(early.waiting.get("app")).toMatchObject({ reason: "ImagePullBackOff" });
    expect(cri.callsOf("pullImage")).toHaveLength(1);
    clock.advance(5000);
    await sync(runtime, p);
    expect(cri.callsOf("pullImage")).toHaveLength(2);
    expect((await runtime.observe(podRef(p))).containers[0]).toMatchObject({ state: "running" });
  });

  test("an unsupported env source is a CreateContainerConfigError, not a crash", async () => {
    const { runtime } = setup();
    const outcome = await sync(runtime, pod({ env: [{ name: "S", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }] }));
    expect(outcome.waiting.get("app")).toMatchObject({ reason: "CreateContainerConfigError" });
  });

  test("garbage collection keeps only the newest dead container per name", async () => {
    const { clock, cri, runtime } = setup();
    const p = pod({}, "Always");
    await sync(runtime, p);
    for (let i = 0; i < 3; i++) {
      const c = (await runtime.observe(podRef(p))).containers[0]!;
      cri.exitContainer(c.id, 1);
      clock.advance(400_000); // past any backoff
      await sync(runtime, p);
    }
    expect((await runtime.observe(podRef(p))).containers.filter((c) => c.state === "exited")).toHaveLength(3);
    await runtime.garbageCollect();
    const after = (await runtime.observe(podRef(p))).containers;
    expect(after.map((c) => [c.state, c.restartCount])).toEqual([
      ["running", 3],
      ["exited", 2],
    ]);
  });

  test("kill then remove leaves nothing of the pod; the pod host's teardown takes the logs", async () => {
    const { cri, runtime, host } = setup();
    const p = pod();
    await sync(runtime, p);
    const killed = await runtime.killPod(podRef(p), 5);
    expect(killed.results.filter((r) => r.error)).toEqual([]);
    expect((await runtime.observe(podRef(p))).containers[0]!.state).toBe("exited");
    await runtime.removePod(podRef(p));
    expect(cri.counts()).toMatchObject({ sandboxes: 0, containers: 0 });
    expect(existsSync(join(logs, "default_web_uid-1"))).toBe(true);
    expect(await host.teardown(podRef(p))).toEqual([]);
    expect(existsSync(join(logs, "default_web_uid-1"))).toBe(false);
  });

  test("an orphan (no pod spec) is killed with the grace period its containers were created with, as upstream", async () => {
    const { cri, runtime } = setup();
    const p = pod();
    p.spec.terminationGracePeriodSeconds = 5;
    await sync(runtime, p);
    const observed = await runtime.observe(podRef(p));
    expect(observed.containers[0]!.podGracePeriodSeconds).toBe(5);
    await runtime.killPod(podRef(p), 30); // the 30 a pod without a spec is terminated with
    const stops = cri.calls.filter((c) => c.method === "stopContainer").map((c) => c.args[1]);
    expect(stops).toEqual([5]);
  });

  test("an orphan's preStop hook runs from the annotation its container was created with (upstream's preStopHandler), before the stop", async () => {
    const { cri, runtime } = setup();
    const preStop = { exec: { command: ["sh", "-c", "echo bye"] } };
    const p = pod({ lifecycle: { preStop }, ports: [{ name: "http", containerPort: 8080 }] } as never);
    p.spec.terminationGracePeriodSeconds = 5;
    await sync(runtime, p);
    const [, created] = cri.callsOf("createContainer")[0] as [string, { annotations: Record<string, string> }];
    expect(JSON.parse(created.annotations["io.kubernetes.container.preStopHandler"]!)).toEqual(preStop);
    expect(JSON.parse(created.annotations["io.kubernetes.container.ports"]!)).toEqual([{ name: "http", containerPort: 8080 }]);
    await runtime.killPod(podRef(p), 30);
    const order = cri.calls.filter((c) => c.method === "execSync" || c.method === "stopContainer").map((c) => [c.method, c.args[1]]);
    expect(order).toEqual([
      ["execSync", ["sh", "-c", "echo bye"]],
      ["stopContainer", 5],
    ]);
  });

  test("pod cgroups are made before the sandbox and removed with the pod's host side; containers get their resources", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: ["busybox:1.0"] });
    const calls: string[] = [];
    const node = testNode({ podLogsDir: logs, podsCgroupParent: "/unused" });
    const host = PodHost.forNode(node, {
      cgroups: {
        ensurePod: async (p) => (calls.push(`ensure ${p.metadata.uid}`), `/kubepods/burstable/pod${p.metadata.uid}`),
        removePod: async (uid) => void calls.push(`remove ${uid}`),
      },
    });
    const runtime = new CriPodRuntime(
      testRuntimeOptions({
        cri,
        clock,
        logger: memoryLogger().logger,
        node,
        host,
        config: {
          resources: { resourcesOf: () => ({ cpuShares: 512, cpuQuota: 50_000, cpuPeriod: 100_000, memoryLimitInBytes: 64 << 20, oomScoreAdj: 900, hugepageLimits: [] }) },
        },
      }),
    );
    const p = pod();
    await sync(runtime, p);
    const [sandboxCfg] = cri.callsOf("runPodSandbox")[0] as [{ linux: { cgroupParent: string } }];
    expect(sandboxCfg.linux.cgroupParent).toBe("/kubepods/burstable/poduid-1");
    const [, containerCfg] = cri.callsOf("createContainer")[0] as [string, { linux: { resources: Record<string, bigint> } }];
    expect(containerCfg.linux.resources).toMatchObject({ cpuShares: 512n, cpuQuota: 50_000n, memoryLimitInBytes: BigInt(64 << 20), oomScoreAdj: 900n });
    await runtime.killPod(podRef(p), 0);
    await runtime.removePod(podRef(p));
    expect(calls).toEqual(["ensure uid-1"]);
    await host.teardown(podRef(p));
    expect(calls).toEqual(["ensure uid-1", "remove uid-1"]);
  });

  test("init containers run in order before the app; on kill, sidecars stop after the app containers", async () => {
    const { clock, cri, runtime } = setup();
    const p: Pod = {
      metadata: { name: "web", namespace: "default", uid: "uid-1" },
      spec: {
        initContainers: [
          { name: "setup", image: "busybox:1.0", command: ["true"] },
          { name: "proxy", image: "busybox:1.0", command: ["sleep", "1d"], restartPolicy: "Always" },
        ],
        containers: [{ name: "app", image: "busybox:1.0" }],
      },
    };
    const names = () => (cri.callsOf("createContainer") as [string, { metadata: { name: string } }][]).map(([, c]) => c.metadata.name);
    await sync(runtime, p);
    expect(names()).toEqual(["setup"]);
    await sync(runtime, p); // setup still running: nothing new
    expect(names()).toEqual(["setup"]);
    cri.exitContainer((await runtime.observe(podRef(p))).containers[0]!.id, 0);
    clock.advance(1);
    await sync(runtime, p);
    await sync(runtime, p);
    expect(names()).toEqual(["setup", "proxy", "app"]);
    await runtime.killPod(podRef(p), 5, p);
    const stopped = (cri.callsOf("stopContainer") as [string][]).map(([id]) => id);
    const byId = new Map((await runtime.observe(podRef(p))).containers.map((c) => [c.id, c.name]));
    expect(stopped.map((id) => byId.get(id))).toEqual(["app", "proxy"]);
  });

  test("postStart runs after the start; a failing one kills the container; preStop runs before the stop", async () => {
    const { cri, runtime, events } = setup();
    const hooked = (postStart: string[]): Pod => ({
      metadata: { name: "web", namespace: "default", uid: "uid-1" },
      spec: {
        terminationGracePeriodSeconds: 10,
        containers: [{ name: "app", image: "busybox:1.0", lifecycle: { postStart: { exec: { command: postStart } }, preStop: { exec: { command: ["echo", "bye"] } } } }],
      },
    });
    const p = hooked(["echo", "hello"]);
    await sync(runtime, p);
    const order = () => cri.calls.map((c) => c.method).filter((m) => ["startContainer", "execSync", "stopContainer"].includes(m));
    expect(order()).toEqual(["startContainer", "execSync"]);
    expect((await runtime.observe(podRef(p))).containers[0]!.state).toBe("running");
    await runtime.killPod(podRef(p), 10, p);
    expect(order()).toEqual(["startContainer", "execSync", "execSync", "stopContainer"]);
    expect((cri.callsOf("execSync")[1] as [string, string[]])[1]).toEqual(["echo", "bye"]);
    await runtime.removePod(podRef(p));

    cri.setExecHandler((_id, cmd) => (cmd[0] === "leak" ? { stdout: "token=s3cret\n", stderr: "no\n", exitCode: 2 } : { stdout: "", stderr: "" }));
    const failing = await sync(runtime, hooked(["leak", "it"]));
    // Upstream's message: the CRI client's exit error with stderr, then the whole output as Go's %q.
    expect(failing.results.find((r) => r.error)).toEqual({
      action: "StartContainer",
      target: "app",
      error: {
        reason: "PostStartHookError",
        message: `Exec lifecycle hook ([leak it]) for Container "app" in Pod "web_default(uid-1)" failed - error: command 'leak it' exited with 2: no\n, message: "token=s3cret\\nno\\n"`,
      },
    });
    expect((await runtime.observe(podRef(p))).containers[0]!.state).toBe("exited");
    // The event leaves the hook's output out (it may hold secrets), as upstream's.
    expect(events.filter((e) => e.includes("Hook"))).toEqual(["Warning FailedPostStartHook PostStartHook failed"]);
  });

  test("a failing preStop hook: the kill goes on, and its event leaves the hook's output out (it may hold secrets), as upstream's", async () => {
    const { cri, runtime, events } = setup();
    cri.setExecHandler((_id, cmd) => (cmd[0] === "leak" ? { stdout: "token=s3cret", exitCode: 1 } : {}));
    const p: Pod = {
      metadata: { name: "web", namespace: "default", uid: "uid-1" },
      spec: { terminationGracePeriodSeconds: 10, containers: [{ name: "app", image: "busybox:1.0", lifecycle: { preStop: { exec: { command: ["leak"] } } } }] },
    };
    await sync(runtime, p);
    await runtime.killPod(podRef(p), 10, p);
    expect((await runtime.observe(podRef(p))).containers[0]!.state).toBe("exited");
    expect(events.filter((e) => e.includes("Hook"))).toEqual(["Warning FailedPreStopHook PreStopHook failed"]);
  });

  test("postStart has no time limit, as upstream's RunInContainer(..., 0): a hook longer than the grace period ends and the container runs", async () => {
    const { clock, cri, runtime, events } = setup();
    const withPostStart = (postStart: object): Pod => ({
      metadata: { name: "web", namespace: "default", uid: "uid-1" },
      spec: { terminationGracePeriodSeconds: 2, containers: [{ name: "app", image: "busybox:1.0", lifecycle: { postStart } }] },
    });
    // exec: the runtime is asked for no timeout (0: no deadline either) and answered after 5 s.
    const release = cri.holdNext("execSync");
    const p = withPostStart({ exec: { command: ["sh", "-c", "sleep 5"] } });
    let done = false;
    const syncing = sync(runtime, p).then((o) => ((done = true), o));
    await settle();
    clock.advance(5_000);
    await settle();
    expect(done).toBe(false);
    release();
    expect((await syncing).results.filter((r) => r.error)).toEqual([]);
    expect(cri.callsOf("execSync").map(([, , timeoutSeconds]) => timeoutSeconds)).toEqual([0]);
    expect((await runtime.observe(podRef(p))).containers[0]!.state).toBe("running");
    await runtime.killPod(podRef(p), 2, p);
    await runtime.removePod(podRef(p));

    // sleep: its full seconds, not the grace period's.
    const slept = withPostStart({ sleep: { seconds: 5 } });
    done = false;
    const sleeping = sync(runtime, slept).then((o) => ((done = true), o));
    await settle();
    clock.advance(2_000);
    await settle();
    expect(done).toBe(false);
    clock.advance(3_000);
    expect((await sleeping).results.filter((r) => r.error)).toEqual([]);
    expect((await runtime.observe(podRef(slept))).containers[0]!.state).toBe("running");
    await runtime.killPod(podRef(slept), 2, slept);
    await runtime.removePod(podRef(slept));

    // httpGet: no client timeout; this handler answers after 1.2 s, longer than a grace period of 1 s.
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: async () => (await Bun.sleep(1_200), new Response("ok")) });
    try {
      const called = withPostStart({ httpGet: { host: "127.0.0.1", port: server.port!, path: "/started" } });
      called.spec.terminationGracePeriodSeconds = 1;
      expect((await sync(runtime, called)).results.filter((r) => r.error)).toEqual([]);
      expect((await runtime.observe(podRef(called))).containers[0]!.state).toBe("running");
    } finally {
      void server.stop(true);
    }
    expect(events.filter((e) => e.includes("FailedPostStartHook"))).toEqual([]);
  });

  test("a postStart hook still running when the pod must stop is abandoned (its exec cancelled); the pod's kill then stops the container", async () => {
    const { cri, runtime, events } = setup();
    const p = endlessPostStartPod();
    cri.holdNext("execSync"); // never answers, as a hook that hangs
    const podMustStop = new AbortController();
    const syncing = sync(runtime, p, podMustStop.signal);
    await settle();
    expect(cri.callsOf("execSync")).toHaveLength(1);
    podMustStop.abort(new Error("pod sync cancelled: the pod must stop (deleted)"));
    const outcome = await syncing;
    expect(outcome.results.find((r) => r.error)).toMatchObject({
      action: "StartContainer",
      error: { reason: "PostStartHookError", message: expect.stringContaining("the pod must stop (deleted)") },
    });
    expect(events.filter((e) => e.includes("FailedPostStartHook"))).toHaveLength(1);
    // The termination kills it, with the pod's grace period; the abandoned start stopped nothing itself.
    expect(cri.callsOf("stopContainer")).toEqual([]);
    const killed = await runtime.killPod(podRef(p), 2, p);
    expect(killed.results.filter((r) => r.error)).toEqual([]);
    expect(cri.callsOf("stopContainer")).toHaveLength(1);
    expect((await runtime.observe(podRef(p))).containers.map((c) => c.state)).toEqual(["exited"]);
  });

  test("the agent stopping during a postStart hook leaves no trace, as upstream's kubelet just exits: the step throws, no event, no stop, the container runs on", async () => {
    const { cri, runtime, events } = setup();
    const p = endlessPostStartPod();
    cri.holdNext("execSync"); // a hook that hangs
    const agentStops = new AbortController();
    const syncing = sync(runtime, p, agentStops.signal);
    await settle();
    expect(cri.callsOf("execSync")).toHaveLength(1);
    agentStops.abort(new PodSyncCancelledError("the pod workers stop", true));
    await expect(syncing).rejects.toBeInstanceOf(PodSyncCancelledError);
    expect(events.filter((e) => e.includes("FailedPostStartHook"))).toEqual([]);
    expect(cri.callsOf("stopContainer")).toEqual([]);
    expect((await runtime.observe(podRef(p))).containers.map((c) => c.state)).toEqual(["running"]);
  });

  test("a pod that must stop during its image pull stops waiting for it: the pull's CRI call is cancelled, and it fails as upstream's cancelled pull (Canceled)", async () => {
    const { cri, runtime, events } = setup(new FakeClock(), new FakeCri({ clock: new FakeClock(), images: [] }));
    const p = pod();
    cri.holdNext("pullImage"); // a registry that never finishes
    const podMustStop = new AbortController();
    const syncing = sync(runtime, p, podMustStop.signal);
    await settle();
    expect(cri.callsOf("pullImage")).toHaveLength(1);
    podMustStop.abort(new PodSyncCancelledError("the pod must stop (deleted)"));
    const outcome = await syncing;
    expect(outcome.results.find((r) => r.error)).toMatchObject({
      action: "PullImage",
      error: { reason: "ErrImagePull", message: "rpc error: code = Canceled desc = context canceled" },
    });
    expect(events).toContain('Warning Failed Failed to pull image "busybox:1.0": rpc error: code = Canceled desc = context canceled');
    expect(cri.callsOf("createContainer")).toEqual([]);
  });

  test("the agent stopping during an image pull cancels it with no trace: the step throws, no Failed event, no back-off for the next start", async () => {
    const { cri, runtime, events } = setup(new FakeClock(), new FakeCri({ clock: new FakeClock(), images: [] }));
    const p = pod();
    cri.holdNext("pullImage");
    const agentStops = new AbortController();
    const syncing = sync(runtime, p, agentStops.signal);
    await settle();
    agentStops.abort(new PodSyncCancelledError("the pod workers stop", true));
    await expect(syncing).rejects.toBeInstanceOf(PodSyncCancelledError);
    expect(events.filter((e) => e.startsWith("Warning Failed"))).toEqual([]);
    // Not in back-off: the next step pulls again at once.
    expect((await sync(runtime, p)).results.filter((r) => r.error)).toEqual([]);
    expect(cri.callsOf("pullImage")).toHaveLength(2);
  });

  test("a pod that must stop while it waits at the start gate stops waiting at once, having started nothing", async () => {
    const { cri, runtime } = setup();
    const pods = Array.from({ length: 9 }, (_, i): Pod => ({ ...pod(), metadata: { name: `web-${i}`, namespace: "default", uid: `uid-${i}` } }));
    const releases = Array.from({ length: 8 }, () => cri.holdNext("startContainer"));
    const syncs = pods.slice(0, 8).map((p) => sync(runtime, p));
    await settle();
    const podMustStop = new AbortController();
    const waiting = sync(runtime, pods[8]!, podMustStop.signal);
    await settle();
    expect(cri.callsOf("runPodSandbox")).toHaveLength(8);
    podMustStop.abort(new PodSyncCancelledError("the pod must stop (deleted)"));
    const outcome = await waiting;
    expect(outcome).toMatchObject({ results: [], changed: false });
    expect(cri.callsOf("runPodSandbox")).toHaveLength(8);
    for (const release of releases) release();
    await Promise.all(syncs);
  });
});
