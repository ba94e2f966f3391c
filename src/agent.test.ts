/**
 * The whole agent in-process: runAgent with the fake CRI and the fake API,
 * a static pod from a manifest directory, every subsystem real. It proves
 * the wiring (the pod runs, its mirror pod reports Running) and that stopping
 * the agent leaves nothing behind: every timer and sleep taken from the
 * clock, and every setTimeout and setInterval taken from the runtime
 * directly, is done or cancelled, every watch on the API is closed, the
 * kubelet API port no longer accepts connections.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runAgent, type AgentDeps } from "./agent.ts";
import { FakeKubeApi } from "./api/fake.ts";
import { loadConfig } from "./config/index.ts";
import { ContainerState } from "./cri/index.ts";
import { FakeCri } from "./cri/fake.ts";
import { realClock, type Clock } from "./util/clock.ts";
import { StopTimeout } from "./util/disposal.ts";
import { memoryLogger } from "./util/log.ts";
import { FakeMounter } from "./volumes/mount.ts";

/** The real clock, counting what is pending on it: timers not yet fired nor cancelled, sleeps not yet over. */
class CountingClock implements Clock {
  /** id → where it was asked for (a few stack frames), to name a leak. */
  readonly pending = new Map<number, string>();
  private next = 0;

  now(): number {
    return realClock.now();
  }

  setTimer(ms: number, fn: () => void): () => void {
    const id = this.track(`timer ${ms} ms`);
    const cancel = realClock.setTimer(ms, () => {
      this.pending.delete(id);
      fn();
    });
    return () => {
      this.pending.delete(id);
      cancel();
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    const id = this.track(`sleep ${ms} ms`);
    return realClock.sleep(ms, signal).finally(() => this.pending.delete(id));
  }

  private track(what: string): number {
    const id = this.next++;
    const frames = (new Error().stack ?? "")
      .split("\n")
      .slice(3, 7)
      .map((l) => l.trim());
    this.pending.set(id, `${what} ${frames.join(" < ")}`);
    return id;
  }
}

/**
 * Timers taken from the runtime itself (setTimeout, setInterval) rather than
 * through the clock, while the agent runs: one still pending after stop is a
 * leak too. Timeouts that fired or were cleared, and cleared intervals, are not.
 */
function trackRuntimeTimers(): { pending: Map<unknown, string>; restore(): void } {
  const pending = new Map<unknown, string>();
  const original = { setTimeout, setInterval, clearTimeout, clearInterval };
  const where = (what: string) =>
    `${what} ${(new Error().stack ?? "")
      .split("\n")
      .slice(3, 6)
      .map((l) => l.trim())
      .join(" < ")}`;
  globalThis.setTimeout = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const t = original.setTimeout(
      (...a: unknown[]) => {
        pending.delete(t);
        fn(...a);
      },
      ms,
      ...args,
    );
    pending.set(t, where(`setTimeout ${ms} ms`));
    return t;
  }) as typeof setTimeout;
  globalThis.setInterval = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const t = original.setInterval(fn, ms, ...args);
    pending.set(t, where(`setInterval ${ms} ms`));
    return t;
  }) as typeof setInterval;
  globalThis.clearTimeout = ((t: Parameters<typeof clearTimeout>[0]) => (pending.delete(t), original.clearTimeout(t))) as typeof clearTimeout;
  globalThis.clearInterval = ((t: Parameters<typeof clearInterval>[0]) => (pending.delete(t), original.clearInterval(t))) as typeof clearInterval;
  return { pending, restore: () => void Object.assign(globalThis, original) };
}

let restoreTimers = () => {};
afterAll(() => restoreTimers());

const dir = mkdtempSync(join(tmpdir(), "bunlet-agent-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

/** A port nothing listens on now: other agents on the machine may hold 10250. */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });

const portRefuses = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => (socket.destroy(), resolve(false)));
    socket.once("error", () => resolve(true));
  });

const webPod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\nspec:\n  containers:\n  - name: app\n    image: registry.local/app:1\n";

/** The whole agent on the fakes, with these static pods, until `stop` aborts; resolves once its static pod "web" runs. */
async function startWholeAgent(
  name: string,
  o: { manifests: Record<string, string>; config?: Record<string, unknown>; cri: FakeCri; api: FakeKubeApi; clock: Clock } & Pick<AgentDeps, "stopLimits">,
) {
  const base = join(dir, name);
  const manifests = join(base, "manifests");
  mkdirSync(manifests, { recursive: true });
  for (const [file, text] of Object.entries(o.manifests)) writeFileSync(join(manifests, file), text);
  const configFile = JSON.stringify({
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    staticPodPath: manifests,
    podLogsDir: join(base, "logs"),
    cgroupsPerQOS: false,
    enforceNodeAllocatable: [],
    port: await freePort(), // not 10250 (port 0 defaults to it): the server runs and must be closed at the end
    readOnlyPort: 0,
    healthzPort: 0,
    ...o.config,
  });
  const loaded = loadConfig(["--config=/agent/config.json", "--hostname-override=node1", `--root-dir=${join(base, "root")}`, `--cert-dir=${join(base, "pki")}`], {
    readFile: () => configFile,
    hostname: () => "node1",
  });
  if (loaded.kind !== "run") throw new Error(`config: ${JSON.stringify(loaded)}`);
  const { logger, lines } = memoryLogger(4);
  const stop = new AbortController();
  const { cri, api, clock } = o;
  const agent = runAgent(loaded.config, {
    logger,
    signal: stop.signal,
    clock,
    cri,
    api,
    mounter: new FakeMounter(),
    version: "Kubernetes v1.34.0-bunlet+test",
    random: () => 0.5,
    ...(o.stopLimits ? { stopLimits: o.stopLimits } : {}),
  });
  // A failure says what the agent logged last.
  const failed = agent.then(
    () => new Error(`the agent stopped on its own; its last lines:\n${lines.slice(-30).join("\n")}`),
    (err: unknown) => new Error(`the agent failed: ${String(err)}; its last lines:\n${lines.slice(-30).join("\n")}`, { cause: err }),
  );
  const running = await Promise.race([
    until("the static pod's container to run", async () => {
      const containers = await cri.listContainers({});
      return containers.find((c) => c.metadata?.name === "app" && c.state === ContainerState.CONTAINER_RUNNING);
    }),
    failed.then((err) => Promise.reject(err)),
  ]);
  const serving = lines.find((l) => l.includes("serving the kubelet API"));
  const port = Number(/:(\d+)/.exec(serving?.split("address")[1] ?? "")?.[1]);
  return { agent, stop, lines, running, port };
}

test("the whole agent runs a static pod and stops with no timer, watch or port left open", async () => {
  const clock = new CountingClock();
  const runtimeTimers = trackRuntimeTimers();
  restoreTimers = runtimeTimers.restore; // also when the test fails before its end
  const cri = new FakeCri({ clock });
  const api = new FakeKubeApi();
  const { agent, stop, running, port } = await startWholeAgent("clean", { manifests: { "web.yaml": webPod }, cri, api, clock });
  expect(running.labels["io.kubernetes.pod.name"]).toBe("web-node1");
  // Static pods start without waiting for the node's registration (as upstream's): the Node may come a moment later.
  expect(await until("the node to register", () => api.nodes.has("node1") || undefined)).toBe(true);
  const mirror = await until("the mirror pod to report Running", () => {
    const pod = api.pods.get("default/web-node1") as { status?: { phase?: string } } | undefined;
    return pod?.status?.phase === "Running" ? pod : undefined;
  });
  expect(mirror.status?.phase).toBe("Running");
  expect(port).toBeGreaterThan(0);

  stop.abort();
  expect(await agent).toBeUndefined();
  expect([...clock.pending.values()]).toEqual([]);
  const runtimeTimersLeft = [...runtimeTimers.pending.values()];
  runtimeTimers.restore();
  expect(runtimeTimersLeft).toEqual([]);
  expect(api.openWatches).toBe(0);
  expect(await portRefuses(port)).toBe(true);
  // The pod keeps running (an agent restart adopts it): nothing was stopped.
  expect(cri.calls.filter((c) => c.method === "stopContainer" || c.method === "stopPodSandbox")).toEqual([]);
}, 30_000);

/**
 * What held a SIGTERM'd agent open in a conformance run: parts whose stop
 * waits on work in flight. Here an image pull that never answers (a pod
 * step in flight) and a Lease renewal the API server never answers (the
 * node controller's request in flight).
 */
async function startStuckAgent(name: string, stopLimits: NonNullable<AgentDeps["stopLimits"]>) {
  const clock = realClock;
  const cri = new FakeCri({ clock, images: ["registry.local/app:1"] });
  const never = new Promise<never>(() => {});
  const pull = cri.pullImage.bind(cri);
  let pulling = false;
  cri.pullImage = (image, ...rest) => (image.image === "registry.local/slow:1" ? ((pulling = true), never) : pull(image, ...rest));
  const api = new FakeKubeApi();
  const slowPod = webPod.replace("name: web", "name: slow").replace("registry.local/app:1", "registry.local/slow:1");
  const started = await startWholeAgent(name, {
    manifests: { "web.yaml": webPod, "slow.yaml": slowPod },
    config: { nodeLeaseDurationSeconds: 4 }, // a renewal every second
    cri,
    api,
    clock,
    stopLimits,
  });
  await until("the slow pod's pull", () => pulling || undefined);
  let renewing = false;
  await until("the lease to exist", () => api.calls.some((c) => c.method === "createLease" || c.method === "updateLease") || undefined);
  api.updateLease = () => ((renewing = true), never);
  await until("a lease renewal in flight", () => renewing || undefined);
  return { ...started, cri, api };
}

test("stopping does not wait for a pod step or an API request that never ends: each is named and left behind", async () => {
  const { agent, stop, lines, port, cri, api } = await startStuckAgent("stuck", { partTimeoutMs: 3_000, totalTimeoutMs: 10_000 });
  const stopping = Date.now();
  stop.abort();
  expect(await agent).toBeUndefined();
  // The node controller's 3 s, the pod workers' 2 s for the steps in flight, the rest at once.
  expect(Date.now() - stopping).toBeLessThan(7_000);
  expect(lines.some((l) => l.includes("a part did not stop in time") && l.includes('part="node controller"'))).toBe(true);
  expect(lines.some((l) => l.includes("stopping with pod steps in flight") && l.includes("default/slow-node1 (syncing)"))).toBe(true);
  for (const part of ["sync loop", "kubelet API server", "PLEG", "API server pod source", "plugin watcher", "CRI connection"]) {
    expect(lines.some((l) => l.includes('"stopped"') && l.includes(`part=${/ /.test(part) ? `"${part}"` : part} `))).toBe(true);
  }
  expect(api.openWatches).toBe(0);
  expect(await portRefuses(port)).toBe(true);
  expect(cri.calls.filter((c) => c.method === "stopContainer" || c.method === "stopPodSandbox")).toEqual([]);
}, 30_000);

test("stopping past its deadline rejects with StopTimeout naming the parts still stopping", async () => {
  const { agent, stop, port } = await startStuckAgent("deadline", { partTimeoutMs: 1_000, totalTimeoutMs: 1_500 });
  const stopping = Date.now();
  stop.abort();
  const err = await agent.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(Date.now() - stopping).toBeLessThan(3_000);
  expect(err).toBeInstanceOf(StopTimeout);
  // The node controller was left behind at 1 s; the pod workers were waiting for the pull at 1.5 s.
  expect((err as StopTimeout).stuck).toEqual(["node controller", "pod workers"]);
  expect((err as StopTimeout).unreached).toContain("CRI connection");
  // The parts not reached were told to stop all the same.
  expect(await until("the kubelet API port to close", async () => (await portRefuses(port)) || undefined)).toBe(true);
}, 30_000);

test("a restarted agent keeps its static pod Ready when the API server's pods come after the pod's first step: the mirror's readiness carries over", async () => {
  const clock = realClock;
  const cri = new FakeCri({ clock, images: ["registry.local/app:1"] });
  const api = new FakeKubeApi();
  // Probed once a minute: the first probe comes long after this test, so readiness is only what carries over.
  const probed = `${webPod}    readinessProbe:\n      exec:\n        command: ["true"]\n      periodSeconds: 60\n`;
  const mirrorKey = "default/web-node1";
  type Status = { conditions?: { type: string; status: string }[]; containerStatuses?: { ready?: boolean; started?: boolean }[] };
  const readyOf = (status: Status | undefined) => status?.conditions?.find((c) => c.type === "Ready")?.status;
  // The first agent's stop closes its CRI client; the runtime is the second's too.
  const keptOpen = new Proxy(cri, {
    get: (target, name) => {
      const value = Reflect.get(target, name, target);
      return name === "close" ? () => {} : typeof value === "function" ? value.bind(target) : value;
    },
  });
  const first = await startWholeAgent("carry", { manifests: { "web.yaml": probed }, cri: keptOpen, api, clock });
  const mirror = await until("the mirror pod's status", () => {
    const pod = api.pods.get(mirrorKey) as { status?: Status } | undefined;
    return pod?.status?.containerStatuses?.length ? pod : undefined;
  });
  first.stop.abort();
  await first.agent;
  // As the kubelet before it left it: the container ready, the pod Ready.
  const status = mirror.status!;
  api.putPod({
    ...(mirror as object),
    status: {
      ...status,
      conditions: status.conditions!.map((c) => (["Ready", "ContainersReady"].includes(c.type) ? { ...c, status: "True" } : c)),
      containerStatuses: status.containerStatuses!.map((c) => ({ ...c, ready: true, started: true })),
    },
  });
  // The second agent's first list of the API server's pods waits until its static pod's first step has had its time.
  const listPods = api.listPods.bind(api);
  const listed = Promise.withResolvers<void>();
  api.listPods = async (selector) => {
    await listed.promise;
    return listPods(selector);
  };
  const patched = api.calls.length;
  const second = await startWholeAgent("carry", { manifests: { "web.yaml": probed }, cri, api, clock });
  await Bun.sleep(1_000);
  listed.resolve();
  await until("the carried readiness logged", () => second.lines.find((l) => l.includes("probe results carried over")));
  await Bun.sleep(500); // a status computed before the list would be sent now
  const readiness = api.calls
    .slice(patched)
    .filter((c) => c.method === "patchPodStatus" && c.args[1] === "web-node1")
    .map((c) => readyOf((c.args[2] as { status: Status }).status));
  expect(readiness.filter((r) => r === "False")).toEqual([]);
  expect(readyOf((api.pods.get(mirrorKey) as { status?: Status }).status)).toBe("True");
  second.stop.abort();
  await second.agent;
}, 30_000);
