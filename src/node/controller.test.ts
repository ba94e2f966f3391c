import { describe, expect, test } from "bun:test";
import { FakeKubeApi } from "../api/fake.ts";
import { applyDefaults } from "../config/defaults.ts";
import type { KubeletConfiguration } from "../config/index.ts";
import { FakeCri } from "../cri/fake.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { LEASE_NAMESPACE, NodeController, statusPatch, type ExtendedResources, type NodePodCidr, type NodePressure, type StorageHealth } from "./controller.ts";
import { nodePodCidrs } from "./pod-cidr.ts";
import type { MachineInfo } from "./machine.ts";
import type { NodeCondition } from "./status.ts";
import { NodeRegistration } from "./registration.ts";
import { Requests } from "../util/requests.ts";

const machine: MachineInfo = {
  machineID: "m1",
  systemUUID: "s1",
  bootID: "b1",
  kernelVersion: "6.1.0",
  osImage: "Debian GNU/Linux 12 (bookworm)",
  architecture: "amd64",
  cpuCores: 2,
  memoryBytes: 8 * 1024 ** 3,
  ephemeralStorageBytes: 100 * 1024 ** 3,
  hostname: "host",
  hugePages: [],
};

function setup(
  over: Partial<KubeletConfiguration> = {},
  more: { extended?: ExtendedResources; pressure?: NodePressure; storage?: StorageHealth; podCidr?: NodePodCidr; random?: () => number } = {},
) {
  const clock = new FakeClock();
  const api = new FakeKubeApi();
  const cri = new FakeCri({ clock, images: ["busybox:1.0"] });
  const config = { ...applyDefaults({ apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration" } as never), ...over } as KubeletConfiguration;
  let plegOk = true;
  const registration = new NodeRegistration();
  const statusRequests = new Requests<void>();
  const controller = new NodeController({
    registration,
    statusRequests,
    api,
    cri,
    pleg: { healthy: () => (plegOk ? { ok: true, message: "ok" } : { ok: false, message: "pleg was last seen active 4m0s ago" }) },
    id: { nodeName: "n1", nodeIPs: [], nodeLabels: { "node.example.com/zone": "a" }, kubeletVersion: "v1.34.0-bunlet" },
    machine,
    internalIP: "192.0.2.10",
    config,
    clock,
    logger: memoryLogger().logger,
    // 0: the loops wait their bare period (no jitter), and the first unchanged report comes half a report period early.
    random: more.random ?? (() => 0),
    ...(more.extended ? { extendedResources: more.extended } : {}),
    ...(more.pressure ? { pressure: more.pressure } : {}),
    ...(more.storage ? { storage: more.storage } : {}),
    ...(more.podCidr ? { podCidr: more.podCidr } : {}),
  });
  return { clock, api, cri, controller, registration, statusRequests, setPleg: (ok: boolean) => (plegOk = ok) };
}

const settle = async () => {
  for (let i = 0; i < 10; i++) await Bun.sleep(0);
};
/** Registration, then the first status and lease rounds (each is a timer due now). */
const startUp = async (clock: FakeClock) => {
  for (let i = 0; i < 3; i++) {
    clock.advance(0);
    await settle();
  }
};
const ready = (api: FakeKubeApi) => (api.nodes.get("n1")!.status as { conditions: NodeCondition[] }).conditions.find((c) => c.type === "Ready")!;

describe("NodeController", () => {
  test("device plugin resources join capacity and allocatable, and a change is sent at once", async () => {
    let healthy = 2;
    const { api, controller, clock } = setup(
      {},
      { extended: { nodeResources: () => ({ capacity: { "example.com/dev": "2" }, allocatable: { "example.com/dev": String(healthy) } }) } },
    );
    controller.start();
    await startUp(clock);
    const status = () => api.nodes.get("n1")!.status as { capacity: Record<string, string>; allocatable: Record<string, string> };
    expect(status().capacity).toMatchObject({ cpu: "2", "example.com/dev": "2" });
    expect(status().allocatable).toMatchObject({ cpu: "2", "example.com/dev": "2" });
    healthy = 1;
    expect(await controller.updateStatus()).toBe(true);
    expect(status().allocatable["example.com/dev"]).toBe("1");
  });

  test("tells the registration the Node's UID once registered, and updates the status when asked between rounds", async () => {
    const { api, controller, clock, registration, statusRequests, setPleg } = setup();
    expect(registration.uid()).toBeUndefined();
    controller.start();
    await startUp(clock);
    const uid = (api.nodes.get("n1")!.metadata as { uid?: string }).uid;
    expect(uid).toBeTruthy();
    expect(registration.uid()).toBe(uid);
    const before = api.calls.filter((c) => c.method === "patchNodeStatus").length;
    setPleg(false); // a changed status is sent when asked, not at the next round
    statusRequests.request();
    await settle();
    expect(api.calls.filter((c) => c.method === "patchNodeStatus").length).toBe(before + 1);
  });

  test("registers the node with labels, capacity, allocatable and a Ready condition, and creates the lease", async () => {
    const { api, controller, clock } = setup({ kubeReserved: { memory: "1Gi", cpu: "500m" } });
    controller.start();
    await startUp(clock);
    const node = api.nodes.get("n1")!;
    expect((node.metadata as { labels: Record<string, string> }).labels).toMatchObject({
      "kubernetes.io/hostname": "n1",
      "kubernetes.io/os": "linux",
      "kubernetes.io/arch": "amd64",
      "node.example.com/zone": "a",
    });
    const status = node.status as { capacity: Record<string, string>; allocatable: Record<string, string>; addresses: unknown[]; nodeInfo: Record<string, string> };
    expect(status.capacity).toMatchObject({ cpu: "2", memory: "8388608Ki", pods: "110" });
    // 8Gi − 1Gi kube-reserved − 100Mi hard eviction threshold.
    expect(status.allocatable).toMatchObject({ cpu: "1500m", memory: `${8 * 1024 * 1024 - 1024 * 1024 - 100 * 1024}Ki`, pods: "110" });
    expect(status.addresses).toEqual([
      { type: "InternalIP", address: "192.0.2.10" },
      { type: "Hostname", address: "n1" },
    ]);
    expect(status.nodeInfo).toMatchObject({ kubeletVersion: "v1.34.0-bunlet", bootID: "b1", osImage: "Debian GNU/Linux 12 (bookworm)" });
    expect(status.nodeInfo.containerRuntimeVersion).toStartWith("fake://");
    expect(ready(api)).toMatchObject({ status: "True", reason: "KubeletReady", message: "kubelet is posting ready status" });
    const lease = api.leases.get(`${LEASE_NAMESPACE}/n1`)!;
    expect(lease.spec).toMatchObject({ holderIdentity: "n1", leaseDurationSeconds: 40 });
    expect((lease.metadata as { ownerReferences: { kind: string; name: string }[] }).ownerReferences[0]).toMatchObject({ kind: "Node", name: "n1" });
    await controller[Symbol.asyncDispose]();
  });

  test("renews the lease every 10s and sends unchanged status half a report period after a change, then every report period", async () => {
    const { api, controller, clock } = setup(); // random 0: no jitter, the report delay after a change is -2.5 min
    controller.start();
    await startUp(clock);
    const renewTime = () => (api.leases.get(`${LEASE_NAMESPACE}/n1`)!.spec as { renewTime: string }).renewTime;
    const first = renewTime();
    expect(first).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    const patches = () => api.calls.filter((c) => c.method === "patchNodeStatus").length;
    const before = patches();
    const tick = async (n: number) => {
      for (let i = 0; i < n; i++) {
        clock.advance(10_000);
        await settle();
      }
    };
    await tick(1);
    expect(renewTime()).not.toBe(first);
    await tick(13);
    expect(patches()).toBe(before); // nothing changed within 140 s
    await tick(1);
    expect(patches()).toBe(before + 1); // the first unchanged report: 5 min - 2.5 min after the first status
    await tick(29);
    expect(patches()).toBe(before + 1); // from then on every 5 minutes
    await tick(1);
    expect(patches()).toBe(before + 2);
    await controller[Symbol.asyncDispose]();
  });

  test("the report delay after a change is drawn from ±half the report period (upstream delayAfterNodeStatusChange)", async () => {
    // 0.9: after the first status the next unchanged report waits 5 min + 2 min (and each loop period 10 s + 3.6%).
    const { api, controller, clock } = setup({}, { random: () => 0.9 });
    controller.start();
    await startUp(clock);
    const patches = () => api.calls.filter((c) => c.method === "patchNodeStatus").length;
    const before = patches();
    // Status passes every 10.36 s: the 40th (414.4 s) is before 420 s, the 41st (424.8 s) the first after.
    for (let i = 0; i < 40; i++) {
      clock.advance(10_360);
      await settle();
    }
    expect(patches()).toBe(before);
    clock.advance(10_360);
    await settle();
    expect(patches()).toBe(before + 1);
    await controller[Symbol.asyncDispose]();
  });

  test("the lease and status loops wait their period plus up to 4% more after each pass, as upstream's wait.JitterUntil(0.04)", async () => {
    const { api, cri, controller, clock } = setup({}, { random: () => 0.5 }); // 10 s + 2% = 10.2 s
    controller.start();
    await startUp(clock);
    const renewals = () => api.calls.filter((c) => c.method === "updateLease").length;
    const statusPasses = () => cri.callsOf("listImages").length;
    const r0 = renewals();
    const s0 = statusPasses();
    clock.advance(10_000);
    await settle();
    expect([renewals(), statusPasses()]).toEqual([r0, s0]); // not yet at 10 s
    clock.advance(200);
    await settle();
    expect([renewals(), statusPasses()]).toEqual([r0 + 1, s0 + 1]); // at 10.2 s
    clock.advance(10_199);
    await settle();
    expect([renewals(), statusPasses()]).toEqual([r0 + 1, s0 + 1]); // each wait counts from the end of the pass before
    clock.advance(1);
    await settle();
    expect([renewals(), statusPasses()]).toEqual([r0 + 2, s0 + 2]);
    await controller[Symbol.asyncDispose]();
  });

  test("a status patch leaves out nodeInfo, images, daemonEndpoints and addresses the API's Node has the same; conditions, capacity and allocatable always go", async () => {
    const { api, controller, clock } = setup();
    controller.start();
    await startUp(clock);
    const patchCalls = () => api.calls.filter((c) => c.method === "patchNodeStatus").map((c) => (c.args[1] as { status: Record<string, unknown> }).status);
    // The first status: the registered Node had none of it.
    expect(Object.keys(patchCalls()[0]!)).toEqual(expect.arrayContaining(["nodeInfo", "images", "daemonEndpoints", "addresses", "conditions"]));
    for (let i = 0; i < 15; i++) {
      clock.advance(10_000); // up to the first unchanged report (random 0: 2.5 min)
      await settle();
    }
    const report = patchCalls().at(-1)!;
    expect(patchCalls()).toHaveLength(2);
    expect(Object.keys(report).sort()).toEqual(["allocatable", "capacity", "conditions"]);
    // What the API server keeps is the whole status.
    expect(Object.keys(api.nodes.get("n1")!.status as object)).toEqual(expect.arrayContaining(["nodeInfo", "images", "daemonEndpoints", "addresses"]));
    await controller[Symbol.asyncDispose]();
  });

  test("an own field another writer changed is sent again on the pass after the patch whose answer showed it (an admin's edit of addresses is reverted)", async () => {
    const { api, controller, clock } = setup();
    controller.start();
    await startUp(clock);
    const patchCalls = () => api.calls.filter((c) => c.method === "patchNodeStatus").map((c) => (c.args[1] as { status: Record<string, unknown> }).status);
    const ours = (patchCalls()[0]!["addresses"] as unknown[]).slice();
    const apiStatus = () => api.nodes.get("n1")!.status as Record<string, unknown>;
    apiStatus()["addresses"] = [{ type: "InternalIP", address: "192.0.2.99" }];
    for (let i = 0; i < 15 && patchCalls().length < 2; i++) {
      clock.advance(10_000); // up to the first unchanged report (random 0: 2.5 min), which leaves the addresses out
      await settle();
    }
    expect(patchCalls()).toHaveLength(2);
    expect(patchCalls()[1]).not.toHaveProperty("addresses");
    clock.advance(10_000);
    await settle();
    expect(patchCalls()).toHaveLength(3);
    expect(patchCalls()[2]!["addresses"]).toEqual(ours);
    expect(apiStatus()["addresses"]).toEqual(ours);
    // Level again: the next passes send nothing until the report period.
    clock.advance(10_000);
    await settle();
    expect(patchCalls()).toHaveLength(3);
    await controller[Symbol.asyncDispose]();
  });

  test("statusPatch: a field another writer changed in the API's copy goes again; without the API's copy everything goes", () => {
    const status = { nodeInfo: { kubeletVersion: "v1" }, images: [{ names: ["a"], sizeBytes: 1 }], conditions: [] };
    expect(statusPatch(status, undefined)).toEqual(status);
    expect(statusPatch(status, { status: { nodeInfo: { kubeletVersion: "v1" }, images: [{ sizeBytes: 1, names: ["a"] }] } })).toEqual({ conditions: [] });
    expect(statusPatch(status, { status: { nodeInfo: { kubeletVersion: "v0" }, images: [] } })).toEqual(status);
  });

  test("after the API server was unreachable, the unchanged status is sent at once (the controller marked the node Unknown meanwhile)", async () => {
    const { api, controller, clock } = setup();
    controller.start();
    await startUp(clock);
    const patches = () => api.calls.filter((c) => c.method === "patchNodeStatus").length;
    const before = patches();
    api.setReachable(false);
    for (let i = 0; i < 12; i++) {
      clock.advance(10_000);
      await settle();
    }
    // What the node lifecycle controller does to a node that stops renewing its lease (a copy: the agent's own view is not touched).
    const stale = structuredClone(api.nodes.get("n1")!);
    (stale.status as { conditions: NodeCondition[] }).conditions.find((c) => c.type === "Ready")!.status = "Unknown";
    api.nodes.set("n1", stale);
    api.setReachable(true);
    for (let i = 0; i < 2; i++) {
      clock.advance(10_000);
      await settle();
    }
    expect(patches()).toBeGreaterThan(before);
    expect(ready(api).status).toBe("True");
    await controller[Symbol.asyncDispose]();
  });

  test("a stalled PLEG or a runtime network problem makes the node NotReady at once, with upstream's message", async () => {
    const { api, cri, controller, clock, setPleg } = setup();
    controller.start();
    await startUp(clock);
    const transitioned = ready(api).lastTransitionTime;
    setPleg(false);
    cri.setCondition("NetworkReady", false, "NetworkPluginNotReady", "cni config uninitialized");
    clock.advance(10_000);
    await settle();
    expect(ready(api)).toMatchObject({
      status: "False",
      reason: "KubeletNotReady",
      message:
        "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized, PLEG is not healthy: pleg was last seen active 4m0s ago",
    });
    expect(ready(api).lastTransitionTime).not.toBe(transitioned);
    await controller[Symbol.asyncDispose]();
  });

  test("a storage error (CSINode not yet initialized) keeps Ready False with upstream's message, after the PLEG's; cleared, Ready at the next status", async () => {
    let storage: string | undefined = "CSINode is not yet initialized";
    const { api, controller, clock, statusRequests, setPleg } = setup({}, { storage: { storageError: () => storage, firstAttempt: () => Promise.resolve() } });
    controller.start();
    await startUp(clock);
    expect(ready(api)).toMatchObject({ status: "False", reason: "KubeletNotReady", message: "CSINode is not yet initialized" });
    setPleg(false);
    clock.advance(10_000);
    await settle();
    expect(ready(api).message).toBe("PLEG is not healthy: pleg was last seen active 4m0s ago, CSINode is not yet initialized");
    setPleg(true);
    storage = undefined;
    statusRequests.request();
    await settle();
    expect(ready(api)).toMatchObject({ status: "True", reason: "KubeletReady" });
    await controller[Symbol.asyncDispose]();
  });

  test("the first status waits for the storage side's first try: a CSINode that exists already never shows as NotReady", async () => {
    let storage: string | undefined = "CSINode is not yet initialized";
    const first = Promise.withResolvers<void>();
    const { api, controller, clock } = setup({}, { storage: { storageError: () => storage, firstAttempt: () => first.promise } });
    controller.start();
    await startUp(clock);
    expect(api.calls.filter((c) => c.method === "patchNodeStatus")).toHaveLength(0);
    storage = undefined;
    first.resolve();
    await startUp(clock);
    expect(api.calls.filter((c) => c.method === "patchNodeStatus")).toHaveLength(1);
    expect(ready(api).status).toBe("True");
    await controller[Symbol.asyncDispose]();
  });

  test("the first status goes out after 5 s when the storage side's first try hangs", async () => {
    const { api, controller, clock } = setup({}, { storage: { storageError: () => "CSINode is not yet initialized", firstAttempt: () => new Promise(() => {}) } });
    controller.start();
    await startUp(clock);
    expect(api.calls.filter((c) => c.method === "patchNodeStatus")).toHaveLength(0);
    clock.advance(5_000);
    await startUp(clock);
    expect(ready(api)).toMatchObject({ status: "False", message: "CSINode is not yet initialized" });
    await controller[Symbol.asyncDispose]();
  });

  test("the Node's spec.podCIDRs, as registration and each status update return it, go to the pod CIDR sink", async () => {
    const seen: string[] = [];
    const { api, controller, clock } = setup({}, { podCidr: { fromNode: async (node) => void seen.push(nodePodCidrs(node)) } });
    controller.start();
    await startUp(clock);
    expect(seen).toEqual(["", ""]); // registered, first status: no CIDR yet
    (api.nodes.get("n1")!.spec as Record<string, unknown>) = { podCIDR: "10.244.3.0/24", podCIDRs: ["10.244.3.0/24"] };
    for (let i = 0; i < 31; i++) {
      clock.advance(10_000); // up to the 5 minute report: the status goes out unchanged and the Node comes back
      await settle();
    }
    expect(seen.at(-1)).toBe("10.244.3.0/24");
    await controller[Symbol.asyncDispose]();
  });

  test("an existing node is adopted and its default labels reconciled", async () => {
    const { api, controller, clock } = setup();
    api.nodes.set("n1", { metadata: { name: "n1", uid: "old", labels: { "kubernetes.io/hostname": "wrong", custom: "kept" } } });
    controller.start();
    await startUp(clock);
    expect((api.nodes.get("n1")!.metadata as { labels: Record<string, string> }).labels).toMatchObject({ "kubernetes.io/hostname": "n1", custom: "kept" });
    await controller[Symbol.asyncDispose]();
  });

  test("an existing node's Ready condition that stays True keeps its lastTransitionTime (a restart, or a kubelet switch); a flip moves it", async () => {
    const { api, controller, clock, setPleg } = setup();
    const since = "2020-01-01T00:00:00Z";
    const conditions = [{ type: "Ready", status: "True", reason: "KubeletReady", message: "kubelet is posting ready status", lastHeartbeatTime: since, lastTransitionTime: since }];
    api.nodes.set("n1", { metadata: { name: "n1", uid: "old", labels: { "kubernetes.io/hostname": "n1" } }, status: { conditions } });
    controller.start();
    await startUp(clock);
    expect(ready(api)).toMatchObject({ status: "True", lastTransitionTime: since });
    expect(ready(api).lastHeartbeatTime).not.toBe(since);
    setPleg(false);
    clock.advance(10_000);
    await settle();
    expect(ready(api).status).toBe("False");
    expect(ready(api).lastTransitionTime).not.toBe(since);
    await controller[Symbol.asyncDispose]();
  });

  test("an existing node's hugepages-<size> this machine has no pool of is deleted by the status patch (reconcileHugePageResource)", async () => {
    const { api, controller, clock } = setup();
    api.nodes.set("n1", {
      metadata: { name: "n1", uid: "old", labels: { "kubernetes.io/hostname": "n1" } },
      status: { capacity: { cpu: "2", "hugepages-1Gi": "2Gi" }, allocatable: { cpu: "2", "hugepages-1Gi": "2Gi" } },
    });
    controller.start();
    await startUp(clock);
    const patch = api.calls.find((c) => c.method === "patchNodeStatus")!.args[1] as { status: { capacity: Record<string, unknown>; allocatable: Record<string, unknown> } };
    expect(patch.status.capacity["hugepages-1Gi"]).toBeNull();
    expect(patch.status.allocatable["hugepages-1Gi"]).toBeNull();
    await controller[Symbol.asyncDispose]();
  });

  test("pressure from the eviction manager shows in the conditions with upstream's reasons", async () => {
    let pressure = { memoryPressure: false, diskPressure: false, pidPressure: false };
    const { api, controller, clock } = setup({}, { pressure: { conditions: () => pressure } });
    controller.start();
    await startUp(clock);
    pressure = { memoryPressure: true, diskPressure: true, pidPressure: false };
    clock.advance(10_000);
    await settle();
    const conditions = (api.nodes.get("n1")!.status as { conditions: NodeCondition[] }).conditions;
    const byType = Object.fromEntries(conditions.map((c) => [c.type, [c.status, c.reason]]));
    expect(byType).toMatchObject({
      MemoryPressure: ["True", "KubeletHasInsufficientMemory"],
      DiskPressure: ["True", "KubeletHasDiskPressure"],
      PIDPressure: ["False", "KubeletHasSufficientPID"],
    });
    await controller[Symbol.asyncDispose]();
  });
});
