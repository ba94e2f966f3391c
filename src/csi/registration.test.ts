import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeKubeApi } from "../api/fake.ts";
import { FakeClock, realClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { GrpcCsiNodeClient } from "./client.ts";
import { CsiDriverNotFoundError, CsiDrivers, highestSupportedVersion, MIGRATED_PLUGINS_ANNOTATION, NODE_ID_ANNOTATION } from "./drivers.ts";
import { FakeCsiDriver, FakeRegistrar } from "./fake-driver.ts";
import { CSI_PLUGIN_TYPE, PluginWatcher } from "./plugin-watcher.ts";

let cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

/** Waits (real time) for what a watch or a timer's scan brings about; fails after 5 s. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 250 && !done(); i++) await Bun.sleep(20);
  expect(done()).toBe(true);
}

function tmp(): string {
  // Short: unix socket paths are limited to 108 bytes.
  const dir = mkdtempSync(join(tmpdir(), "csi-"));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function fakeApi(nodeName = "n1") {
  const api = new FakeKubeApi();
  api.nodes.set(nodeName, { metadata: { name: nodeName, uid: "node-uid", labels: { "kubernetes.io/hostname": nodeName } } });
  return api;
}

async function setup(opts: { driver?: Partial<ConstructorParameters<typeof FakeCsiDriver>[0]>; versions?: string[]; type?: string; endpoint?: "own" | "separate" } = {}) {
  const root = tmp();
  const registry = join(root, "plugins_registry");
  const driverDir = join(root, "plugins", "fake.csi.example.com");
  mkdirSync(registry, { recursive: true });
  mkdirSync(driverDir, { recursive: true });
  const driver = new FakeCsiDriver({ name: "fake.csi.example.com", nodeId: "node-id-1", topology: { "topology.fake/zone": "z1" }, maxVolumesPerNode: 7, ...opts.driver });
  const csiSocket = join(driverDir, "csi.sock");
  await driver.serve(csiSocket);
  cleanup.push(() => driver.close());
  const api = fakeApi();
  const { logger, lines } = memoryLogger();
  const drivers = new CsiDrivers({ nodeName: "n1", api, node: { uid: () => "node-uid" }, clock: realClock, logger, updateAttempts: 1 });
  cleanup.push(() => drivers.close());
  const watcher = new PluginWatcher({ dir: registry, handlers: { [CSI_PLUGIN_TYPE]: drivers }, clock: realClock, logger, periodMs: 3_600_000, resyncPeriodMs: 3_600_000 });
  cleanup.push(() => watcher[Symbol.asyncDispose]());
  const registrar = new FakeRegistrar({ type: opts.type ?? CSI_PLUGIN_TYPE, name: "fake.csi.example.com", endpoint: csiSocket, supportedVersions: opts.versions ?? ["1.0.0"] });
  const regSocket = join(registry, "fake.csi.example.com-reg.sock");
  return { root, registry, driver, api, drivers, watcher, registrar, regSocket, csiSocket, lines };
}

describe("plugin registration (pluginregistration.v1 over plugins_registry)", () => {
  test("a registrar's socket registers the CSI driver: NodeGetInfo → CSINode entry, node ID annotation, topology labels; success is notified", async () => {
    const s = await setup();
    await s.registrar.serve(s.regSocket);
    cleanup.push(() => s.registrar.close());
    await s.watcher.start();
    expect(s.registrar.statuses).toEqual([{ pluginRegistered: true, error: "" }]);
    expect(s.drivers.registered()).toEqual(["fake.csi.example.com"]);
    expect(s.driver.callsOf("NodeGetInfo")).toHaveLength(1);
    const csiNode = s.api.csiNodes.get("n1")!;
    expect(csiNode.metadata?.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: "n1", uid: "node-uid" }]);
    expect(csiNode.spec).toEqual({ drivers: [{ name: "fake.csi.example.com", nodeID: "node-id-1", topologyKeys: ["topology.fake/zone"], allocatable: { count: 7 } }] });
    const meta = s.api.nodes.get("n1")!.metadata as { labels: Record<string, string>; annotations: Record<string, string> };
    expect(meta.labels["topology.fake/zone"]).toBe("z1");
    expect(JSON.parse(meta.annotations[NODE_ID_ANNOTATION]!)).toEqual({ "fake.csi.example.com": "node-id-1" });
    // The driver is reachable through the registry by name.
    expect(await s.drivers.client("fake.csi.example.com").pluginInfo()).toEqual({ name: "fake.csi.example.com", vendorVersion: "0.0.1" });
    // A rescan with nothing changed does not register again.
    await s.watcher.scanNow();
    expect(s.registrar.statuses).toHaveLength(1);
  });

  test("the socket going away deregisters: the CSINode entry and the node ID annotation key are removed", async () => {
    const s = await setup();
    await s.registrar.serve(s.regSocket);
    await s.watcher.start();
    expect(s.api.csiNodes.get("n1")!.spec).toMatchObject({ drivers: [{ name: "fake.csi.example.com" }] });
    s.registrar.close(); // removes the socket file
    await s.watcher.scanNow();
    expect(s.drivers.registered()).toEqual([]);
    expect(s.api.csiNodes.get("n1")!.spec).toEqual({ drivers: [] });
    const annotations = (s.api.nodes.get("n1")!.metadata as { annotations?: Record<string, string> }).annotations ?? {};
    expect(annotations[NODE_ID_ANNOTATION]).toBeUndefined();
    expect(() => s.drivers.client("fake.csi.example.com")).toThrow(CsiDriverNotFoundError);
  });

  test("an unsupported CSI version is refused and told so; nothing reaches the API", async () => {
    const s = await setup({ versions: ["0.3.0"] });
    await s.registrar.serve(s.regSocket);
    cleanup.push(() => s.registrar.close());
    await s.watcher.start();
    expect(s.registrar.statuses).toHaveLength(1);
    expect(s.registrar.statuses[0]!.pluginRegistered).toBe(false);
    expect(s.registrar.statuses[0]!.error).toContain("none of the CSI versions reported by this driver are supported");
    expect(s.drivers.registered()).toEqual([]);
    expect(s.api.csiNodes.size).toBe(0);
  });

  test("an unknown plugin type is refused with upstream's message", async () => {
    const s = await setup({ type: "DRAPlugin" });
    await s.registrar.serve(s.regSocket);
    cleanup.push(() => s.registrar.close());
    await s.watcher.start();
    expect(s.registrar.statuses[0]).toEqual({ pluginRegistered: false, error: `no handler registered for plugin type: DRAPlugin at socket ${s.regSocket}` });
  });

  test("a failing NodeGetInfo fails the registration (driver not kept) and it is retried after the back-off", async () => {
    const s = await setup();
    const clock = new FakeClock(0);
    const watcher = new PluginWatcher({ dir: s.registry, handlers: { [CSI_PLUGIN_TYPE]: s.drivers }, clock, logger: memoryLogger().logger, periodMs: 3_600_000 });
    cleanup.push(() => watcher[Symbol.asyncDispose]());
    s.driver.failures.set("NodeGetInfo", { code: 14, message: "driver not ready" });
    await s.registrar.serve(s.regSocket);
    cleanup.push(() => s.registrar.close());
    await watcher.scanNow();
    expect(s.registrar.statuses[0]!.pluginRegistered).toBe(false);
    expect(s.registrar.statuses[0]!.error).toContain("driver not ready");
    expect(s.drivers.registered()).toEqual([]);
    await watcher.scanNow(); // within the back-off: not retried
    expect(s.registrar.statuses).toHaveLength(1);
    clock.advance(500);
    await watcher.scanNow();
    expect(s.registrar.statuses[1]).toEqual({ pluginRegistered: true, error: "" });
    expect(s.drivers.registered()).toEqual(["fake.csi.example.com"]);
  });

  test("with inotify a socket is registered when it appears, also in a new subdirectory, and deregistered when it goes, without any timed scan", async () => {
    const s = await setup();
    await s.watcher.start();
    expect(s.watcher.watching()).toBe(true);
    expect(s.drivers.registered()).toEqual([]);
    // Both scan periods are an hour here: only the directory's events can bring these about.
    mkdirSync(join(s.registry, "sub"));
    await s.registrar.serve(join(s.registry, "sub", "reg.sock"));
    await until(() => s.registrar.statuses.length === 1);
    expect(s.registrar.statuses).toEqual([{ pluginRegistered: true, error: "" }]);
    expect(s.drivers.registered()).toEqual(["fake.csi.example.com"]);
    s.registrar.close(); // removes the socket file
    await until(() => s.drivers.registered().length === 0);
    expect(s.api.csiNodes.get("n1")!.spec).toEqual({ drivers: [] });
  });

  test("with inotify a quiet directory is not scanned every second: the safety-net rescan comes after resyncPeriodMs", async () => {
    const s = await setup();
    const clock = new FakeClock(0);
    // A watch that reports nothing: a missed event, as when the kernel's queue overflows.
    const watcher = new PluginWatcher({ dir: s.registry, handlers: { [CSI_PLUGIN_TYPE]: s.drivers }, clock, logger: memoryLogger().logger, watchDir: () => ({ close() {} }) });
    cleanup.push(() => watcher[Symbol.asyncDispose]());
    await watcher.start();
    await s.registrar.serve(s.regSocket);
    cleanup.push(() => s.registrar.close());
    clock.advance(59_000);
    await Bun.sleep(200);
    expect(s.registrar.statuses).toEqual([]);
    clock.advance(1_000);
    await until(() => s.drivers.registered().length === 1);
  });

  test("a failed registration is retried by a timer at its back-off, not only on the next event", async () => {
    const s = await setup();
    const clock = new FakeClock(0);
    const watcher = new PluginWatcher({ dir: s.registry, handlers: { [CSI_PLUGIN_TYPE]: s.drivers }, clock, logger: memoryLogger().logger, watchDir: () => ({ close() {} }) });
    cleanup.push(() => watcher[Symbol.asyncDispose]());
    s.driver.failures.set("NodeGetInfo", { code: 14, message: "driver not ready" });
    await s.registrar.serve(s.regSocket);
    cleanup.push(() => s.registrar.close());
    await watcher.start();
    expect(s.registrar.statuses[0]!.pluginRegistered).toBe(false);
    clock.advance(499);
    await Bun.sleep(100);
    expect(s.registrar.statuses).toHaveLength(1);
    clock.advance(1);
    await until(() => s.registrar.statuses.length === 2);
    expect(s.registrar.statuses[1]).toEqual({ pluginRegistered: true, error: "" });
  });

  test("when the directory cannot be watched (or the watch fails later) it says so and scans every second", async () => {
    for (const failure of ["at start", "later"] as const) {
      const s = await setup();
      const clock = new FakeClock(0);
      const { logger, lines } = memoryLogger();
      let fail: ((err: unknown) => void) | undefined;
      const watchDir = (_dir: string, _onChange: () => void, onError: (err: unknown) => void) => {
        if (failure === "at start") throw new Error("ENOSPC: inotify watch limit reached");
        fail = onError;
        return { close() {} };
      };
      const watcher = new PluginWatcher({ dir: s.registry, handlers: { [CSI_PLUGIN_TYPE]: s.drivers }, clock, logger, watchDir });
      cleanup.push(() => watcher[Symbol.asyncDispose]());
      await watcher.start();
      fail?.(new Error("inotify queue overflow"));
      expect(watcher.watching()).toBe(false);
      expect(lines.some((l) => l.includes("cannot watch the plugin registration directory; scanning it every period instead"))).toBe(true);
      await s.registrar.serve(s.regSocket);
      cleanup.push(() => s.registrar.close());
      clock.advance(1_000);
      await until(() => s.drivers.registered().length === 1);
    }
  });

  test("a second driver keeps the first one's CSINode entry and node ID", async () => {
    const s = await setup();
    await s.registrar.serve(s.regSocket);
    cleanup.push(() => s.registrar.close());
    const other = new FakeCsiDriver({ name: "other.csi.example.com", nodeId: "other-id" });
    const otherSocket = join(s.root, "plugins", "other.sock");
    await other.serve(otherSocket);
    cleanup.push(() => other.close());
    const otherReg = new FakeRegistrar({ type: CSI_PLUGIN_TYPE, name: "other.csi.example.com", endpoint: `unix://${otherSocket}`, supportedVersions: ["v1.5.0"] });
    await otherReg.serve(join(s.registry, "other-reg.sock"));
    cleanup.push(() => otherReg.close());
    await s.watcher.start();
    const drivers = (s.api.csiNodes.get("n1")!.spec as { drivers: { name: string; nodeID: string; topologyKeys: string[]; allocatable?: unknown }[] }).drivers;
    expect(drivers.map((d) => d.name).sort()).toEqual(["fake.csi.example.com", "other.csi.example.com"]);
    expect(drivers.find((d) => d.name === "other.csi.example.com")).toEqual({ name: "other.csi.example.com", nodeID: "other-id", topologyKeys: [] });
    const ann = (s.api.nodes.get("n1")!.metadata as { annotations: Record<string, string> }).annotations;
    expect(JSON.parse(ann[NODE_ID_ANNOTATION]!)).toEqual({ "fake.csi.example.com": "node-id-1", "other.csi.example.com": "other-id" });
  });
});

describe("CSI versions", () => {
  test("the highest 1.x wins; others are refused", () => {
    expect(highestSupportedVersion(["0.3.0", "1.0.0", "1.2.0", "2.0.0"])).toEqual([1, 2, 0]);
    expect(highestSupportedVersion(["v1.5"])).toEqual([1, 5, 0]);
    expect(() => highestSupportedVersion([])).toThrow("empty array");
    expect(() => highestSupportedVersion(["0.3.0"])).toThrow("none of the CSI versions");
  });
});

describe("CSI node client", () => {
  test("speaks csi.v1 Node: capabilities by name, stage/publish requests carry every field", async () => {
    const dir = tmp();
    const driver = new FakeCsiDriver({ name: "d", nodeId: "x", stageUnstage: true });
    await driver.serve(join(dir, "csi.sock"));
    cleanup.push(() => driver.close());
    const client = new GrpcCsiNodeClient(`unix://${join(dir, "csi.sock")}`);
    cleanup.push(() => client.close());
    expect([...(await client.capabilities())]).toEqual(["STAGE_UNSTAGE_VOLUME"]);
    const capability = { accessType: { oneofKind: "mount" as const, mount: { fsType: "ext4", mountFlags: ["noatime"], volumeMountGroup: "" } }, accessMode: { mode: 1 } };
    await client.stage({ volumeId: "v1", stagingTargetPath: join(dir, "stage"), publishContext: { a: "b" }, volumeContext: { c: "d" }, secrets: {}, capability });
    await client.publish({
      volumeId: "v1",
      stagingTargetPath: join(dir, "stage"),
      targetPath: join(dir, "target"),
      publishContext: {},
      volumeContext: { "csi.storage.k8s.io/ephemeral": "true" },
      secrets: { s: "t" },
      capability,
      readonly: true,
    });
    await client.unpublish("v1", join(dir, "target"));
    await client.unstage("v1", join(dir, "stage"));
    expect(driver.callsOf("NodeStageVolume")[0]).toMatchObject({ volumeId: "v1", publishContext: { a: "b" }, volumeContext: { c: "d" }, volumeCapability: capability });
    expect(driver.callsOf("NodePublishVolume")[0]).toMatchObject({
      targetPath: join(dir, "target"),
      readonly: true,
      secrets: { s: "t" },
      volumeContext: { "csi.storage.k8s.io/ephemeral": "true" },
    });
    expect(driver.callsOf("NodeUnpublishVolume")[0]).toEqual({ volumeId: "v1", targetPath: join(dir, "target") });
    expect(driver.callsOf("NodeUnstageVolume")[0]).toEqual({ volumeId: "v1", stagingTargetPath: join(dir, "stage") });
  });
});

describe("CSINode at startup (upstream initializeCSINode)", () => {
  const migrated =
    "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume";
  const drivers = (api: FakeKubeApi) =>
    new CsiDrivers({ nodeName: "n1", api, node: { uid: () => "node-uid" }, clock: new FakeClock(), logger: memoryLogger().logger, updateAttempts: 1 });

  test("created with no drivers, owned by the Node, with upstream's migrated-plugins annotation, before any driver registers", async () => {
    const api = fakeApi();
    await drivers(api).initializeCsiNode();
    expect(api.csiNodes.get("n1")).toMatchObject({
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "n1", annotations: { [MIGRATED_PLUGINS_ANNOTATION]: migrated }, ownerReferences: [{ apiVersion: "v1", kind: "Node", name: "n1", uid: "node-uid" }] },
      spec: { drivers: [] },
    });
  });

  test("an existing CSINode keeps its drivers and gets the annotation; a second run changes nothing", async () => {
    const api = fakeApi();
    const entry = { name: "d", nodeID: "x", topologyKeys: [] };
    api.csiNodes.set("n1", { apiVersion: "storage.k8s.io/v1", kind: "CSINode", metadata: { name: "n1", annotations: { other: "kept" } }, spec: { drivers: [entry] } });
    const d = drivers(api);
    await d.initializeCsiNode();
    const after = api.csiNodes.get("n1")!;
    expect(after.metadata?.annotations).toEqual({ other: "kept", [MIGRATED_PLUGINS_ANNOTATION]: migrated });
    expect(after.spec).toEqual({ drivers: [entry] });
    let writes = 0;
    const update = api.updateCSINode.bind(api);
    api.updateCSINode = async (o) => (writes++, update(o));
    await d.initializeCsiNode();
    expect(writes).toBe(0);
  });

  test("without the Node object it fails (and is retried by the caller's back-off), creating nothing", async () => {
    const api = new FakeKubeApi();
    expect(
      await drivers(api)
        .initializeCsiNode()
        .then(
          () => "",
          (e: Error) => e.message,
        ),
    ).toContain("failed to initialize CSINode");
    expect(api.csiNodes.size).toBe(0);
  });
});
