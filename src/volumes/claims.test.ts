import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeKubeApi } from "../api/fake.ts";
import { FakePodObjects } from "../api/objects.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { VolumeSetupError } from "./index.ts";
import { PodVolumeManager } from "./manager.ts";
import { FakeMounter } from "./mount.ts";

let root: string;
beforeEach(() => (root = mkdtempSync(join(tmpdir(), "claims-"))));
afterEach(() => rmSync(root, { recursive: true, force: true }));

const node = { name: "n1", labels: { "kubernetes.io/hostname": "n1" } };

function setup(withApi = true) {
  const api = new FakeKubeApi();
  const manager = new PodVolumeManager({
    rootDir: root,
    mounter: new FakeMounter(),
    objects: new FakePodObjects(),
    node: { cpuMilli: 1000, memoryBytes: 2 ** 30, ephemeralStorageBytes: 2 ** 30 },
    clock: new FakeClock(),
    logger: memoryLogger().logger,
    ...(withApi ? { claims: api } : {}),
    nodeIdentity: node,
  });
  return { api, manager };
}

const pod = (volume: Record<string, unknown>, readOnlyMount = false): Pod =>
  ({
    metadata: { name: "p", namespace: "ns", uid: "uid-1" },
    spec: {
      containers: [{ name: "c", image: "x", volumeMounts: [{ name: "data", mountPath: "/data", ...(readOnlyMount ? { readOnly: true } : {}) }] }],
      volumes: [{ name: "data", ...volume }],
    },
  }) as unknown as Pod;

const claim = (name: string, over: Record<string, unknown> = {}) => ({
  metadata: { name, namespace: "ns", uid: `claim-${name}` },
  spec: { volumeName: `pv-${name}` },
  status: { phase: "Bound" },
  ...over,
});
const pv = (name: string, source: Record<string, unknown>, claimUid: string) => ({
  metadata: { name },
  spec: { claimRef: { uid: claimUid, name: "c", namespace: "ns" }, ...source },
});

async function setupError(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof VolumeSetupError) return err.message;
    throw err;
  }
  return "";
}

describe("persistentVolumeClaim volumes", () => {
  test("a claim bound to a hostPath PV mounts its path, readOnly from the claim reference", async () => {
    const { api, manager } = setup();
    const dir = join(root, "pv-data");
    mkdirSync(dir);
    api.claims.set("ns/c", claim("c"));
    api.persistentVolumes.set("pv-c", pv("pv-c", { hostPath: { path: dir, type: "Directory" } }, "claim-c"));
    const p = pod({ persistentVolumeClaim: { claimName: "c", readOnly: true } });
    await manager.setupPod(p);
    expect(await manager.mountsFor(p, p.spec.containers[0]!)).toMatchObject([{ containerPath: "/data", hostPath: dir, readonly: true }]);
    // Upstream's hostPath plugin has no metrics (MetricsNil): the claim is not in volume stats.
    expect(manager.claimVolumes("uid-1")).toEqual([]);
  });

  test("the pod waits with upstream's messages while the claim is missing, unbound or being deleted", async () => {
    const { api, manager } = setup();
    const p = pod({ persistentVolumeClaim: { claimName: "c" } });
    expect(await setupError(() => manager.setupPod(p))).toBe(
      'MountVolume.SetUp failed for volume "data" : error processing PVC ns/c: failed to fetch PVC from API server: persistentvolumeclaims "c" not found',
    );
    api.claims.set("ns/c", claim("c", { status: { phase: "Pending" }, spec: {} }));
    expect(await setupError(() => manager.setupPod(p))).toBe('MountVolume.SetUp failed for volume "data" : error processing PVC ns/c: PVC is not bound');
    api.claims.set("ns/c", claim("c", { metadata: { name: "c", namespace: "ns", uid: "claim-c", deletionTimestamp: "2026-01-01T00:00:00Z" } }));
    expect(await setupError(() => manager.setupPod(p))).toBe('MountVolume.SetUp failed for volume "data" : can\'t start pod because PVC ns/c is being deleted');
    // A container cannot be given a volume whose claim was never resolved.
    await expect(manager.mountsFor(p, p.spec.containers[0]!)).rejects.toThrow("its claim is not bound to a volume on this node yet");
  });

  test("a Block PV (volumeMode: Block) used through volumeMounts fails with upstream's message, for every PV type", async () => {
    const { api, manager } = setup();
    api.claims.set("ns/c", claim("c"));
    for (const source of [{ hostPath: { path: root } }, { local: { path: root } }, { csi: { driver: "d", volumeHandle: "h" } }]) {
      api.persistentVolumes.set("pv-c", pv("pv-c", { ...source, volumeMode: "Block" }, "claim-c"));
      expect(await setupError(() => manager.setupPod(pod({ persistentVolumeClaim: { claimName: "c" } })))).toBe(
        'MountVolume.SetUp failed for volume "data" : volume data has volumeMode Block, but is specified in volumeMounts',
      );
    }
  });

  test("a local PV is used only on a node its node affinity selects", async () => {
    const { api, manager } = setup();
    const dir = join(root, "local");
    mkdirSync(dir);
    const affinity = (host: string) => ({
      nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [host] }] }] } },
    });
    api.claims.set("ns/c", claim("c"));
    api.persistentVolumes.set("pv-c", pv("pv-c", { local: { path: dir }, ...affinity("other") }, "claim-c"));
    const p = pod({ persistentVolumeClaim: { claimName: "c" } });
    expect(await setupError(() => manager.setupPod(p))).toBe(
      'MountVolume.SetUp failed for volume "data" : MountVolume.NodeAffinity check failed for volume "pv-c" : no matching NodeSelectorTerms',
    );
    api.persistentVolumes.set("pv-c", pv("pv-c", { local: { path: dir }, ...affinity("n1") }, "claim-c"));
    await manager.setupPod(p);
    expect(await manager.mountsFor(p, p.spec.containers[0]!)).toMatchObject([{ hostPath: dir, readonly: false }]);
    // A local PV is in volume stats by its claim (its file system, upstream's MetricsStatFS); gone with the pod.
    expect(manager.claimVolumes("uid-1")).toEqual([{ name: "data", path: dir, pvcRef: { name: "c", namespace: "ns" } }]);
    await manager.teardownPod("uid-1");
    expect(manager.claimVolumes("uid-1")).toEqual([]);
  });

  test("a generic ephemeral volume uses the claim <pod>-<volume> the pod owns", async () => {
    const { api, manager } = setup();
    const dir = join(root, "eph");
    mkdirSync(dir);
    const p = pod({ ephemeral: { volumeClaimTemplate: { spec: { accessModes: ["ReadWriteOnce"] } } } });
    api.claims.set(
      "ns/p-data",
      claim("p-data", { metadata: { name: "p-data", namespace: "ns", uid: "claim-p-data", ownerReferences: [{ uid: "someone-else", controller: true }] } }),
    );
    api.persistentVolumes.set("pv-p-data", pv("pv-p-data", { hostPath: { path: dir } }, "claim-p-data"));
    expect(await setupError(() => manager.setupPod(p))).toContain("PVC ns/p-data was not created for pod ns/p (pod is not owner)");
    api.claims.set("ns/p-data", claim("p-data", { metadata: { name: "p-data", namespace: "ns", uid: "claim-p-data", ownerReferences: [{ uid: "uid-1", controller: true }] } }));
    await manager.setupPod(p);
    expect(await manager.mountsFor(p, p.spec.containers[0]!)).toMatchObject([{ hostPath: dir }]);
  });

  test("a PV of a type this node has no plugin for, and a node without an API server, are clear errors", async () => {
    const { api, manager } = setup();
    api.claims.set("ns/c", claim("c"));
    api.persistentVolumes.set("pv-c", pv("pv-c", { nfs: { server: "x", path: "/" } }, "claim-c"));
    const p = pod({ persistentVolumeClaim: { claimName: "c" } });
    expect(await setupError(() => manager.setupPod(p))).toContain('PersistentVolume pv-c: volume type "nfs" is not supported by this node');
    const standalone = setup(false).manager;
    expect(await setupError(() => standalone.setupPod(p))).toContain("persistentVolumeClaim volumes need an API server");
  });
});
