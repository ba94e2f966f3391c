import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, existsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { posix } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import type { Pod } from "../pods/schema.ts";
import { CHECKPOINT_FILE } from "./checkpoint.ts";
import { FakeDevicePlugin } from "./fake-plugin.ts";
import { DeviceError, DeviceManager, ENDPOINT_STOP_GRACE_MS, isExtendedResourceName } from "./manager.ts";
import { type HintProvider, maskOf, type PolicyName, type Scope, type TopologyHint, TopologyManager } from "../topologymanager/index.ts";

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

/** A plugin's preference: the must-include devices, then the highest IDs offered (what the default choice would not take). */
const mustThenHighest = (available: string[], must: string[], size: number) => [...must, ...available.filter((id) => !must.includes(id)).reverse()].slice(0, size);
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

async function setup(
  opts: {
    devices?: string[];
    numa?: Record<string, number[]>;
    numaNodes?: number[];
    preStart?: boolean;
    preferred?: (a: string[], m: string[], n: number) => string[];
    dir?: string;
    sourcesReady?: boolean;
    policy?: PolicyName;
    scope?: Scope;
    /** Hint providers after the device manager (as the CPU and memory managers are). */
    others?: HintProvider[];
  } = {},
) {
  const dir = opts.dir ?? mkdtempSync(posix.join(tmpdir(), "devices-"));
  if (!opts.dir) dirs.push(dir);
  const clock = new FakeClock();
  const { logger, lines } = memoryLogger();
  let changes = 0;
  const metrics = { registered: [] as string[], allocated: [] as string[] };
  let active: Pod[] = [];
  const numaNodes = opts.numaNodes ?? [0];
  const manager = new DeviceManager({
    numaNodes,
    pods: { activePods: () => active },
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
    devices: (opts.devices ?? ["d1", "d2"]).map((id) => ({ id, ...(opts.numa?.[id] ? { numa: opts.numa[id] } : {}) })),
    ...(opts.preStart ? { preStartRequired: true } : {}),
    ...(opts.preferred ? { preferredAllocation: opts.preferred } : {}),
  });
  plugins.push(plugin);
  // Admission as the agent does it: the topology manager with the device manager as its hint provider.
  const topology = new TopologyManager({
    policy: opts.policy ?? "none",
    scope: opts.scope ?? "container",
    options: { preferClosestNuma: false, maxAllowableNumaNodes: 8 },
    numa: { nodes: numaNodes, distances: new Map() },
    providers: [manager, ...(opts.others ?? [])],
    logger,
  });
  const admit = (p: Pod, others: Pod[]) => {
    active = others;
    return topology.admit(p);
  };
  return { dir, clock, manager, plugin, lines, metrics, admit, setActive: (pods: Pod[]) => void (active = pods), changes: () => changes };
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
    expect(s.admit(a, [])).toEqual({ admit: true });
    const big = pod("big", [{ name: "c", n: 2 }]);
    expect(s.admit(big, [a])).toEqual({
      admit: false,
      reason: "UnexpectedAdmissionError",
      message: "Allocate failed due to requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1, which is unexpected",
    });
    // A pod that asks nothing of the resource, or of a resource no plugin ever registered, is not the device manager's concern.
    expect(s.admit(pod("none", [{ name: "c" }]), [a])).toEqual({ admit: true });
    // Once `a` is no longer active, its device is free again.
    expect(s.admit(big, [])).toEqual({ admit: true });
  });

  test("a resource with no healthy device refuses pods asking for it", async () => {
    const s = await setup({ devices: [] });
    await s.plugin.serve();
    await s.plugin.register();
    s.plugin.setDevices([{ id: "d1", healthy: false }]);
    await until(() => s.manager.nodeResources().capacity[R] === "1", "capacity");
    expect(s.admit(pod("a", [{ name: "c", n: 1 }]), [])).toMatchObject({
      admit: false,
      reason: "UnexpectedAdmissionError",
      message: "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices example.com/dev, which is unexpected",
    });
  });

  test("runOptions allocates once per container and returns the plugin's envs, mounts, devices and annotations", async () => {
    const s = await setup({ preStart: true });
    await registered(s, "2");
    const a = pod("a", [{ name: "c", n: 2 }, { name: "plain" }]);
    expect(s.admit(a, [])).toEqual({ admit: true });
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
    s.admit(a, []);
    expect((await s.manager.runOptions(a, "c")).envs).toEqual([{ key: "FAKE_DEVICES", value: "d3" }]);
    expect(s.plugin.calls[0]).toEqual({ method: "GetPreferredAllocation", ids: ["d1", "d2", "d3"], mustInclude: [], size: 1 });
  });

  test("GetPreferredAllocation: the init container's devices handed on are must-include, the size is the container's whole request", async () => {
    const s = await setup({
      devices: ["d1", "d2", "d3", "d4"],
      preferred: mustThenHighest,
    });
    await registered(s, "4");
    const a = pod("a", [{ name: "app", n: 2 }], [{ name: "init", n: 1 }]);
    expect(s.admit(a, [])).toEqual({ admit: true });
    expect((await s.manager.runOptions(a, "init")).envs[0]?.value).toBe("d4");
    expect((await s.manager.runOptions(a, "app")).envs[0]?.value).toBe("d4,d3");
    expect(s.plugin.calls.filter((c) => c.method === "GetPreferredAllocation")).toEqual([
      { method: "GetPreferredAllocation", ids: ["d1", "d2", "d3", "d4"], mustInclude: [], size: 1 },
      { method: "GetPreferredAllocation", ids: ["d1", "d2", "d3", "d4"], mustInclude: ["d4"], size: 2 },
    ]);
  });

  test("an answer naming devices not offered is used for the offered ones and filled up as without it; a failed call fails the container with upstream's message", async () => {
    let answer: () => string[] = () => ["bogus", "d3"];
    const s = await setup({ devices: ["d1", "d2", "d3"], preferred: () => answer() });
    await registered(s, "3");
    const a = pod("a", [{ name: "c", n: 2 }]);
    s.admit(a, []);
    expect((await s.manager.runOptions(a, "c")).envs[0]?.value).toBe("d3,d1");
    answer = () => {
      throw new Error("plugin says no");
    };
    const b = pod("b", [{ name: "c", n: 1 }]);
    s.admit(b, [a]);
    s.setActive([a, b]);
    // (bun's expect().rejects stops the loop the gRPC answer needs: the rejection is caught here instead)
    const failed = await s.manager.runOptions(b, "c").then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(DeviceError);
    expect((failed as Error).message).toMatch(/^device plugin GetPreferredAllocation rpc failed with err: .*plugin says no/);
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
    expect(s.admit(a, [])).toEqual({ admit: true });
    const ids = async (c: string) => (await s.manager.runOptions(a, c)).envs[0]?.value;
    expect(await ids("init")).toBe("d1,d2");
    expect(await ids("side")).toBe("d1"); // the init container has finished when the sidecar starts (upstream reuses its devices)
    expect(await ids("app")).toBe("d2");
    // The pod holds 2 at its peak (the init container's 2, then sidecar 1 + app 1): one is left for another pod, not two.
    expect(s.admit(pod("b", [{ name: "c", n: 1 }]), [a])).toEqual({ admit: true });
    expect(s.admit(pod("c", [{ name: "c", n: 1 }]), [a, pod("b", [{ name: "c", n: 1 }])])).toMatchObject({ admit: false });
  });

  test("allocations survive a restart from the checkpoint: the same devices, no second Allocate", async () => {
    const s = await setup();
    await registered(s, "2");
    const a = pod("a", [{ name: "c", n: 1 }]);
    s.admit(a, []);
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
    expect(again.admit(pod("b", [{ name: "c", n: 2 }]), [])).toMatchObject({ admit: false, message: expect.stringContaining("Available: 1") });
    expect(again.admit(a, [])).toEqual({ admit: true });
    expect(await again.manager.runOptions(a, "c")).toEqual(before);
    expect(again.plugin.calls).toEqual([]);
  });

  test("a device's NUMA node is checkpointed with it and known again after a restart, before its plugin is back", async () => {
    const s = await setup({ devices: ["d1", "d2"], numa: { d1: [1] }, numaNodes: [0, 1] });
    await registered(s, "2");
    const a = pod("a", [{ name: "c", n: 1 }]);
    s.admit(a, []);
    await s.manager.runOptions(a, "c");
    const file = JSON.parse(readFileSync(posix.join(s.dir, CHECKPOINT_FILE), "utf8"));
    expect(file.Data.PodDeviceEntries).toMatchObject([{ PodUID: "a", DeviceIDs: { "1": ["d1"] } }]);
    await s.manager[Symbol.asyncDispose]();
    s.plugin.kill();
    const again = await setup({ dir: s.dir, sourcesReady: false, numaNodes: [0, 1] });
    expect(again.manager.devicesInUse().get("a")?.get("c")?.get(R)).toEqual([{ id: "d1", numa: [1] }]);
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
    expect(s.admit(pod("a", [{ name: "c", n: 1 }]), [])).toMatchObject({ admit: false, reason: "UnexpectedAdmissionError" });
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

  describe("topology (NUMA nodes in ListAndWatch Device.topology; upstream topology_hints_test.go cases)", () => {
    const h = (nodes: number[], preferred: boolean): TopologyHint => ({ affinity: maskOf(nodes), preferred });
    const hintsOf = (s: Awaited<ReturnType<typeof setup>>, p: Pod) => s.manager.containerHints(p, p.spec.containers[0]!);
    /** A provider that prefers one NUMA node, as the CPU manager does when only that node has the CPUs. */
    const prefers = (node: number): HintProvider => ({
      containerHints: () => ({ cpu: [h([node], true)] }),
      podHints: () => ({ cpu: [h([node], true)] }),
      allocate: () => undefined,
    });
    const onTwoNodes = { d1: [0], d2: [1], d3: [0], d4: [1], d5: [0], d6: [1] };

    test("devices without NUMA nodes: no preference; one device with a node: that node preferred", async () => {
      const plain = await setup({ devices: ["d1", "d2"], numaNodes: [0, 1] });
      await registered(plain, "2");
      expect(hintsOf(plain, pod("a", [{ name: "c", n: 1 }]))).toEqual({ [R]: undefined });
      const one = await setup({ devices: ["d1", "d2"], numa: { d2: [1] }, numaNodes: [0, 1] });
      await registered(one, "2");
      expect(hintsOf(one, pod("a", [{ name: "c", n: 1 }]))).toEqual({ [R]: [h([1], true), h([0, 1], false)] });
      // A container asking for no device resource has no hints at all.
      expect(hintsOf(one, pod("a", [{ name: "c" }]))).toBeUndefined();
    });

    test("one device per node: 1 fits either node; 2 need both, preferred as no node could hold them", async () => {
      const s = await setup({ devices: ["d1", "d2"], numa: { d1: [0], d2: [1] }, numaNodes: [0, 1] });
      await registered(s, "2");
      expect(hintsOf(s, pod("a", [{ name: "c", n: 1 }]))).toEqual({ [R]: [h([0], true), h([1], true), h([0, 1], false)] });
      expect(hintsOf(s, pod("a", [{ name: "c", n: 2 }]))).toEqual({ [R]: [h([0, 1], true)] });
      expect(hintsOf(s, pod("a", [{ name: "c", n: 3 }]))).toEqual({ [R]: [] }); // more than there are
    });

    test("2 wanted, node 0 has only one free: node 1, or both (optimal on one node, forced cross-NUMA when taken)", async () => {
      const s = await setup({ devices: ["d1", "d2", "d3", "d4"], numa: onTwoNodes, numaNodes: [0, 1] });
      await registered(s, "4");
      const holder = pod("holder", [{ name: "c", n: 1 }]);
      expect(s.admit(holder, [])).toEqual({ admit: true });
      // policy none: no hint, the devices are picked when the container is created; pick them now.
      await s.manager.runOptions(holder, "c");
      expect(s.manager.allocations().get("holder")?.get("c")?.get(R)).toEqual(["d1"]);
      s.setActive([holder]);
      expect(hintsOf(s, pod("a", [{ name: "c", n: 2 }]))).toEqual({ [R]: [h([1], true), h([0, 1], false)] });
    });

    test("already allocated (an agent restart): hints from its own devices; a different count cannot be satisfied", async () => {
      const s = await setup({ devices: ["d1", "d2", "d3", "d4"], numa: onTwoNodes, numaNodes: [0, 1], policy: "restricted", others: [prefers(1)] });
      await registered(s, "4");
      const a = pod("a", [{ name: "c", n: 2 }]);
      expect(s.admit(a, [])).toEqual({ admit: true });
      expect(s.manager.allocations().get("a")?.get("c")?.get(R)).toEqual(["d2", "d4"]);
      s.setActive([a]);
      expect(hintsOf(s, a)).toEqual({ [R]: [h([1], true), h([0, 1], false)] });
      expect(s.manager.podHints(a)).toEqual({ [R]: [h([1], true), h([0, 1], false)] });
      expect(hintsOf(s, pod("a", [{ name: "c", n: 1 }]))).toEqual({ [R]: [] });
    });

    test("restricted: the devices are picked at admission on the merged node; a pod they fit on no preferred node is refused with TopologyAffinityError and keeps nothing", async () => {
      const s = await setup({ devices: ["d1", "d2", "d3", "d4"], numa: onTwoNodes, numaNodes: [0, 1], policy: "restricted", others: [prefers(1)] });
      await registered(s, "4");
      const a = pod("a", [{ name: "c", n: 1 }]);
      expect(s.admit(a, [])).toEqual({ admit: true });
      expect(s.manager.allocations().get("a")?.get("c")?.get(R)).toEqual(["d2"]); // node 1, as the other provider prefers
      const b = pod("b", [{ name: "c", n: 2 }]); // node 1 has one left: only both nodes fit, not preferred
      expect(s.admit(b, [a])).toEqual({ admit: false, reason: "TopologyAffinityError", message: "Resources cannot be allocated with Topology locality" });
      expect(s.manager.allocations().has("b")).toBe(false);
      // Its Allocate is made when the container is created, with the devices picked at admission and no GetPreferredAllocation.
      expect((await s.manager.runOptions(a, "c")).envs).toEqual([{ key: "FAKE_DEVICES", value: "d2" }]);
      expect(s.plugin.calls).toEqual([{ method: "Allocate", ids: ["d2"] }]);
      const file = JSON.parse(readFileSync(posix.join(s.dir, CHECKPOINT_FILE), "utf8"));
      expect(file.Data.PodDeviceEntries).toMatchObject([{ PodUID: "a", ContainerName: "c", ResourceName: R }]);
    });

    test("a refused admission of a pod admitted before keeps the devices the first admission gave it", async () => {
      const s = await setup({ devices: ["d1", "d2", "d3", "d4"], numa: onTwoNodes, numaNodes: [0, 1], policy: "restricted" });
      await registered(s, "4");
      expect(s.admit(pod("a", [{ name: "c", n: 1 }]), [])).toEqual({ admit: true });
      expect(s.admit(pod("a", [{ name: "c", n: 2 }]), [])).toMatchObject({ admit: false, reason: "TopologyAffinityError" });
      expect(s.manager.allocations().get("a")?.get("c")?.get(R)).toEqual(["d1"]);
    });

    test("best-effort, 4 wanted and node 1 preferred where only 3 are: all 3 of node 1, then 1 of node 0 (upstream: unsatisfiable, prefer socket 1)", async () => {
      const s = await setup({ devices: Object.keys(onTwoNodes), numa: onTwoNodes, numaNodes: [0, 1], policy: "best-effort", others: [prefers(1)] });
      await registered(s, "6");
      const a = pod("a", [{ name: "c", n: 4 }]);
      expect(s.admit(a, [])).toEqual({ admit: true });
      expect(s.manager.allocations().get("a")?.get("c")?.get(R)).toEqual(["d2", "d4", "d6", "d1"]);
    });

    test("pod scope: an init container's devices are handed on to the app container on the same node", async () => {
      const s = await setup({ devices: Object.keys(onTwoNodes), numa: onTwoNodes, numaNodes: [0, 1], policy: "single-numa-node", scope: "pod", others: [prefers(1)] });
      await registered(s, "6");
      const a = pod("a", [{ name: "app", n: 2 }], [{ name: "init", n: 2 }]);
      expect(s.manager.podHints(a)).toEqual({ [R]: [h([0], true), h([1], true), h([0, 1], false)] });
      expect(s.admit(a, [])).toEqual({ admit: true });
      expect(s.manager.allocations().get("a")?.get("init")?.get(R)).toEqual(["d2", "d4"]);
      expect(s.manager.allocations().get("a")?.get("app")?.get(R)).toEqual(["d2", "d4"]);
    });

    test("GetPreferredAllocation chooses among the devices on the merged hint's node before Allocate; the admission's pick is free again", async () => {
      const s = await setup({
        devices: Object.keys(onTwoNodes),
        numa: onTwoNodes,
        numaNodes: [0, 1],
        policy: "restricted",
        others: [prefers(1)],
        preferred: (available) => [available[available.length - 1]!],
      });
      await registered(s, "6");
      const a = pod("a", [{ name: "c", n: 1 }]);
      expect(s.admit(a, [])).toEqual({ admit: true });
      expect(s.manager.allocations().get("a")?.get("c")?.get(R)).toEqual(["d2"]); // picked at admission, lowest ID on node 1
      expect((await s.manager.runOptions(a, "c")).envs).toEqual([{ key: "FAKE_DEVICES", value: "d6" }]);
      // Asked with node 1's devices only (fewer needed than aligned), as upstream filterByAffinity.
      expect(s.plugin.calls).toEqual([
        { method: "GetPreferredAllocation", ids: ["d2", "d4", "d6"], mustInclude: [], size: 1 },
        { method: "Allocate", ids: ["d6"] },
      ]);
      expect(s.manager.allocations().get("a")?.get("c")?.get(R)).toEqual(["d6"]);
      // Checkpointed under its NUMA node, and reported with it by the pod resources API.
      const file = JSON.parse(readFileSync(posix.join(s.dir, CHECKPOINT_FILE), "utf8"));
      expect(file.Data.PodDeviceEntries[0].DeviceIDs).toEqual({ "1": ["d6"] });
      expect(s.manager.devicesInUse().get("a")?.get("c")?.get(R)).toEqual([{ id: "d6", numa: [1] }]);
      expect(s.manager.allocatableDevices().get(R)?.slice(0, 2)).toEqual([
        { id: "d1", numa: [0] },
        { id: "d2", numa: [1] },
      ]);
      // d2 is free again: a pod wanting node 1's other two gets them.
      s.setActive([a]);
      const b = pod("b", [{ name: "c", n: 2 }]);
      expect(s.admit(b, [a])).toEqual({ admit: true });
      expect(s.manager.allocations().get("b")?.get("c")?.get(R)).toEqual(["d2", "d4"]);
    });

    test("an answer off the merged hint's node is not taken: the aligned devices fill the request", async () => {
      const s = await setup({ devices: Object.keys(onTwoNodes), numa: onTwoNodes, numaNodes: [0, 1], policy: "restricted", others: [prefers(1)], preferred: () => ["d1", "d3"] });
      await registered(s, "6");
      const a = pod("a", [{ name: "c", n: 2 }]);
      expect(s.admit(a, [])).toEqual({ admit: true });
      expect((await s.manager.runOptions(a, "c")).envs[0]?.value).toBe("d2,d4");
    });

    test("pod scope with GetPreferredAllocation: the init container chooses again, the app container takes over its choice", async () => {
      const s = await setup({
        devices: Object.keys(onTwoNodes),
        numa: onTwoNodes,
        numaNodes: [0, 1],
        policy: "single-numa-node",
        scope: "pod",
        others: [prefers(1)],
        preferred: mustThenHighest,
      });
      await registered(s, "6");
      const a = pod("a", [{ name: "app", n: 2 }], [{ name: "init", n: 2 }]);
      expect(s.admit(a, [])).toEqual({ admit: true });
      expect((await s.manager.runOptions(a, "init")).envs[0]?.value).toBe("d6,d4");
      expect((await s.manager.runOptions(a, "app")).envs[0]?.value).toBe("d4,d6");
      expect(s.plugin.calls.filter((c) => c.method === "GetPreferredAllocation")).toEqual([
        { method: "GetPreferredAllocation", ids: ["d2", "d4", "d6"], mustInclude: [], size: 2 },
      ]);
    });

    test("with policy none a resource with NUMA nodes is still picked at admission, lowest IDs first", async () => {
      const s = await setup({ devices: ["d1", "d2"], numa: { d1: [1], d2: [0] }, numaNodes: [0, 1] });
      await registered(s, "2");
      const a = pod("a", [{ name: "c", n: 1 }]);
      expect(s.admit(a, [])).toEqual({ admit: true });
      expect(s.manager.allocations().get("a")?.get("c")?.get(R)).toEqual(["d1"]);
    });
  });
});
