import { describe, expect, test } from "bun:test";
import { FakeCheckpointStore } from "../checkpoint/index.ts";
import { NodePredicates, type NodeFacts } from "../node/admission.ts";
import type { Pod } from "../pods/schema.ts";
import type { ObservedPod } from "../runtime/types.ts";
import { apiPodStatus } from "../status/api.ts";
import { podStatus } from "../status/phase.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { ACTUATED_KIND, ALLOCATED_KIND, AllocationManager } from "./manager.ts";

const MI = 2 ** 20;
const node: NodeFacts = { name: "n", labels: {}, taints: [], allocatable: { cpu: 2000, memory: 1024 * MI, "ephemeral-storage": 10 * 2 ** 30, pods: 110 } };
const pod = (uid: string, cpu: string, memory = "64Mi"): Pod => ({
  metadata: { name: `p-${uid}`, namespace: "default", uid },
  spec: { containers: [{ name: "app", image: "busybox", resources: { requests: { cpu, memory }, limits: { cpu, memory } } }] },
});
const cpuOf = (p: Pod) => p.spec.containers[0]!.resources?.requests?.cpu;

function setup(store = new FakeCheckpointStore(new FakeClock())) {
  const manager = new AllocationManager({
    store,
    logger: memoryLogger().logger,
    allocatable: { cpu: node.allocatable.cpu, memory: node.allocatable.memory },
    admission: new NodePredicates(node),
  });
  return { store, manager };
}

describe("AllocationManager", () => {
  test("a new pod is allocated what it asks for, and the allocation is checkpointed", () => {
    const { store, manager } = setup();
    expect(cpuOf(manager.allocate(pod("a", "500m"), () => []))).toBe("500m");
    expect(store.writes).toEqual([`${ALLOCATED_KIND}/a`, `${ACTUATED_KIND}/a`]);
    expect(manager.allocatedResources("a", "app")).toEqual({ requests: { cpu: "500m", memory: "64Mi" }, limits: { cpu: "500m", memory: "64Mi" } });
  });

  test("a resize that fits is accepted; one beyond the node is Infeasible; one beyond what is left is Deferred", () => {
    const { manager } = setup();
    manager.allocate(pod("a", "500m"), () => []);
    manager.allocate(pod("b", "1000m"), () => []);
    expect(cpuOf(manager.allocate(pod("a", "800m"), () => [pod("b", "1000m")]))).toBe("800m");
    expect(manager.pendingResize("a")).toBeUndefined();

    expect(cpuOf(manager.allocate(pod("a", "3"), () => [pod("b", "1000m")]))).toBe("800m");
    expect(manager.pendingResize("a")).toEqual({ reason: "Infeasible", message: "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000" });

    expect(cpuOf(manager.allocate(pod("a", "1500m"), () => [pod("b", "1000m")]))).toBe("800m");
    expect(manager.pendingResize("a")).toEqual({ reason: "Deferred", message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000" });

    // b is resized down (its desired spec says 1000m only once allocated): a Deferred resize goes through on a later sync.
    manager.allocate(pod("b", "400m"), () => [pod("a", "1500m")]);
    expect(cpuOf(manager.allocate(pod("a", "1500m"), () => [pod("b", "400m")]))).toBe("1500m");
    expect(manager.pendingResize("a")).toBeUndefined();
  });

  test("others count with their allocation, not with a resize they are still waiting for", () => {
    const { manager } = setup();
    manager.allocate(pod("a", "500m"), () => []);
    manager.allocate(pod("b", "500m"), () => []);
    manager.allocate(pod("b", "5"), () => []); // Infeasible: b stays at 500m
    expect(cpuOf(manager.allocate(pod("a", "1500m"), () => [pod("b", "5")]))).toBe("1500m");
  });

  test("memory beyond the node is reported before cpu", () => {
    const { manager } = setup();
    manager.allocate(pod("a", "500m"), () => []);
    manager.allocate(pod("a", "3", "2Gi"), () => []);
    expect(manager.pendingResize("a")?.message).toBe(`Node didn't have enough capacity: memory, requested: ${2 * 1024 * MI}, capacity: ${1024 * MI}`);
  });

  test("allocations and applied resources survive a restart: a new manager on the same store keeps a pending resize pending", () => {
    const { store, manager } = setup();
    manager.allocate(pod("a", "500m"), () => []);
    manager.setActuated("a", "app", { requests: { cpu: "500m" }, limits: { cpu: "500m" } });
    manager.allocate(pod("a", "3"), () => []);
    const restarted = setup(store).manager;
    expect(cpuOf(restarted.allocate(pod("a", "3"), () => []))).toBe("500m");
    expect(restarted.pendingResize("a")?.reason).toBe("Infeasible");
    expect(restarted.actuated("a", "app")).toEqual({ requests: { cpu: "500m" }, limits: { cpu: "500m" } });
  });

  test("a corrupt checkpoint is ignored (the spec is allocated again); a failing disk keeps the decision in memory", () => {
    const { store, manager } = setup();
    manager.allocate(pod("a", "500m"), () => []);
    store.corrupt(ALLOCATED_KIND, "a");
    const restarted = setup(store).manager;
    expect(cpuOf(restarted.allocate(pod("a", "700m"), () => []))).toBe("700m");
    store.failWrites = new Error("EROFS");
    expect(cpuOf(restarted.allocate(pod("a", "900m"), () => []))).toBe("900m");
    expect(restarted.allocatedResources("a", "app")?.limits?.cpu).toBe("900m");
  });

  test("removeOrphans drops the records of pods nobody knows, also those only on disk", () => {
    const { store, manager } = setup();
    manager.allocate(pod("a", "500m"), () => []);
    manager.allocate(pod("b", "500m"), () => []);
    const restarted = setup(store).manager;
    expect(restarted.removeOrphans((uid) => uid === "a")).toBe(1);
    expect(store.keys(ALLOCATED_KIND)).toEqual(["a"]);
    expect(store.keys(ACTUATED_KIND)).toEqual(["a"]);
  });

  test("removePod deletes both records", () => {
    const { store, manager } = setup();
    manager.allocate(pod("a", "500m"), () => []);
    manager.removePod("a");
    expect(store.keys(ALLOCATED_KIND)).toEqual([]);
    expect(store.keys(ACTUATED_KIND)).toEqual([]);
    expect(manager.allocatedResources("a", "app")).toBeUndefined();
  });

  test("the other pods are asked for only when a resize is to be decided", () => {
    const { manager } = setup();
    let asked = 0;
    const others = () => {
      asked++;
      return [pod("b", "1000m")];
    };
    manager.allocate(pod("a", "500m"), others);
    manager.allocate(pod("a", "500m"), others);
    expect(asked).toBe(0);
    manager.allocate(pod("a", "800m"), others);
    expect(asked).toBe(1);
  });

  test("allocatedPod answers the same object for the same pod and allocation, and a new one after a resize", () => {
    const { manager } = setup();
    const a = pod("a", "500m");
    manager.allocate(a, () => []);
    const first = manager.allocatedPod(a);
    expect(manager.allocatedPod(a)).toBe(first);
    expect(manager.allocate(a, () => [])).toBe(first);
    const resized = pod("a", "700m");
    expect(cpuOf(manager.allocate(resized, () => []))).toBe("700m");
    // The old object now weighs with the new allocation.
    const again = manager.allocatedPod(a);
    expect(again).not.toBe(first);
    expect(cpuOf(again)).toBe("700m");
  });
});

describe("resize in the pod status", () => {
  const observed = (containerState: "running" | "exited" = "running"): ObservedPod => ({
    uid: "a",
    name: "p-a",
    namespace: "default",
    sandboxes: [{ id: "s", ready: true, attempt: 0, createdAt: 0, ip: "10.0.0.1", additionalIps: [] }],
    containers: [{ id: "c", name: "app", sandboxId: "s", state: containerState, hash: "h", restartCount: 0, image: "busybox", imageRef: "sha256:1", createdAt: 0 }],
  });
  const statusOf = (manager: AllocationManager, p: Pod, results: Parameters<AllocationManager["resizeStatus"]>[3] = []) =>
    manager.resizeStatus(podStatus(p, observed(), new Map()), p, observed(), results);

  test("allocatedResources and the applied resources of a running container; no resize conditions when converged", () => {
    const { manager } = setup();
    const p = manager.allocate(pod("a", "500m"), () => []);
    const view = statusOf(manager, p);
    expect(view.containerStatuses[0]).toMatchObject({ allocatedResources: { cpu: "500m", memory: "64Mi" }, resources: { limits: { cpu: "500m", memory: "64Mi" } } });
    expect(view.resize).toBeUndefined();
    const api = apiPodStatus(pod("a", "500m"), view, { hostIPs: [], previous: undefined, now: 0 });
    expect(api.conditions.map((c) => c.type)).not.toContain("PodResizePending");
  });

  test("a container without cpu or memory settings reports neither allocatedResources nor resources", () => {
    const { manager } = setup();
    const bestEffort: Pod = { metadata: { name: "p-a", namespace: "default", uid: "a" }, spec: { containers: [{ name: "app", image: "busybox" }] } };
    const view = statusOf(
      manager,
      manager.allocate(bestEffort, () => []),
    );
    expect(view.containerStatuses[0]!.allocatedResources).toBeUndefined();
    expect(view.containerStatuses[0]!.resources).toBeUndefined();
    expect(view.containerStatuses[0]!.state).toHaveProperty("running");
  });

  test("an Infeasible resize is PodResizePending with its reason and message; a failed one is PodResizeInProgress with Error", () => {
    const { manager } = setup();
    manager.allocate(pod("a", "500m"), () => []);
    const p = manager.allocate(pod("a", "5"), () => []);
    const pending = statusOf(manager, p);
    const api = apiPodStatus(pod("a", "5"), pending, { hostIPs: [], previous: undefined, now: 0 });
    expect(api.conditions.find((c) => c.type === "PodResizePending")).toMatchObject({
      status: "True",
      reason: "Infeasible",
      message: "Node didn't have enough capacity: cpu, requested: 5000, capacity: 2000",
    });

    const accepted = manager.allocate(pod("a", "700m"), () => []);
    const failing = statusOf(manager, accepted, [{ action: "ResizePodInPlace", target: "app", error: { reason: "ResizePodInPlaceError", message: "device or resource busy" } }]);
    expect(failing.resize).toEqual({ inProgress: { error: "device or resource busy" } });
    const api2 = apiPodStatus(pod("a", "700m"), failing, { hostIPs: [], previous: undefined, now: 0 });
    expect(api2.conditions.find((c) => c.type === "PodResizeInProgress")).toMatchObject({ status: "True", reason: "Error", message: "device or resource busy" });
    // Applied still the old values: in progress, and the status reports what runs.
    expect(failing.containerStatuses[0]!.resources?.limits?.cpu).toBe("500m");
  });
});
