import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import type { ObservedContainer, ObservedPod } from "../runtime/types.ts";
import { podPhase, podStatus, terminatedPodStatus, type ContainerStatusView, type PodStatusView } from "./phase.ts";
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
    ["OnFailure", [c("a", "exited", 0)], "Failed"],
  ] as const)("%s with %j → %s", (policy, containers, phase) => {
    expect(podPhase(pod(policy), obs(...containers), true)).toBe(phase);
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
