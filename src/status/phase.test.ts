import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import type { ObservedContainer, ObservedPod } from "../runtime/types.ts";
import { getPhase, podPhase, podStatus, terminatedPodStatus, type ContainerStatusView, type PhaseInput, type PodPhase, type PodStatusView } from "./phase.ts";
import { apiPodStatus } from "./api.ts";

const pod = (restartPolicy: "Always" | "OnFailure" | "Never", names = ["a", "b"]): Pod => ({
  metadata: { name: "p", uid: "u" },
  spec: { restartPolicy, containers: names.map((name) => ({ name, image: "busybox" })) },
});
const c = (name: string, state: ObservedContainer["state"], exitCode?: number): ObservedContainer => ({
  id: `id-${name}`,
  name,
  sandboxId: "s",
  state,
  hash: "h",
  restartCount: 0,
  image: "busybox",
  imageRef: "sha256:x",
  createdAt: 0,
  ...(exitCode === undefined ? {} : { exitCode, finishedAt: 1000 }),
});
const obs = (...containers: ObservedContainer[]): ObservedPod => ({
  uid: "u",
  name: "p",
  namespace: "default",
  sandboxes: [{ id: "s", ready: true, attempt: 0, createdAt: 0, ip: "10.1.0.5", additionalIps: [] }],
  containers,
});

describe("podPhase", () => {
  test.each([
    ["Always", [], "Pending"],
    ["Always", [c("a", "running")], "Pending"],
    ["Always", [c("a", "running"), c("b", "running")], "Running"],
    ["Never", [c("a", "exited", 0), c("b", "exited", 0)], "Succeeded"],
    ["Never", [c("a", "exited", 0), c("b", "exited", 1)], "Failed"],
    ["OnFailure", [c("a", "exited", 0), c("b", "exited", 0)], "Succeeded"],
    ["OnFailure", [c("a", "exited", 0), c("b", "exited", 3)], "Running"],
    ["Always", [c("a", "exited", 0), c("b", "exited", 0)], "Running"],
    ["Never", [c("a", "running"), c("b", "exited", 1)], "Running"],
  ] as const)("%s with %j → %s", (policy, containers, phase) => {
    expect(podPhase(pod(policy), obs(...containers))).toBe(phase);
  });
});

describe("podPhase of a pod the agent stopped for good", () => {
  test.each([
    ["Always", [c("a", "exited", 137), c("b", "exited", 0)], "Failed"],
    ["Always", [c("a", "exited", 0), c("b", "exited", 0)], "Succeeded"],
    // Upstream getPhase: a container that never started keeps even a terminal pod Pending; TerminatePod then fails it.
    ["OnFailure", [c("a", "exited", 0)], "Pending"],
  ] as const)("%s with %j → %s", (policy, containers, phase) => {
    expect(podPhase(pod(policy), obs(...containers), true)).toBe(phase);
  });

  test("a sidecar still running after the app containers completed keeps the pod Running (upstream's 'restartable init container started, main containers succeeded')", () => {
    const p: Pod = {
      metadata: { name: "p", uid: "u" },
      spec: { restartPolicy: "Never", initContainers: [{ name: "proxy", image: "busybox", restartPolicy: "Always" }], containers: [{ name: "a", image: "busybox" }] },
    };
    expect(podPhase(p, obs(c("proxy", "running"), c("a", "exited", 0)))).toBe("Running");
    expect(podPhase(p, obs(c("proxy", "exited", 137), c("a", "exited", 0)))).toBe("Succeeded");
  });

  test("its final status (TerminatePod, status_manager.go:600-616) is Failed when Pending or Running, unless the pod is static", () => {
    const never = podStatus(pod("OnFailure"), obs(c("a", "exited", 0)), new Map(), true);
    expect(terminatedPodStatus(pod("OnFailure"), never).phase).toBe("Failed");
    const staticPod = { ...pod("Always"), metadata: { ...pod("Always").metadata, annotations: { "kubernetes.io/config.source": "file" } } };
    const stopped = podStatus(staticPod, obs(c("a", "exited", 0), c("b", "exited", 0)), new Map(), true);
    expect(stopped.phase).toBe("Running");
    expect(terminatedPodStatus(staticPod, stopped).phase).toBe("Running");
    const done = podStatus(pod("Always"), obs(c("a", "exited", 0), c("b", "exited", 0)), new Map(), true);
    expect(terminatedPodStatus(pod("Always"), done).phase).toBe("Succeeded");
  });
});

describe("podStatus", () => {
  test("reports the IP, backoff waiting and last state", () => {
    const status = podStatus(pod("Always", ["a"]), obs(c("a", "exited", 1)), new Map([["a", { reason: "CrashLoopBackOff", message: "back-off 10s" }]]));
    expect(status.podIP).toBe("10.1.0.5");
    expect(status.containerStatuses[0]!.state).toEqual({ waiting: { reason: "CrashLoopBackOff", message: "back-off 10s" } });
    expect(status.containerStatuses[0]!.lastState).toMatchObject({ terminated: { exitCode: 1, reason: "Error" } });
  });
});

describe("init containers in the status", () => {
  const p: Pod = {
    metadata: { name: "p", uid: "u" },
    spec: {
      restartPolicy: "Never",
      initContainers: [
        { name: "setup", image: "busybox" },
        { name: "proxy", image: "busybox", restartPolicy: "Always" },
      ],
      containers: [{ name: "app", image: "busybox" }],
    },
  };
  test("Pending with app containers PodInitializing while init runs", () => {
    const s = podStatus(p, obs(c("setup", "running")), new Map());
    expect(s.phase).toBe("Pending");
    expect(s.initPending).toEqual(["setup", "proxy"]);
    expect(s.containerStatuses[0]!.state).toEqual({ waiting: { reason: "PodInitializing" } });
    expect(s.initContainerStatuses!.map((x) => x.name)).toEqual(["setup", "proxy"]);
  });
  test("a failed init container with restartPolicy Never fails the pod", () => {
    expect(podPhase(p, obs(c("setup", "exited", 1)))).toBe("Failed");
  });
  test("after a failed init container: the later ones and the app wait with reason PodInitializing, nothing is ready", () => {
    const s = podStatus(p, obs(c("setup", "exited", 1)), new Map());
    expect(s.phase).toBe("Failed");
    expect(s.initPending).toEqual(["setup", "proxy"]);
    expect(s.initContainerStatuses!.map((x) => [x.name, Object.keys(x.state)[0], x.ready])).toEqual([
      ["setup", "terminated", false],
      ["proxy", "waiting", false],
    ]);
    expect(s.initContainerStatuses![1]!.state).toEqual({ waiting: { reason: "PodInitializing" } });
    expect(s.containerStatuses[0]!.state).toEqual({ waiting: { reason: "PodInitializing" } });
  });
  test("a regular init container is ready once it exited with 0, not while it runs; a sidecar while it runs", () => {
    const ready = (s: ReturnType<typeof podStatus>) => s.initContainerStatuses!.map((x) => x.ready);
    expect(ready(podStatus(p, obs(c("setup", "running")), new Map()))).toEqual([false, false]);
    expect(ready(podStatus(p, obs(c("setup", "exited", 0), c("proxy", "running"), c("app", "running")), new Map()))).toEqual([true, true]);
  });
  test("a running sidecar is ready only when its readiness probe passes, and an unready one keeps the pod's ContainersReady False", () => {
    const probes = { isReady: (_uid: string, name: string) => name !== "proxy", isStarted: () => true };
    const s = podStatus(p, obs(c("setup", "exited", 0), c("proxy", "running"), c("app", "running")), new Map(), false, probes);
    expect(s.initContainerStatuses!.map((x) => [x.name, x.ready])).toEqual([
      ["setup", true],
      ["proxy", false],
    ]);
    const api = apiPodStatus(p, s, { hostIPs: [], previous: undefined, now: 0 });
    expect(api.conditions.find((x) => x.type === "ContainersReady")).toMatchObject({ status: "False", message: "containers with unready status: [proxy]" });
    expect(api.conditions.find((x) => x.type === "Ready")!.status).toBe("False");
  });
  test("a running sidecar with a startupProbe is initialized only once started", () => {
    const probed: Pod = {
      ...p,
      spec: { ...p.spec, initContainers: [p.spec.initContainers![0]!, { ...p.spec.initContainers![1]!, startupProbe: { exec: { command: ["true"] } } }] },
    };
    const running = obs(c("setup", "exited", 0), c("proxy", "running"));
    const notStarted = { isReady: () => true, isStarted: () => false };
    const s = podStatus(probed, running, new Map(), false, notStarted);
    expect(s.initPending).toEqual(["proxy"]);
    expect(s.initContainerStatuses![1]).toMatchObject({ name: "proxy", started: false });
    expect(podStatus(probed, running, new Map(), false, { ...notStarted, isStarted: () => true }).initPending).toEqual([]);
    // Without a startupProbe the prober's answer does not hold it back.
    expect(podStatus(p, running, new Map(), false, notStarted).initPending).toEqual([]);
  });
  test("initialized once the app ran, even while a sidecar restarts", () => {
    const s = podStatus(p, obs(c("setup", "exited", 0), c("proxy", "exited", 137), c("app", "running")), new Map());
    expect(s.initPending).toEqual([]);
    expect(s.phase).toBe("Running");
  });
});

describe("ephemeral container statuses", () => {
  test("reported apart from the containers, never ready, and they do not change the phase", () => {
    const p: Pod = {
      ...pod("Always", ["a"]),
      spec: {
        ...pod("Always", ["a"]).spec,
        ephemeralContainers: [
          { name: "dbg", image: "busybox" },
          { name: "later", image: "busybox" },
        ],
      },
    };
    const s = podStatus(p, obs(c("a", "running"), c("dbg", "exited", 0)), new Map());
    expect(s.phase).toBe("Running");
    expect(s.containerStatuses.map((x) => x.name)).toEqual(["a"]);
    expect(s.ephemeralContainerStatuses?.map((x) => [x.name, Object.keys(x.state)[0], x.ready])).toEqual([
      ["dbg", "terminated", false],
      ["later", "waiting", false],
    ]);
  });
});

describe("container states as upstream's convertToAPIContainerStatuses (kubelet_pods.go:2118-2470)", () => {
  const running = (name: string, restartCount = 0) => ({
    name,
    state: { running: { startedAt: "2026-01-01T00:00:00.000Z" } },
    lastState: {},
    ready: true,
    started: true,
    restartCount,
    image: "busybox",
    imageID: "sha256:x",
  });
  test("a container created but not started waits with no reason", () => {
    const s = podStatus(pod("Always", ["a"]), obs(c("a", "created")), new Map());
    expect(s.containerStatuses[0]!.state).toEqual({ waiting: {} });
    expect(s.phase).toBe("Pending");
  });
  test("a container in an unknown state waits with no reason, unless it was running: then it ended unseen, ContainerStatusUnknown 137, one more restart", () => {
    const p = pod("Always", ["a"]);
    expect(podStatus(p, obs(c("a", "unknown")), new Map()).containerStatuses[0]!.state).toEqual({ waiting: {} });
    const s = podStatus(p, obs(c("a", "unknown")), new Map(), false, undefined, { containerStatuses: [running("a", 2)] });
    expect(s.containerStatuses[0]).toMatchObject({
      state: { terminated: { exitCode: 137, reason: "ContainerStatusUnknown", message: "The container could not be located when the pod was terminated" } },
      restartCount: 3,
    });
    expect(s.phase).toBe("Running");
  });
  test("a container the runtime has no record of, which was running, waits with its end unseen as its last state", () => {
    const s = podStatus(pod("Always", ["a"]), obs(), new Map(), false, undefined, { containerStatuses: [running("a", 1)] });
    expect(s.containerStatuses[0]).toMatchObject({
      state: { waiting: { reason: "ContainerCreating" } },
      lastState: {
        terminated: { exitCode: 137, reason: "ContainerStatusUnknown", message: "The container could not be located when the pod was deleted.  The container used to be Running" },
      },
      restartCount: 2,
    });
    expect(s.phase).toBe("Running");
  });
  test("a start failure shows only on a container that will be started again (ShouldContainerBeRestarted)", () => {
    const why = new Map([["a", { reason: "RunContainerError", message: "boom" }]]);
    expect(podStatus(pod("Never", ["a"]), obs(c("a", "exited", 128)), why).containerStatuses[0]!.state).toMatchObject({ terminated: { exitCode: 128 } });
    expect(podStatus(pod("OnFailure", ["a"]), obs(c("a", "exited", 0)), why).containerStatuses[0]!.state).toMatchObject({ terminated: { exitCode: 0 } });
    expect(podStatus(pod("OnFailure", ["a"]), obs(c("a", "exited", 1)), why).containerStatuses[0]!.state).toEqual({ waiting: { reason: "RunContainerError", message: "boom" } });
    const created = podStatus(pod("Never", ["a"]), obs(c("a", "created")), why).containerStatuses[0]!;
    expect(created.state).toEqual({ waiting: { reason: "RunContainerError", message: "boom" } });
    expect(created.lastState).toEqual({});
  });
});

describe("terminatedPodStatus: upstream's TerminatePod (status_manager_test.go TestTerminatePod_DefaultUnknownStatus)", () => {
  type S = "waiting" | "running" | "unknown" | `exit ${number}` | `waiting after exit ${number}`;
  const view = (name: string, s: S): ContainerStatusView => {
    const exit = (code: string) => ({ terminated: { exitCode: Number(code), reason: "Test" } });
    const state = s === "waiting" || s.startsWith("waiting after") ? { waiting: {} } : s === "running" ? { running: { startedAt: "1970-01-01T00:00:00.000Z" } } : exit(s.slice(5));
    const lastState = s.startsWith("waiting after exit ") ? exit(s.slice("waiting after exit ".length)) : {};
    return { name, state, lastState, ready: false, started: false, restartCount: 0, image: "busybox", imageID: "" };
  };
  const shown = (v: ContainerStatusView): S =>
    "terminated" in v.state ? (v.state.terminated.reason === "ContainerStatusUnknown" ? "unknown" : `exit ${v.state.terminated.exitCode}`) : "waiting";
  const cases: { name: string; inits: S[]; apps: S[]; want: { inits: S[]; apps: S[] } }[] = [
    { name: "no previous state", inits: [], apps: ["waiting"], want: { inits: [], apps: ["unknown"] } },
    { name: "a terminated container keeps its end", inits: [], apps: ["exit 2"], want: { inits: [], apps: ["exit 2"] } },
    { name: "last termination state set", inits: [], apps: ["waiting after exit 2"], want: { inits: [], apps: ["unknown"] } },
    { name: "uninitialized pod defaults the first init container", inits: ["waiting"], apps: ["waiting"], want: { inits: ["unknown"], apps: ["waiting"] } },
    {
      name: "uninitialized pod defaults only the first init container",
      inits: ["waiting", "waiting"],
      apps: ["waiting"],
      want: { inits: ["unknown", "waiting"], apps: ["waiting"] },
    },
    {
      name: "uninitialized pod defaults gaps",
      inits: ["waiting", "waiting", "exit 1", "waiting"],
      apps: ["waiting"],
      want: { inits: ["unknown", "unknown", "exit 1", "waiting"], apps: ["waiting"] },
    },
    {
      name: "failed last container is uninitialized",
      inits: ["waiting", "waiting", "exit 1"],
      apps: ["waiting"],
      want: { inits: ["unknown", "unknown", "exit 1"], apps: ["waiting"] },
    },
    {
      name: "successful last container is initialized",
      inits: ["waiting", "waiting", "exit 0"],
      apps: ["waiting"],
      want: { inits: ["unknown", "unknown", "exit 0"], apps: ["unknown"] },
    },
    {
      name: "successful last previous container is initialized, and container state is overwritten",
      inits: ["waiting", "waiting", "waiting after exit 0"],
      apps: ["waiting"],
      want: { inits: ["unknown", "unknown", "unknown"], apps: ["unknown"] },
    },
    { name: "running container proves initialization", inits: ["waiting"], apps: ["running"], want: { inits: ["unknown"], apps: ["unknown"] } },
    { name: "evidence of terminated container proves initialization", inits: ["waiting"], apps: ["exit 0"], want: { inits: ["unknown"], apps: ["exit 0"] } },
    {
      name: "evidence of previously terminated container proves initialization",
      inits: ["waiting"],
      apps: ["waiting after exit 0"],
      want: { inits: ["unknown"], apps: ["unknown"] },
    },
  ];
  for (const tc of cases) {
    test(tc.name, () => {
      const initContainerStatuses = tc.inits.map((s, i) => view(`init-${i}`, s));
      const containerStatuses = tc.apps.map((s, i) => view(`${i}`, s));
      const p: Pod = {
        metadata: { name: "p", uid: "u" },
        spec: {
          restartPolicy: "Never",
          ...(tc.inits.length ? { initContainers: tc.inits.map((_, i) => ({ name: `init-${i}`, image: "busybox" })) } : {}),
          containers: tc.apps.map((_, i) => ({ name: `${i}`, image: "busybox" })),
        },
        status: { initContainerStatuses, containerStatuses },
      };
      const before: PodStatusView = { phase: "Failed", sandboxReady: false, podIPs: [], containerStatuses, ...(tc.inits.length ? { initContainerStatuses } : {}) };
      const after = terminatedPodStatus(p, before);
      expect({ inits: (after.initContainerStatuses ?? []).map(shown), apps: after.containerStatuses.map(shown) }).toEqual(tc.want);
      for (const s of [...(after.initContainerStatuses ?? []), ...after.containerStatuses].filter((s) => shown(s) === "unknown")) {
        expect(s.state).toEqual({ terminated: { exitCode: 137, reason: "ContainerStatusUnknown", message: "The container could not be located when the pod was terminated" } });
      }
    });
  }

  test("a static pod (no status of its own) with init containers is not known to have initialized: its app containers keep waiting", () => {
    const p: Pod = { metadata: { name: "p", uid: "u" }, spec: { initContainers: [{ name: "i", image: "busybox" }], containers: [{ name: "a", image: "busybox" }] } };
    const status: PodStatusView = { phase: "Failed", sandboxReady: false, podIPs: [], initContainerStatuses: [view("i", "exit 0")], containerStatuses: [view("a", "waiting")] };
    expect(terminatedPodStatus(p, status).containerStatuses.map(shown)).toEqual(["waiting"]);
  });
});

/**
 * Upstream's getPhase cases (kubelet_pods_test.go TestPodPhaseWith*, v1.34.12), extracted from its tables:
 * each status as upstream's helpers make it (runningState: running, started unset; startedState: running and
 * started; stoppedState and succeededState: terminated 0; failedState: terminated -1; waitingState: waiting;
 * waitingStateWithLastTermination / NonZeroTermination: waiting after a termination with 0 / -1). A name
 * with "+" is a sidecar (restartPolicy Always).
 */
const upstreamPhaseCases: {
  upstream: string;
  spec: { restartPolicy: "Always" | "Never" | "OnFailure"; init: string[]; apps: string[] };
  cases: [name: string, statuses: string, podIsTerminal: boolean, podHasInitialized: boolean, phase: PodPhase][];
}[] = [
  {
    upstream: "TestPodPhaseWithRestartAlways (kubelet_pods_test.go:2173)",
    spec: { restartPolicy: "Always", init: [], apps: ["containerA", "containerB"] },
    cases: [
      ["waiting", "", false, false, "Pending"],
      ["all running", "containerA=running containerB=running", false, false, "Running"],
      ["all stopped with restart always", "containerA=stopped containerB=stopped", false, false, "Running"],
      ["all succeeded with restart always, but the pod is terminal", "containerA=succeeded containerB=succeeded", true, false, "Succeeded"],
      ["all stopped with restart always, but the pod is terminal", "containerA=succeeded containerB=failed", true, false, "Failed"],
      ["mixed state #1 with restart always", "containerA=running containerB=stopped", false, false, "Running"],
      ["mixed state #2 with restart always", "containerA=running", false, false, "Pending"],
      ["mixed state #3 with restart always", "containerA=running containerB=waiting", false, false, "Pending"],
      ["backoff crashloop container with restart always", "containerA=running containerB=waitingAfter0", false, false, "Running"],
    ],
  },
  {
    upstream: "TestPodPhaseWithRestartAlwaysInitContainers (kubelet_pods_test.go:2313)",
    spec: { restartPolicy: "Always", init: ["containerX"], apps: ["containerA", "containerB"] },
    cases: [
      ["empty, waiting", "", false, false, "Pending"],
      ["init container running", "containerX=running", false, false, "Pending"],
      ["init container terminated non-zero", "containerX=failed", false, false, "Pending"],
      ["init container waiting, terminated zero", "containerX=waitingAfter0", false, false, "Pending"],
      ["init container waiting, terminated non-zero", "containerX=waitingAfterFailure", false, false, "Pending"],
      ["init container waiting, not terminated", "containerX=waiting", false, false, "Pending"],
      ["init container succeeded", "containerX=succeeded containerA=running containerB=running", false, false, "Running"],
    ],
  },
  {
    upstream: "TestPodPhaseWithRestartAlwaysRestartableInitContainers (kubelet_pods_test.go:2417)",
    spec: { restartPolicy: "Always", init: ["+containerX"], apps: ["containerA", "containerB"] },
    cases: [
      ["empty, waiting", "", false, false, "Pending"],
      ["restartable init container running", "containerX=running", false, false, "Pending"],
      ["restartable init container stopped", "containerX=stopped", false, false, "Pending"],
      ["restartable init container waiting, terminated zero", "containerX=waitingAfter0", false, false, "Pending"],
      ["restartable init container waiting, terminated non-zero", "containerX=waitingAfterFailure", false, false, "Pending"],
      ["restartable init container waiting, not terminated", "containerX=waiting", false, false, "Pending"],
      ["restartable init container started, 1/2 regular container running", "containerX=started containerA=running", false, true, "Pending"],
      ["restartable init container started, all regular containers running", "containerX=started containerA=running containerB=running", false, true, "Running"],
      ["restartable init container running, all regular containers running", "containerX=running containerA=running containerB=running", false, true, "Running"],
      ["restartable init container stopped, all regular containers running", "containerX=stopped containerA=running containerB=running", false, true, "Running"],
      ["backoff crashloop restartable init container, all regular containers running", "containerX=waitingAfter0 containerA=running containerB=running", false, true, "Running"],
      [
        "all regular containers succeeded and restartable init container failed with restart always, but the pod is terminal",
        "containerX=failed containerA=succeeded containerB=succeeded",
        true,
        true,
        "Succeeded",
      ],
      [
        "all regular containers succeeded and restartable init container succeeded with restart always, but the pod is terminal",
        "containerX=succeeded containerA=succeeded containerB=succeeded",
        true,
        true,
        "Succeeded",
      ],
      ["re-initializing the pod after the sandbox is recreated", "containerX=running containerA=running containerB=running", false, false, "Pending"],
    ],
  },
  {
    upstream: "TestPodPhaseWithRestartAlwaysAndPodHasRun (kubelet_pods_test.go:2660)",
    spec: { restartPolicy: "Always", init: ["containerX", "+containerY"], apps: ["containerA"] },
    cases: [
      [
        "regular init containers, restartable init container and regular container are all running",
        "containerX=running containerY=running containerA=running",
        false,
        false,
        "Pending",
      ],
      [
        "regular containers is stopped, restartable init container and regular int container are both running",
        "containerX=running containerY=running containerA=stopped",
        false,
        false,
        "Pending",
      ],
      [
        "re-created sandbox: regular init container is succeeded, restartable init container is running, old regular containers is stopped",
        "containerX=succeeded containerY=running containerA=stopped",
        false,
        false,
        "Pending",
      ],
      [
        "regular init container is succeeded, restartable init container is running, regular containers is stopped",
        "containerX=succeeded containerY=running containerA=stopped",
        false,
        true,
        "Running",
      ],
      [
        "regular init container is succeeded, restartable init container and regular containers are both running",
        "containerX=succeeded containerY=running containerA=running",
        false,
        true,
        "Running",
      ],
    ],
  },
  {
    upstream: "TestPodPhaseWithRestartNever (kubelet_pods_test.go:2773)",
    spec: { restartPolicy: "Never", init: [], apps: ["containerA", "containerB"] },
    cases: [
      ["waiting", "", false, false, "Pending"],
      ["all running with restart never", "containerA=running containerB=running", false, false, "Running"],
      ["all succeeded with restart never", "containerA=succeeded containerB=succeeded", false, false, "Succeeded"],
      ["all failed with restart never", "containerA=failed containerB=failed", false, false, "Failed"],
      ["mixed state #1 with restart never", "containerA=running containerB=succeeded", false, false, "Running"],
      ["mixed state #2 with restart never", "containerA=running", false, false, "Pending"],
      ["mixed state #3 with restart never", "containerA=running containerB=waiting", false, false, "Pending"],
    ],
  },
  {
    upstream: "TestPodPhaseWithRestartNeverInitContainers (kubelet_pods_test.go:2873)",
    spec: { restartPolicy: "Never", init: ["containerX"], apps: ["containerA", "containerB"] },
    cases: [
      ["empty, waiting", "", false, false, "Pending"],
      ["init container running", "containerX=running", false, false, "Pending"],
      ["init container terminated non-zero", "containerX=failed", false, false, "Failed"],
      ["init container waiting, terminated zero", "containerX=waitingAfter0", false, false, "Pending"],
      ["init container waiting, terminated non-zero", "containerX=waitingAfterFailure", false, false, "Failed"],
      ["init container waiting, not terminated", "containerX=waiting", false, false, "Pending"],
      ["init container succeeded", "containerX=succeeded containerA=running containerB=running", false, false, "Running"],
    ],
  },
  {
    upstream: "TestPodPhaseWithRestartNeverRestartableInitContainers (kubelet_pods_test.go:2977)",
    spec: { restartPolicy: "Never", init: ["+containerX"], apps: ["containerA", "containerB"] },
    cases: [
      ["empty, waiting", "", false, false, "Pending"],
      ["restartable init container running", "containerX=running", false, false, "Pending"],
      ["restartable init container stopped", "containerX=stopped", false, false, "Pending"],
      ["restartable init container waiting, terminated zero", "containerX=waitingAfter0", false, false, "Pending"],
      ["restartable init container waiting, terminated non-zero", "containerX=waitingAfterFailure", false, false, "Pending"],
      ["restartable init container waiting, not terminated", "containerX=waiting", false, false, "Pending"],
      ["restartable init container started, one main container running", "containerX=started containerA=running", false, true, "Pending"],
      ["restartable init container started, main containers succeeded", "containerX=started containerA=succeeded containerB=succeeded", false, true, "Running"],
      ["restartable init container re-running, main containers succeeded", "containerX=running containerA=succeeded containerB=succeeded", false, true, "Running"],
      ["all containers succeeded", "containerX=succeeded containerA=succeeded containerB=succeeded", false, true, "Succeeded"],
      ["restartable init container terminated non-zero, main containers succeeded", "containerX=failed containerA=succeeded containerB=succeeded", false, true, "Succeeded"],
      ["backoff crashloop restartable init container, main containers succeeded", "containerX=waitingAfter0 containerA=succeeded containerB=succeeded", false, true, "Succeeded"],
      [
        "backoff crashloop with non-zero restartable init container, main containers succeeded",
        "containerX=waitingAfterFailure containerA=succeeded containerB=succeeded",
        false,
        true,
        "Succeeded",
      ],
    ],
  },
  {
    upstream: "TestPodPhaseWithRestartOnFailure (kubelet_pods_test.go:3189)",
    spec: { restartPolicy: "OnFailure", init: [], apps: ["containerA", "containerB"] },
    cases: [
      ["waiting", "", false, false, "Pending"],
      ["all running with restart onfailure", "containerA=running containerB=running", false, false, "Running"],
      ["all succeeded with restart onfailure", "containerA=succeeded containerB=succeeded", false, false, "Succeeded"],
      ["all failed with restart never", "containerA=failed containerB=failed", false, false, "Running"],
      ["mixed state #1 with restart onfailure", "containerA=running containerB=succeeded", false, false, "Running"],
      ["mixed state #2 with restart onfailure", "containerA=running", false, false, "Pending"],
      ["mixed state #3 with restart onfailure", "containerA=running containerB=waiting", false, false, "Pending"],
      ["backoff crashloop container with restart onfailure", "containerA=running containerB=waitingAfter0", false, false, "Running"],
    ],
  },
];

describe("getPhase against upstream's cases (kubelet_pods.go:1654-1862)", () => {
  const terminated = (exitCode: number) => ({ terminated: { exitCode, reason: exitCode === 0 ? "Completed" : "Error" } });
  const helpers: Record<string, Omit<PhaseInput, "name">> = {
    running: { state: { running: { startedAt: "1970-01-01T00:00:00.000Z" } } },
    started: { state: { running: { startedAt: "1970-01-01T00:00:00.000Z" } }, started: true },
    stopped: { state: terminated(0) },
    succeeded: { state: terminated(0) },
    failed: { state: terminated(-1) },
    waiting: { state: { waiting: { reason: "" } } },
    waitingAfter0: { state: { waiting: {} }, lastState: terminated(0) },
    waitingAfterFailure: { state: { waiting: {} }, lastState: terminated(-1) },
  };
  for (const { upstream, spec, cases } of upstreamPhaseCases) {
    const p: Pod = {
      metadata: { name: "p", uid: "u" },
      spec: {
        restartPolicy: spec.restartPolicy,
        ...(spec.init.length
          ? { initContainers: spec.init.map((n) => ({ name: n.replace(/^\+/, ""), image: "i", ...(n.startsWith("+") ? { restartPolicy: "Always" as const } : {}) })) }
          : {}),
        containers: spec.apps.map((name) => ({ name, image: "i" })),
      },
    };
    test.each(cases)(`${upstream}: %s`, (_name, statuses, podIsTerminal, podHasInitialized, phase) => {
      const info = statuses
        .split(" ")
        .filter(Boolean)
        .map((s) => {
          const [name, helper] = s.split("=") as [string, string];
          return { name, ...helpers[helper]! };
        });
      expect(getPhase(p, info, podIsTerminal, podHasInitialized)).toBe(phase);
    });
  }
});
