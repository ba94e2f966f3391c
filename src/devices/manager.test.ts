import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, existsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { posix } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import type { Pod } from "../pods/schema.ts";
import { CHECKPOINT_FILE } from "./checkpoint.ts";
import { FakeDevicePlugin } from "./fake-plugin.ts";
import { DeviceManager, ENDPOINT_STOP_GRACE_MS, isExtendedResourceName } from "./manager.ts";

const R = "example.com/dev";

const pod = (uid: string, containers: { name: string; n?: number }[], init: { name: string; n?: number; sidecar?: boolean }[] = []): Pod =>
  ({
    metadata: { name: `p-${uid}`, namespace: "default", uid },
    spec: {
      containers: containers.map((c) => ({ name: c.name, image: "x", ...(c.n ? { resources: { limits: { [R]: String(c.n) } } } : {}) })),
      initContainers: init.map((c) => ({
        name: c.name,
        image: "x",
        ...(c.sidecar ? { restartPolicy: "Always" } : {}),
        ...(c.n ? { resources: { limits: { [R]: String(c.n) } } } : {}),
      })),
    },
  }) as unknown as Pod;

const until = async (cond: () => boolean, what: string) => {
  for (let i = 0; i < 200; i++) {
    if (cond()) return;
    await Bun.sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
};

let dirs: string[] = [];
let disposables: { [Symbol.asyncDispose](): Promise<void> }[] = [];
let plugins: FakeDevicePlugin[] = [];
afterEach(async () => {
  for (const p of plugins) p.kill();
  for (const d of disposables) await d[Symbol.asyncDispose]();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
  disposables = [];
  plugins = [];
});

async function setup(opts: { devices?: string[]; preStart?: boolean; preferred?: (a: string[], m: string[], n: number) => string[]; dir?: string; sourcesReady?: boolean } = {}) {
  const dir = opts.dir ?? mkdtempSync(posix.join(tmpdir(), "devices-"));
  if (!opts.dir) dirs.push(dir);
  const clock = new FakeClock();
  const { logger, lines } = memoryLogger();
  let changes = 0;
  const metrics = { registered: [] as string[], allocated: [] as string[] };
  const manager = new DeviceManager({
    dir,
    clock,
    logger,
    nodeStatus: { request: () => void changes++ },
    sources: { allSourcesReady: () => opts.sourcesReady ?? true },
    metrics: { devicePluginRegistered: (r) => void metrics.registered.push(r), devicePluginAllocated: (r) => void metrics.allocated.push(r) },
  });
  disposables.push(manager);
  await manager.start();
  const plugin = new FakeDevicePlugin({
    dir,
    resource: R,
    endpoint: "fake.sock",
    devices: (opts.devices ?? ["d1", "d2"]).map((id) => ({ id })),
    ...(opts.preStart ? { preStartRequired: true } : {}),
    ...(opts.preferred ? { preferredAllocation: opts.preferred } : {}),
  });
  plugins.push(plugin);
  return { dir, clock, manager, plugin, lines, metrics, changes: () => changes };
}

async function registered(s: Awaited<ReturnType<typeof setup>>, allocatable: string) {
  await s.plugin.serve();
  await s.plugin.register();
  await until(() => s.manager.nodeResources().allocatable[R] === allocatable, `allocatable ${allocatable}`);
}

describe("DeviceManager", () => {
  test("a registered plugin's healthy devices are allocatable, all of them capacity", async () => {
    const s = await setup();
    await registered(s, "2");
    s.plugin.setDevices([{ id: "d1" }, { id: "d2", healthy: false }]);
    await until(() => s.manager.nodeResources().allocatable[R] === "1", "an unhealthy device");
    expect(s.manager.nodeResources()).toEqual({ capacity: { [R]: "2" }, allocatable: { [R]: "1" } });
    expect(s.changes()).toBeGreaterThanOrEqual(2);
  });

  test("registration with an unsupported version or a name that is not an extended resource is refused", async () => {
    const s = await setup();
    await s.plugin.serve();
    await expect(s.plugin.register("v1alpha")).rejects.toThrow(/Unsupported version: v1alpha/);
    const bad = new FakeDevicePlugin({ dir: s.dir, resource: "kubernetes.io/dev", endpoint: "bad.sock", devices: [] });
    await expect(bad.register()).rejects.toThrow(/invalid name of device plugin socket: kubernetes.io\/dev/);
    expect(s.manager.nodeResources()).toEqual({ capacity: {}, allocatable: {} });
  });

  test("admission reserves devices and refuses a pod asking more than is free, with upstream's reason", async () => {
    const s = await setup();
    await registered(s, "2");
    const a = pod("a", [{ name: "c", n: 1 }]);
    expect(s.manager.admit(a, [])).toEqual({ admit: true });
    const big = pod("big", [{ name: "c", n: 2 }]);
    expect(s.manager.admit(big, [a])).toEqual({
      admit: false,
      reason: "UnexpectedAdmissionError",
      message: "Allocate failed due to requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1, which is unexpected",
    });
    // A pod that asks nothing of the resource, or of a resource no plugin ever registered, is not the device manager's concern.
    expect(s.manager.admit(pod("none", [{ name: "c" }]), [a])).toEqual({ admit: true });
    // Once `a` is no longer active, its device is free again.
    expect(s.manager.admit(big, [])).toEqual({ admit: true });
  });

  test("a resource with no healthy device refuses pods asking for it", async () => {
    const s = await setup({ devices: [] });
    await s.plugin.serve();
    await s.plugin.register();
    s.plugin.setDevices([{ id: "d1", healthy: false }]);
    await until(() => s.manager.nodeResources().capacity[R] === "1", "capacity");
    expect(s.manager.admit(pod("a", [{ name: "c", n: 1 }]), [])).toMatchObject({
      admit: false,
      reason: "UnexpectedAdmissionError",
      message: "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices example.com/dev, which is unexpected",
    });
  });

  test("runOptions allocates once per container and returns the plugin's envs, mounts, devices and annotations", async () => {
    const s = await setup({ preStart: true });
    await registered(s, "2");
    const a = pod("a", [{ name: "c", n: 2 }, { name: "plain" }]);
    expect(s.manager.admit(a, [])).toEqual({ admit: true });
    const opts = await s.manager.runOptions(a, "c");
    expect(opts).toEqual({
      envs: [{ key: "FAKE_DEVICES", value: "d1,d2" }],
      mounts: [
        { containerPath: "/dev-data/d1", hostPath: "/tmp/d1", readonly: true },
        { containerPath: "/dev-data/d2", hostPath: "/tmp/d2", readonly: true },
      ],
      devices: [
        { containerPath: "/dev/fake-d1", hostPath: "/dev/null", permissions: "rw" },
        { containerPath: "/dev/fake-d2", hostPath: "/dev/null", permissions: "rw" },
      ],
      annotations: { "fake.example.com/devices": "d1,d2" },
      cdiDevices: [],
    });
    expect(await s.manager.runOptions(a, "plain")).toEqual({ envs: [], mounts: [], devices: [], annotations: {}, cdiDevices: [] });
    await s.manager.runOptions(a, "c"); // a restart of the container: no second Allocate, PreStartContainer again
    expect(s.metrics).toEqual({ registered: [R], allocated: [R] });
    expect(s.plugin.calls).toEqual([
      { method: "Allocate", ids: ["d1", "d2"] },
      { method: "PreStartContainer", ids: ["d1", "d2"] },
      { method: "PreStartContainer", ids: ["d1", "d2"] },
    ]);
  });

  test("GetPreferredAllocation is asked when offered and its choice taken", async () => {
    const s = await setup({ devices: ["d1", "d2", "d3"], preferred: (available) => [available[available.length - 1]!] });
    await registered(s, "3");
    const a = pod("a", [{ name: "c", n: 1 }]);
    s.manager.admit(a, []);
    expect((await s.manager.runOptions(a, "c")).envs).toEqual([{ key: "FAKE_DEVICES", value: "d3" }]);
    expect(s.plugin.calls[0]).toEqual({ method: "GetPreferredAllocation", ids: ["d1", "d2", "d3"] });
  });

  test("an init container's devices are handed on to the containers after it; a sidecar keeps what it took", async () => {
    const s = await setup({ devices: ["d1", "d2", "d3"] });
    await registered(s, "3");
    const a = pod(
      "a",
      [{ name: "app", n: 1 }],
      [
        { name: "init", n: 2 },
        { name: "side", n: 1, sidecar: true },
      ],
    );
    expect(s.manager.admit(a, [])).toEqual({ admit: true });
    const ids = async (c: string) => (await s.manager.runOptions(a, c)).envs[0]?.value;
    expect(await ids("init")).toBe("d1,d2");
    expect(await ids("side")).toBe("d1"); // the init container has finished when the sidecar starts (upstream reuses its devices)
    expect(await ids("app")).toBe("d2");
    // The pod holds 2 at its peak (the init container's 2, then sidecar 1 + app 1): one is left for another pod, not two.
    expect(s.manager.admit(pod("b", [{ name: "c", n: 1 }]), [a])).toEqual({ admit: true });
    expect(s.manager.admit(pod("c", [{ name: "c", n: 1 }]), [a, pod("b", [{ name: "c", n: 1 }])])).toMatchObject({ admit: false });
  });

  test("allocations survive a restart from the checkpoint: the same devices, no second Allocate", async () => {
    const s = await setup();
    await registered(s, "2");
    const a = pod("a", [{ name: "c", n: 1 }]);
    s.manager.admit(a, []);
    const before = await s.manager.runOptions(a, "c");
    const file = JSON.parse(readFileSync(posix.join(s.dir, CHECKPOINT_FILE), "utf8"));
    expect(file.Data.PodDeviceEntries).toMatchObject([{ PodUID: "a", ContainerName: "c", ResourceName: R, DeviceIDs: { "-1": ["d1"] } }]);
    expect(file.Data.RegisteredDevices).toEqual({ [R]: ["d1", "d2"] });
    await s.manager[Symbol.asyncDispose]();
    s.plugin.kill();

    // The agent restarts with the sources not ready yet: `a` is not known, and its device must not be given away.
    const again = await setup({ dir: s.dir, sourcesReady: false });
    expect(existsSync(posix.join(s.dir, "fake.sock"))).toBe(false); // stale plugin sockets are removed at start
    expect(again.manager.nodeResources()).toEqual({ capacity: { [R]: "0" }, allocatable: { [R]: "0" } });
    await registered(again, "2");
    expect(again.manager.admit(pod("b", [{ name: "c", n: 2 }]), [])).toMatchObject({ admit: false, message: expect.stringContaining("Available: 1") });
    expect(again.manager.admit(a, [])).toEqual({ admit: true });
    expect(await again.manager.runOptions(a, "c")).toEqual(before);
    expect(again.plugin.calls).toEqual([]);
  });

  test("a corrupt checkpoint is reported and ignored", async () => {
    const dir = mkdtempSync(posix.join(tmpdir(), "devices-"));
    dirs.push(dir);
    writeFileSync(posix.join(dir, CHECKPOINT_FILE), '{"Data":{"PodDeviceEntries":[],"RegisteredDevices":{}},"Checksum":1}');
    const s = await setup({ dir });
    expect(s.lines.join("\n")).toContain("checksum mismatch");
    expect(s.manager.nodeResources()).toEqual({ capacity: {}, allocatable: {} });
  });

  test("a plugin dying mid-ListAndWatch makes its devices unhealthy at once and capacity 0 after the grace period", async () => {
    const s = await setup();
    await registered(s, "2");
    s.plugin.kill();
    await until(() => s.manager.nodeResources().allocatable[R] === "0", "allocatable 0");
    expect(s.manager.nodeResources().capacity[R]).toBe("2");
    expect(s.lines.join("\n")).toContain("device plugin disconnected");
    expect(s.manager.admit(pod("a", [{ name: "c", n: 1 }]), [])).toMatchObject({ admit: false, reason: "UnexpectedAdmissionError" });
    s.clock.advance(ENDPOINT_STOP_GRACE_MS);
    expect(s.manager.nodeResources()).toEqual({ capacity: { [R]: "0" }, allocatable: { [R]: "0" } });
    // It comes back and registers again.
    await registered(s, "2");
  });

  test("extended resource names", () => {
    expect(isExtendedResourceName("example.com/dev")).toBe(true);
    expect(isExtendedResourceName("nvidia.com/gpu")).toBe(true);
    expect(isExtendedResourceName("kubernetes.io/dev")).toBe(false);
    expect(isExtendedResourceName("cpu")).toBe(false);
    expect(isExtendedResourceName("requests.example.com/x")).toBe(false);
  });
});
