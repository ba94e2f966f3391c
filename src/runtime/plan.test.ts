import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { containerHash, legacyContainerHash } from "./hash.ts";
import { backoffKey, isNoop, planPod, type BackoffView, type StartupView } from "./plan.ts";
import type { ObservedContainer, ObservedPod, ObservedSandbox } from "./types.ts";

const noBackoff: BackoffView = { remainingSince: () => 0 };
const pod = (restartPolicy: "Always" | "OnFailure" | "Never" = "Always", extra: Partial<Pod["spec"]> = {}): Pod => ({
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: { restartPolicy, containers: [{ name: "app", image: "busybox", command: ["httpd"] }], ...extra },
});
const sandbox = (over: Partial<ObservedSandbox> = {}): ObservedSandbox => ({
  id: "s1",
  ready: true,
  attempt: 0,
  createdAt: 1,
  ip: "10.0.0.2",
  additionalIps: [],
  ...over,
});
const container = (p: Pod, over: Partial<ObservedContainer> = {}): ObservedContainer => ({
  id: "c1",
  name: "app",
  sandboxId: "s1",
  state: "running",
  hash: containerHash(p.spec.containers[0]!),
  restartCount: 0,
  image: "busybox",
  imageRef: "sha256:1",
  createdAt: 1,
  ...over,
});
const observed = (sandboxes: ObservedSandbox[], containers: ObservedContainer[]): ObservedPod => ({
  uid: "u1",
  name: "web",
  namespace: "default",
  sandboxes,
  containers,
});

describe("planPod", () => {
  test("new pod: create sandbox and start every container", () => {
    const a = planPod(pod(), observed([], []), noBackoff);
    expect(a).toMatchObject({ createSandbox: true, killPod: false, sandboxAttempt: 0, sandboxChange: "no sandbox" });
    expect(a.containersToStart).toEqual([{ name: "app", restartCount: 0, reason: "new pod" }]);
  });

  test("running and unchanged: nothing to do (agent restart adopts the pod)", () => {
    const p = pod();
    expect(isNoop(planPod(p, observed([sandbox()], [container(p)]), noBackoff))).toBe(true);
  });

  test("dead sandbox: kill the pod and recreate with the next attempt", () => {
    const p = pod();
    const a = planPod(p, observed([sandbox({ ready: false, attempt: 2 })], [container(p)]), noBackoff);
    expect(a).toMatchObject({ killPod: true, createSandbox: true, sandboxAttempt: 3, sandboxChange: "sandbox not ready" });
    expect(a.containersToStart[0]).toMatchObject({ name: "app", restartCount: 1 });
  });

  test("sandbox without an IP is recreated unless host network", () => {
    const p = pod();
    expect(planPod(p, observed([sandbox({ ip: undefined })], [container(p)]), noBackoff)).toMatchObject({ createSandbox: true, sandboxChange: "sandbox has no IP" });
    const h = pod("Always", { hostNetwork: true });
    const kept = planPod(h, observed([sandbox({ ip: undefined })], [container(h)]), noBackoff);
    expect(kept.createSandbox).toBe(false);
    expect(kept.sandboxChange).toBeUndefined();
  });

  test("restartPolicy Never: a dead sandbox with containers that ran is not recreated", () => {
    const p = pod("Never");
    const a = planPod(p, observed([sandbox({ ready: false })], [container(p, { state: "exited", exitCode: 1 })]), noBackoff);
    expect(a.createSandbox).toBe(false);
    expect(a.containersToStart).toEqual([]);
  });

  test("OnFailure with all succeeded: no new sandbox", () => {
    const p = pod("OnFailure");
    const a = planPod(p, observed([sandbox({ ready: false })], [container(p, { state: "exited", exitCode: 0 })]), noBackoff);
    expect(a.createSandbox).toBe(false);
  });

  test.each([
    ["Always", 0, true],
    ["Always", 1, true],
    ["OnFailure", 0, false],
    ["OnFailure", 2, true],
    ["Never", 1, false],
    ["Never", 0, false],
  ] as const)("restartPolicy %s, exit code %d: restart is %p", (policy, exitCode, restarts) => {
    const p = pod(policy);
    const a = planPod(p, observed([sandbox()], [container(p, { state: "exited", exitCode, finishedAt: 5, restartCount: 3 })]), noBackoff);
    expect(a.containersToStart.length > 0).toBe(restarts);
    if (restarts) expect(a.containersToStart[0]).toMatchObject({ restartCount: 4, previousFinishedAt: 5 });
  });

  test("in backoff: the container waits and the plan says for how long", () => {
    const p = pod();
    const key = backoffKey(p, p.spec.containers[0]!);
    const backoff: BackoffView = { remainingSince: (k, t) => (k === key && t === 5 ? 7000 : 0) };
    const a = planPod(p, observed([sandbox()], [container(p, { state: "exited", exitCode: 1, finishedAt: 5 })]), backoff);
    expect(a.containersToStart).toEqual([]);
    expect(a.waiting).toEqual([{ name: "app", reason: "CrashLoopBackOff", remainingMs: 7000 }]);
  });

  test("changed image: kill and start again with upstream's message (kuberuntime_manager.go:1157,1182), the field for the log", () => {
    for (const policy of ["Always", "Never"] as const) {
      const p = pod(policy);
      const a = planPod(p, observed([sandbox()], [container(p, { hash: "old", image: "busybox:0.9" })]), noBackoff);
      const reason = "Container app definition changed, will be restarted";
      expect(a.containersToKill).toEqual([{ id: "c1", name: "app", reason, change: 'image "busybox:0.9" → "busybox"' }]);
      expect(a.containersToStart).toMatchObject([{ name: "app", restartCount: 1, reason }]);
    }
  });

  test("a hash of neither kind restarts the container, as upstream, and says so", () => {
    const p = pod();
    const a = planPod(p, observed([sandbox()], [container(p, { hash: "old" })]), noBackoff);
    expect(a.containersToKill).toEqual([
      { id: "c1", name: "app", reason: "Container app definition changed, will be restarted", change: `hash old → ${containerHash(p.spec.containers[0]!)}: image or name` },
    ]);
  });

  test("a container created by the upstream kubelet, or by an earlier version of this agent, keeps running", () => {
    const p = pod();
    const spec = p.spec.containers[0]!;
    for (const hash of [containerHash(spec), legacyContainerHash(spec)]) {
      const a = planPod(p, observed([sandbox()], [container(p, { hash })]), noBackoff);
      expect(a.containersToKill).toEqual([]);
      expect(a.containersToStart).toEqual([]);
    }
  });

  test("a running container not in the spec is killed", () => {
    const p = pod();
    const a = planPod(p, observed([sandbox()], [container(p), container(p, { id: "c9", name: "gone" })]), noBackoff);
    expect(a.containersToKill).toEqual([{ id: "c9", name: "gone", reason: "container is not in the pod spec" }]);
  });

  test("created but never started, or unknown: start again (unknown is killed first)", () => {
    const p = pod("Never");
    expect(planPod(p, observed([sandbox()], [container(p, { state: "created" })]), noBackoff).containersToStart).toHaveLength(1);
    const a = planPod(p, observed([sandbox()], [container(p, { state: "unknown" })]), noBackoff);
    expect(a.containersToKill).toHaveLength(1);
    expect(a.containersToStart).toHaveLength(1);
  });

  describe("init containers and sidecars", () => {
    const withInit = (restartPolicy: "Always" | "Never" = "Always"): Pod => ({
      metadata: { name: "web", namespace: "default", uid: "u1" },
      spec: {
        restartPolicy,
        initContainers: [
          { name: "setup", image: "busybox", command: ["true"] },
          { name: "proxy", image: "busybox", command: ["sleep", "1d"], restartPolicy: "Always" },
          { name: "migrate", image: "busybox", command: ["true"] },
        ],
        containers: [{ name: "app", image: "busybox", command: ["httpd"] }],
      },
    });
    const c = (p: Pod, name: string, over: Partial<ObservedContainer> = {}): ObservedContainer => {
      const spec = [...(p.spec.initContainers ?? []), ...p.spec.containers].find((x) => x.name === name)!;
      return {
        id: `id-${name}`,
        name,
        sandboxId: "s1",
        state: "running",
        hash: containerHash(spec),
        restartCount: 0,
        image: "busybox",
        imageRef: "sha256:1",
        createdAt: 1,
        ...over,
      };
    };
    const started = (a: ReturnType<typeof planPod>) => a.containersToStart.map((s) => s.name);

    test("a new pod's sandbox starts with the first init container only", () => {
      const a = planPod(withInit(), observed([], []), noBackoff);
      expect(a.createSandbox).toBe(true);
      expect(started(a)).toEqual(["setup"]);
    });

    test("one at a time, in order: a running init container holds the next back", () => {
      const p = withInit();
      expect(started(planPod(p, observed([sandbox()], [c(p, "setup")]), noBackoff))).toEqual([]);
      expect(started(planPod(p, observed([sandbox()], [c(p, "setup", { state: "exited", exitCode: 0 })]), noBackoff))).toEqual(["proxy"]);
      const sidecarUp = [c(p, "setup", { state: "exited", exitCode: 0 }), c(p, "proxy")];
      expect(started(planPod(p, observed([sandbox()], sidecarUp), noBackoff))).toEqual(["migrate"]);
      const allDone = [...sidecarUp, c(p, "migrate", { state: "exited", exitCode: 0 })];
      expect(started(planPod(p, observed([sandbox()], allDone), noBackoff))).toEqual(["app"]);
      expect(isNoop(planPod(p, observed([sandbox()], [...allDone, c(p, "app")]), noBackoff))).toBe(true);
    });

    test("a failed init container is retried with backoff; with restartPolicy Never the pod fails", () => {
      const p = withInit();
      const failed = c(p, "setup", { state: "exited", exitCode: 1, finishedAt: 5 });
      expect(started(planPod(p, observed([sandbox()], [failed]), noBackoff))).toEqual(["setup"]);
      const backoff: BackoffView = { remainingSince: () => 4000 };
      expect(planPod(p, observed([sandbox()], [failed]), backoff).waiting).toEqual([{ name: "setup", reason: "CrashLoopBackOff", remainingMs: 4000 }]);
      const never = withInit("Never");
      const a = planPod(never, observed([sandbox()], [c(never, "setup", { state: "exited", exitCode: 1 })]), noBackoff);
      expect(a.initFailed).toBe(true);
      expect(started(a)).toEqual([]);
    });

    test("a sidecar's probe kill says 'Init container ... failed liveness probe', without 'will be restarted' (kuberuntime_container.go:1161), and restarts it", () => {
      const p = withInit("Never");
      const state = [c(p, "setup", { state: "exited", exitCode: 0 }), c(p, "proxy"), c(p, "migrate", { state: "exited", exitCode: 0 }), c(p, "app")];
      const a = planPod(p, observed([sandbox()], state), noBackoff, new Map([["id-proxy", { probe: "liveness" }]]));
      expect(a.containersToKill).toEqual([{ id: "id-proxy", name: "proxy", reason: "Init container proxy failed liveness probe" }]);
      expect(started(a)).toEqual(["proxy"]);
    });

    test("a changed sidecar's Killing message is upstream's 'Init container ... definition changed' (kuberuntime_container.go:1140)", () => {
      const p = withInit();
      const state = [
        c(p, "setup", { state: "exited", exitCode: 0 }),
        c(p, "proxy", { hash: "old", image: "busybox:0.9" }),
        c(p, "migrate", { state: "exited", exitCode: 0 }),
        c(p, "app"),
      ];
      const a = planPod(p, observed([sandbox()], state), noBackoff);
      expect(a.containersToKill).toEqual([{ id: "id-proxy", name: "proxy", reason: "Init container proxy definition changed", change: 'image "busybox:0.9" → "busybox"' }]);
      expect(a.containersToStart).toMatchObject([{ name: "proxy", restartCount: 1, reason: "Init container proxy definition changed" }]);
    });

    test("a running regular init container whose spec changed is waited for, not restarted (computeInitContainerActions)", () => {
      const p = withInit();
      const a = planPod(p, observed([sandbox()], [c(p, "setup", { hash: "old", image: "busybox:0.9" })]), noBackoff);
      expect(a.containersToKill).toEqual([]);
      expect(started(a)).toEqual([]);
    });

    test("once no app container runs or will (restartPolicy Never, all done) the pod is killed, sidecars included, none restarted (kuberuntime_manager.go:1196-1201)", () => {
      const p = withInit("Never");
      const done = [c(p, "setup", { state: "exited", exitCode: 0 }), c(p, "migrate", { state: "exited", exitCode: 0 }), c(p, "app", { state: "exited", exitCode: 0 })];
      const running = planPod(p, observed([sandbox()], [...done, c(p, "proxy")]), noBackoff);
      expect(running).toMatchObject({ killPod: true, createSandbox: false, containersToStart: [] });
      // A sidecar that exited meanwhile is not started again.
      expect(planPod(p, observed([sandbox()], [...done, c(p, "proxy", { state: "exited", exitCode: 137, finishedAt: 9 })]), noBackoff)).toMatchObject({
        killPod: true,
        containersToStart: [],
      });
      // An app container waiting out its back-off is one to start: the pod lives on.
      const always = withInit("Always");
      const crashing = [
        c(always, "setup", { state: "exited", exitCode: 0 }),
        c(always, "proxy"),
        c(always, "migrate", { state: "exited", exitCode: 0 }),
        c(always, "app", { state: "exited", exitCode: 1, finishedAt: 5 }),
      ];
      expect(planPod(always, observed([sandbox()], crashing), { remainingSince: () => 4000 })).toMatchObject({ killPod: false, waiting: [{ name: "app" }] });
    });

    test("a sidecar that exits is restarted while the app runs; a completed regular init is not rerun", () => {
      const p = withInit();
      const state = [
        c(p, "setup", { state: "exited", exitCode: 0 }),
        c(p, "proxy", { state: "exited", exitCode: 137, finishedAt: 9 }),
        c(p, "migrate", { state: "exited", exitCode: 0 }),
        c(p, "app"),
      ];
      expect(started(planPod(p, observed([sandbox()], state), noBackoff))).toEqual(["proxy"]);
    });

    test("a sidecar with a startupProbe holds the next init container back until it is started", () => {
      const p = withInit();
      const probed: Pod = {
        ...p,
        spec: {
          ...p.spec,
          initContainers: p.spec.initContainers!.map((s) => (s.name === "proxy" ? { ...s, startupProbe: { exec: { command: ["true"] }, periodSeconds: 1 } } : s)),
        },
      };
      const sidecarUp = [c(probed, "setup", { state: "exited", exitCode: 0 }), c(probed, "proxy")];
      const startedIds = new Set<string>();
      const startup: StartupView = { started: (name, id) => name === "proxy" && startedIds.has(id) };
      // Running, its startup probe not succeeded yet (or not run): nothing starts.
      expect(started(planPod(probed, observed([sandbox()], sidecarUp), noBackoff, new Map(), undefined, startup))).toEqual([]);
      // Another instance of the sidecar was started: this one is not.
      startedIds.add("id-old-proxy");
      expect(started(planPod(probed, observed([sandbox()], sidecarUp), noBackoff, new Map(), undefined, startup))).toEqual([]);
      // Started: the next init container starts.
      startedIds.add("id-proxy");
      expect(started(planPod(probed, observed([sandbox()], sidecarUp), noBackoff, new Map(), undefined, startup))).toEqual(["migrate"]);
      // A sidecar without a startupProbe is started once it runs.
      expect(
        started(planPod(p, observed([sandbox()], [c(p, "setup", { state: "exited", exitCode: 0 }), c(p, "proxy")]), noBackoff, new Map(), undefined, { started: () => false })),
      ).toEqual(["migrate"]);
    });

    test("after initialization a restarting sidecar holds nothing back: an exited app container is restarted", () => {
      const p = withInit();
      const state = [
        c(p, "setup", { state: "exited", exitCode: 0 }),
        c(p, "proxy", { state: "exited", exitCode: 137, finishedAt: 9 }),
        c(p, "migrate", { state: "exited", exitCode: 0 }),
        c(p, "app", { state: "exited", exitCode: 1, finishedAt: 9 }),
      ];
      const backoff: BackoffView = { remainingSince: (key) => (key.includes("/proxy/") ? 4000 : 0) };
      const a = planPod(p, observed([sandbox()], state), backoff);
      expect(a.waiting).toEqual([{ name: "proxy", reason: "CrashLoopBackOff", remainingMs: 4000 }]);
      expect(started(a)).toEqual(["app"]);
    });

    test("init containers of an older sandbox do not count: a new sandbox runs them again", () => {
      const p = withInit();
      const old = { ...c(p, "setup", { state: "exited", exitCode: 0 }), sandboxId: "old" };
      expect(started(planPod(p, observed([sandbox({ id: "s2" })], [old]), noBackoff))).toEqual(["setup"]);
    });
  });

  test("a running container that failed its liveness probe is killed and started again", () => {
    const p = pod();
    const unhealthy = new Map([["c1", { probe: "liveness" as const }]]);
    const a = planPod(p, observed([sandbox()], [container(p)]), noBackoff, unhealthy);
    expect(a.containersToKill).toEqual([{ id: "c1", name: "app", reason: "Container app failed liveness probe, will be restarted" }]);
    expect(a.containersToStart).toMatchObject([{ name: "app", restartCount: 1 }]);
    const startup = planPod(p, observed([sandbox()], [container(p)]), noBackoff, new Map([["c1", { probe: "startup" as const }]]));
    expect(startup.containersToKill[0]?.reason).toBe("Container app failed startup probe, will be restarted");
    // Upstream (kuberuntime_manager.go:1181-1183): "will be restarted" only when the pod restarts containers.
    const never = pod("Never");
    const killed = planPod(never, observed([sandbox()], [container(never)]), noBackoff, unhealthy);
    expect(killed.containersToStart).toEqual([]);
    expect(killed.containersToKill).toEqual([{ id: "c1", name: "app", reason: "Container app failed liveness probe" }]);
  });

  test("a probe's own terminationGracePeriodSeconds goes with its kill; other kills use the pod's", () => {
    const p = pod();
    const unhealthy = new Map([["c1", { probe: "liveness" as const, gracePeriodSeconds: 5 }]]);
    expect(planPod(p, observed([sandbox()], [container(p)]), noBackoff, unhealthy).containersToKill).toEqual([
      { id: "c1", name: "app", reason: "Container app failed liveness probe, will be restarted", gracePeriodSeconds: 5 },
    ]);
  });
});
