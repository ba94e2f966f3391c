import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { PodHost } from "../sync/pod-host.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeCheckpointStore } from "../checkpoint/index.ts";
import { AllocationManager } from "../allocation/index.ts";
import { containerLinuxResources, FakePodCgroups } from "../cgroups/index.ts";
import { FakeCri } from "../cri/fake.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { containerHash } from "./hash.ts";
import { CriPodRuntime } from "./manager.ts";
import { testRuntimeOptions, testNode } from "./testing.ts";
import { planPod } from "./plan.ts";
import type { ObservedPod } from "./types.ts";
import { podUid } from "../pods/identity.ts";

const MI = 2 ** 20;
const app = (limits: { cpu: string; memory: string }, extra: Partial<ContainerSpec> = {}): ContainerSpec => ({
  name: "app",
  image: "busybox:1.0",
  resources: { requests: { cpu: "100m", memory: "32Mi" }, limits },
  ...extra,
});
const pod = (...containers: ContainerSpec[]): Pod => ({ metadata: { name: "web", namespace: "default", uid: "uid-1" }, spec: { containers } });
const applied = { requests: { cpu: "100m", memory: "32Mi" }, limits: { cpu: "200m", memory: "64Mi" } };

describe("planPod with in-place resize", () => {
  const observed = (p: Pod): ObservedPod => ({
    uid: "uid-1",
    name: "web",
    namespace: "default",
    sandboxes: [{ id: "s1", ready: true, attempt: 0, createdAt: 1, ip: "10.0.0.2", additionalIps: [] }],
    containers: p.spec.containers.map((c, i) => ({
      id: `c${i}`,
      name: c.name,
      sandboxId: "s1",
      state: "running" as const,
      hash: containerHash(c),
      restartCount: 0,
      image: "busybox",
      imageRef: "x",
      createdAt: 1,
    })),
  });
  const noBackoff = { remainingSince: () => 0 };

  test("resources are not in the container hash: a resize never looks like a spec change", () => {
    expect(containerHash(app({ cpu: "200m", memory: "64Mi" }))).toBe(containerHash(app({ cpu: "1", memory: "1Gi" })));
  });

  test("a changed allocation is resized in place; unknown applied resources and equal ones are left alone", () => {
    const p = pod(app({ cpu: "300m", memory: "64Mi" }));
    expect(planPod(p, observed(p), noBackoff, new Map(), { actuated: () => applied }).containersToResize).toEqual([{ id: "c0", name: "app" }]);
    expect(planPod(p, observed(p), noBackoff, new Map(), { actuated: () => undefined }).containersToResize).toEqual([]);
    const same = pod(app({ cpu: "200m", memory: "64Mi" }));
    const a = planPod(same, observed(same), noBackoff, new Map(), { actuated: () => applied });
    expect(a.containersToResize).toEqual([]);
    expect(a.containersToKill).toEqual([]);
  });

  test("RestartContainer for a changed resource restarts that container only", () => {
    const strict = app({ cpu: "200m", memory: "96Mi" }, { resizePolicy: [{ resourceName: "memory", restartPolicy: "RestartContainer" }] });
    const easy = { ...app({ cpu: "300m", memory: "64Mi" }), name: "easy" };
    const p = pod(strict, easy);
    const a = planPod(p, observed(p), noBackoff, new Map(), { actuated: () => applied });
    expect(a.containersToKill).toEqual([{ id: "c0", name: "app", reason: "Container app resize requires restart" }]);
    expect(a.containersToStart).toEqual([{ name: "app", restartCount: 1, reason: "Container app resize requires restart" }]);
    expect(a.containersToResize).toEqual([{ id: "c1", name: "easy" }]);
  });
});

describe("sidecars are resized like regular containers", () => {
  test("a running sidecar whose allocation changed is resized in place; a regular init container is never", () => {
    const sidecar: ContainerSpec = { ...app({ cpu: "300m", memory: "64Mi" }), name: "proxy", restartPolicy: "Always" };
    const init: ContainerSpec = { ...app({ cpu: "300m", memory: "64Mi" }), name: "setup" };
    const main = app({ cpu: "200m", memory: "64Mi" });
    const p: Pod = { ...pod(main), spec: { containers: [main], initContainers: [init, sidecar] } };
    const running = (c: ContainerSpec, i: number, state: "running" | "exited") => ({
      id: `c${i}`,
      name: c.name,
      sandboxId: "s1",
      state,
      hash: containerHash(c),
      restartCount: 0,
      image: "busybox",
      imageRef: "x",
      createdAt: 1,
      ...(state === "exited" ? { exitCode: 0, finishedAt: 2 } : {}),
    });
    const observed: ObservedPod = {
      uid: "uid-1",
      name: "web",
      namespace: "default",
      sandboxes: [{ id: "s1", ready: true, attempt: 0, createdAt: 1, ip: "10.0.0.2", additionalIps: [] }],
      containers: [running(init, 0, "exited"), running(sidecar, 1, "running"), running(main, 2, "running")],
    };
    const a = planPod(p, observed, { remainingSince: () => 0 }, new Map(), { actuated: () => applied });
    expect(a.containersToResize).toEqual([{ id: "c1", name: "proxy" }]);
    expect(a.containersToKill).toEqual([]);
  });
});

describe("CriPodRuntime applies a resize in upstream's order", () => {
  let logs: string;
  beforeEach(() => (logs = mkdtempSync(join(tmpdir(), "podlogs-"))));
  afterEach(() => rmSync(logs, { recursive: true, force: true }));

  function setup() {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: ["busybox:1.0"] });
    const cgroups = new FakePodCgroups({ version: "v1" });
    const allocation = new AllocationManager({
      store: new FakeCheckpointStore(clock),
      logger: memoryLogger().logger,
      allocatable: { cpu: 2000, memory: 1024 * MI },
      admission: { admit: () => ({ admit: true }) },
    });
    const order: string[] = [];
    const node = testNode({ podLogsDir: logs, podsCgroupParent: "/kubepods" });
    const runtime = new CriPodRuntime(
      testRuntimeOptions({
        cri,
        clock,
        logger: memoryLogger().logger,
        start: { resize: allocation },
        config: {
          resources: {
            resourcesOf: (p, c) =>
              containerLinuxResources(p, c, { memoryCapacityBytes: 4096 * MI, cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, oomGroup: false, hugePageSizes: [] }),
          },
        },
        node,
        host: PodHost.forNode(node, {
          cgroups: {
            ensurePod: async (p) => {
              const path = await cgroups.ensurePod(p);
              const c = cgroups.pods.get(podUid(p))!.config;
              order.push(`pod cpu=${c.cpuQuota} memory=${c.memoryLimit}`);
              return path;
            },
            removePod: (uid) => cgroups.removePod(uid),
          },
        }),
      }),
    );
    const origUpdate = cri.updateContainerResources.bind(cri);
    cri.updateContainerResources = async (id, linux, annotations) => {
      order.push(`container ${id.slice(0, 4)} cpu=${linux.cpuQuota} memory=${linux.memoryLimitInBytes}`);
      return origUpdate(id, linux, annotations);
    };
    const sync = async (desired: Pod) => {
      const p = allocation.allocate(desired, () => []);
      return runtime.syncPod(p);
    };
    return { cri, allocation, order, sync };
  }

  test("growing: the pod cgroup before the container; applied resources recorded; then converged", async () => {
    const t = setup();
    await t.sync(pod(app({ cpu: "200m", memory: "64Mi" })));
    const [id] = (await t.cri.listContainers()).map((c) => c.id);
    t.order.length = 0;
    const outcome = await t.sync(pod(app({ cpu: "300m", memory: "96Mi" })));
    expect(outcome.results).toEqual([{ action: "ResizePodInPlace", target: "app" }]);
    expect(t.order).toEqual([`pod cpu=30000 memory=${96 * MI}`, `container ${id!.slice(0, 4)} cpu=30000 memory=${96 * MI}`, `pod cpu=30000 memory=${96 * MI}`]);
    expect(t.allocation.actuated("uid-1", "app")?.limits).toEqual({ cpu: "300m", memory: "96Mi" });
    expect((await t.sync(pod(app({ cpu: "300m", memory: "96Mi" })))).changed).toBe(false);
    expect(t.cri.callsOf("createContainer")).toHaveLength(1);
  });

  test("shrinking memory while cpu grows: the pod keeps its memory until the container shrank", async () => {
    const t = setup();
    await t.sync(pod(app({ cpu: "200m", memory: "64Mi" })));
    const [id] = (await t.cri.listContainers()).map((c) => c.id);
    t.order.length = 0;
    await t.sync(pod(app({ cpu: "300m", memory: "48Mi" })));
    expect(t.order).toEqual([`pod cpu=30000 memory=${64 * MI}`, `container ${id!.slice(0, 4)} cpu=30000 memory=${48 * MI}`, `pod cpu=30000 memory=${48 * MI}`]);
  });

  test("a runtime that refuses the update: an error result, the applied resources unchanged, retried on the next sync", async () => {
    const t = setup();
    await t.sync(pod(app({ cpu: "200m", memory: "64Mi" })));
    t.cri.failNext("updateContainerResources", "Unknown", "device or resource busy");
    const failed = await t.sync(pod(app({ cpu: "200m", memory: "16Mi" })));
    expect(failed.results).toMatchObject([{ action: "ResizePodInPlace", target: "app", error: { reason: "ResizePodInPlaceError" } }]);
    // As upstream's PodResizeInProgress message: the cri-client's error as grpc-go prints it.
    expect(failed.results[0]!.error!.message).toBe("rpc error: code = Unknown desc = device or resource busy");
    expect(t.allocation.actuated("uid-1", "app")?.limits?.memory).toBe("64Mi");
    const retried = await t.sync(pod(app({ cpu: "200m", memory: "16Mi" })));
    expect(retried.results).toEqual([{ action: "ResizePodInPlace", target: "app" }]);
  });
});
