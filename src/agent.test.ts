/**
 * The whole agent in-process: runAgent with the fake CRI and the fake API,
 * a static pod from a manifest directory, every subsystem real. It proves
 * the wiring (the pod runs, its mirror pod reports Running) and that stopping
 * the agent leaves nothing behind: every timer and sleep taken from the
 * clock is done or cancelled, every watch on the API is closed, the kubelet
 * API port no longer accepts connections.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runAgent } from "./agent.ts";
import { FakeKubeApi } from "./api/fake.ts";
import { loadConfig } from "./config/index.ts";
import { ContainerState } from "./cri/index.ts";
import { FakeCri } from "./cri/fake.ts";
import { realClock, type Clock } from "./util/clock.ts";
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

test("the whole agent runs a static pod and stops with no timer, watch or port left open", async () => {
  const manifests = join(dir, "manifests");
  mkdirSync(manifests);
  writeFileSync(
    join(manifests, "web.yaml"),
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\nspec:\n  containers:\n  - name: app\n    image: registry.local/app:1\n",
  );
  const configFile = JSON.stringify({
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    staticPodPath: manifests,
    podLogsDir: join(dir, "logs"),
    cgroupsPerQOS: false,
    enforceNodeAllocatable: [],
    port: await freePort(), // not 10250 (port 0 defaults to it): the server runs and must be closed at the end
    readOnlyPort: 0,
    healthzPort: 0,
  });
  const loaded = loadConfig(["--config=/agent/config.json", "--hostname-override=node1", `--root-dir=${join(dir, "root")}`, `--cert-dir=${join(dir, "pki")}`], {
    readFile: () => configFile,
    hostname: () => "node1",
  });
  if (loaded.kind !== "run") throw new Error(`config: ${JSON.stringify(loaded)}`);

  const clock = new CountingClock();
  const cri = new FakeCri({ clock });
  const api = new FakeKubeApi();
  const { logger, lines } = memoryLogger(4);
  const stop = new AbortController();
  const agent = runAgent(loaded.config, { logger, signal: stop.signal, clock, cri, api, mounter: new FakeMounter(), version: "Kubernetes v1.34.0-bunlet+test", random: () => 0.5 });
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
  expect(running.labels["io.kubernetes.pod.name"]).toBe("web-node1");
  // Static pods start without waiting for the node's registration (as upstream's): the Node may come a moment later.
  expect(await until("the node to register", () => api.nodes.has("node1") || undefined)).toBe(true);
  const mirror = await until("the mirror pod to report Running", () => {
    const pod = api.pods.get("default/web-node1") as { status?: { phase?: string } } | undefined;
    return pod?.status?.phase === "Running" ? pod : undefined;
  });
  expect(mirror.status?.phase).toBe("Running");
  const serving = lines.find((l) => l.includes("serving the kubelet API"));
  const port = Number(/:(\d+)/.exec(serving?.split("address")[1] ?? "")?.[1]);
  expect(port).toBeGreaterThan(0);

  stop.abort();
  expect(await agent).toBeUndefined();
  expect([...clock.pending.values()]).toEqual([]);
  expect(api.openWatches).toBe(0);
  expect(await portRefuses(port)).toBe(true);
  // The pod keeps running (an agent restart adopts it): nothing was stopped.
  expect(cri.calls.filter((c) => c.method === "stopContainer" || c.method === "stopPodSandbox")).toEqual([]);
}, 30_000);
