import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeKubeApi } from "../api/fake.ts";
import { FakePodObjects } from "../api/objects.ts";
import { GrpcCsiNodeClient } from "../csi/client.ts";
import { CsiDriverNotFoundError } from "../csi/drivers.ts";
import { FakeCsiDriver } from "../csi/fake-driver.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { attachmentName, CsiVolumes, inlineVolumeHandle } from "./csi.ts";
import type { EventRecorder } from "../events/recorder.ts";
import { VolumeSetupError } from "./index.ts";
import { PodVolumeManager } from "./manager.ts";
import { FakeMounter } from "./mount.ts";

const DRIVER = "fake.csi.example.com";
let root: string;
let cleanup: (() => void)[] = [];
beforeEach(() => (root = mkdtempSync(join(tmpdir(), "csivol-"))));
afterEach(() => {
  for (const c of cleanup.reverse()) c();
  cleanup = [];
  rmSync(root, { recursive: true, force: true });
});

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const node = { cpuMilli: 2000, memoryBytes: 2 ** 32, ephemeralStorageBytes: 2 ** 34 };

async function setup(
  opts: { driver?: Partial<ConstructorParameters<typeof FakeCsiDriver>[0]>; csiDriverSpec?: Record<string, unknown> | null; controllerAttachDetach?: boolean } = {},
) {
  const driver = new FakeCsiDriver({ name: DRIVER, nodeId: "n1", ...opts.driver });
  const socket = join(root, "csi.sock");
  await driver.serve(socket);
  const client = new GrpcCsiNodeClient(socket);
  cleanup.push(
    () => driver.close(),
    () => client.close(),
  );
  const api = new FakeKubeApi();
  if (opts.csiDriverSpec !== null)
    api.csiDrivers.set(DRIVER, { metadata: { name: DRIVER }, spec: opts.csiDriverSpec ?? { attachRequired: false, volumeLifecycleModes: ["Persistent", "Ephemeral"] } });
  const drivers = {
    client: (name: string) => {
      if (name !== DRIVER) throw new CsiDriverNotFoundError(name);
      return client;
    },
  };
  const events: string[] = [];
  const recorder: EventRecorder = { event: (o, type, reason, message) => void events.push(`${o.kind}/${o.name} ${type} ${reason} ${message}`) };
  const csi = new CsiVolumes({
    rootDir: root,
    drivers,
    api,
    nodeName: "n1",
    controllerAttachDetach: opts.controllerAttachDetach ?? true,
    recorder,
    clock: new FakeClock(),
    logger: memoryLogger().logger,
  });
  const manager = new PodVolumeManager({
    rootDir: root,
    mounter: new FakeMounter(),
    objects: new FakePodObjects(),
    node,
    clock: new FakeClock(),
    logger: memoryLogger().logger,
    claims: api,
    nodeIdentity: { name: "n1", labels: {} },
    csi,
  });
  return { driver, api, manager, events };
}

const pod = (uid: string, volumes: NonNullable<Pod["spec"]["volumes"]>, extra: Partial<Pod["spec"]> = {}): Pod => ({
  metadata: { name: `p-${uid}`, namespace: "ns", uid },
  spec: {
    containers: [{ name: "c", image: "busybox", volumeMounts: volumes.map((v) => ({ name: v.name, mountPath: `/mnt/${v.name}` })) }],
    volumes,
    serviceAccountName: "sa",
    ...extra,
  },
});
const target = (uid: string, name: string) => join(root, "pods", uid, "volumes/kubernetes.io~csi", name, "mount");
const inline = (attrs: Record<string, string> = { size: "1Mi" }, extra: Record<string, unknown> = {}) => ({
  name: "scratch",
  csi: { driver: DRIVER, volumeAttributes: attrs, ...extra },
});

async function failureOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(VolumeSetupError);
    return (err as VolumeSetupError).failures.map((f) => f.message).join("; ");
  }
  throw new Error("expected the setup to fail");
}

describe("inline ephemeral csi volumes", () => {
  test("published with the volume attributes and, as the CSIDriver asks, the pod's info; the container binds the target; teardown unpublishes", async () => {
    const { driver, manager } = await setup({ csiDriverSpec: { attachRequired: false, podInfoOnMount: true, volumeLifecycleModes: ["Ephemeral"] } });
    const p = pod("u1", [inline()]);
    await manager.setupPod(p);
    const calls = driver.callsOf("NodePublishVolume") as {
      volumeId: string;
      targetPath: string;
      volumeContext: Record<string, string>;
      stagingTargetPath: string;
      readonly: boolean;
    }[];
    expect(calls).toHaveLength(1);
    expect(calls[0]!.volumeId).toBe(`csi-${sha256("u1scratch")}`);
    expect(calls[0]!.volumeId).toBe(inlineVolumeHandle("u1", "scratch"));
    expect(calls[0]!.targetPath).toBe(target("u1", "scratch"));
    expect(calls[0]!.stagingTargetPath).toBe("");
    expect(calls[0]!.volumeContext).toEqual({
      size: "1Mi",
      "csi.storage.k8s.io/pod.name": "p-u1",
      "csi.storage.k8s.io/pod.namespace": "ns",
      "csi.storage.k8s.io/pod.uid": "u1",
      "csi.storage.k8s.io/serviceAccount.name": "sa",
      "csi.storage.k8s.io/ephemeral": "true",
    });
    expect(driver.callsOf("NodeStageVolume")).toHaveLength(0); // inline volumes are never staged
    const mounts = await manager.mountsFor(p, p.spec.containers[0]!);
    expect(mounts[0]).toMatchObject({ containerPath: "/mnt/scratch", hostPath: target("u1", "scratch"), readonly: false });
    // Each sync sets up again: published once.
    await manager.setupPod(p);
    expect(driver.callsOf("NodePublishVolume")).toHaveLength(1);
    expect(JSON.parse(readFileSync(join(root, "pods/u1/volumes/kubernetes.io~csi/scratch/vol_data.json"), "utf8"))).toMatchObject({
      driverName: DRIVER,
      volumeHandle: inlineVolumeHandle("u1", "scratch"),
      volumeLifecycleMode: "Ephemeral",
    });
    await manager.teardownPod("u1");
    expect(driver.callsOf("NodeUnpublishVolume")).toEqual([{ volumeId: inlineVolumeHandle("u1", "scratch"), targetPath: target("u1", "scratch") }]);
    expect(existsSync(join(root, "pods/u1"))).toBe(false);
  });

  test("without podInfoOnMount only the volume attributes go; readOnly is passed", async () => {
    const { driver, manager } = await setup();
    await manager.setupPod(pod("u1", [inline({ a: "b" }, { readOnly: true })]));
    expect(driver.callsOf("NodePublishVolume")[0]).toMatchObject({ volumeContext: { a: "b" }, readonly: true });
  });

  test("refused when the CSIDriver does not allow the Ephemeral mode, or there is no CSIDriver object", async () => {
    const a = await setup({ csiDriverSpec: { attachRequired: false, volumeLifecycleModes: ["Persistent"] } });
    expect(await failureOf(a.manager.setupPod(pod("u1", [inline()])))).toContain(`volume mode "Ephemeral" not supported by driver ${DRIVER} (only supports ["Persistent"])`);
    a.driver.close();
    const b = await setup({ csiDriverSpec: null });
    expect(await failureOf(b.manager.setupPod(pod("u1", [inline()])))).toContain(`volume mode "Ephemeral" not supported by driver ${DRIVER}`);
    expect(b.driver.callsOf("NodePublishVolume")).toHaveLength(0);
  });

  test("a driver that is not registered fails the volume with upstream's message; nothing is left half set up", async () => {
    const { manager, api } = await setup();
    api.csiDrivers.set("other.csi", { metadata: { name: "other.csi" }, spec: { volumeLifecycleModes: ["Ephemeral"] } });
    const msg = await failureOf(manager.setupPod(pod("u1", [{ name: "x", csi: { driver: "other.csi" } }])));
    expect(msg).toBe(
      'MountVolume.SetUp failed for volume "x" : driver name other.csi not found in the list of registered CSI drivers'.slice('MountVolume.SetUp failed for volume "x" : '.length),
    );
    expect(existsSync(join(root, "pods/u1/volumes/kubernetes.io~csi/x/vol_data.json"))).toBe(false);
  });

  test("a failed publish leaves no record, and is tried again on the next sync", async () => {
    const { manager, driver } = await setup();
    driver.failures.set("NodePublishVolume", { code: 13, message: "disk full" });
    expect(await failureOf(manager.setupPod(pod("u1", [inline()])))).toContain("disk full");
    expect(existsSync(join(root, "pods/u1/volumes/kubernetes.io~csi/scratch/vol_data.json"))).toBe(false);
    await manager.setupPod(pod("u1", [inline()]));
    expect(driver.callsOf("NodePublishVolume")).toHaveLength(2);
  });

  test("after an agent restart, teardown finds the driver and handle in vol_data.json; a failed unpublish keeps the pod's directory for the retry", async () => {
    const { manager, driver, api } = await setup();
    await manager.setupPod(pod("u1", [inline()]));
    // A new process: nothing in memory, a new connection to the driver.
    const client = new GrpcCsiNodeClient(join(root, "csi.sock"));
    cleanup.push(() => client.close());
    const csi = new CsiVolumes({
      rootDir: root,
      drivers: { client: () => client },
      api,
      nodeName: "n1",
      controllerAttachDetach: true,
      clock: new FakeClock(),
      logger: memoryLogger().logger,
    });
    const restarted = new PodVolumeManager({
      rootDir: root,
      mounter: new FakeMounter(),
      objects: new FakePodObjects(),
      node,
      clock: new FakeClock(),
      logger: memoryLogger().logger,
      csi,
    });
    driver.failures.set("NodeUnpublishVolume", { code: 13, message: "driver busy" });
    // (not expect().rejects: it does not let the gRPC reply in)
    const failed = await restarted.teardownPod("u1").then(
      () => "",
      (err: Error) => err.message,
    );
    expect(failed).toBe('UnmountVolume.TearDown failed for volume "scratch" (driver fake.csi.example.com): driver busy');
    expect(existsSync(join(root, "pods/u1/volumes/kubernetes.io~csi/scratch/vol_data.json"))).toBe(true);
    await restarted.teardownPod("u1");
    expect(driver.callsOf("NodeUnpublishVolume")).toHaveLength(2);
    expect(driver.callsOf("NodeUnpublishVolume")[1]).toEqual({ volumeId: inlineVolumeHandle("u1", "scratch"), targetPath: target("u1", "scratch") });
    expect(existsSync(join(root, "pods/u1"))).toBe(false);
  });
});

function csiClaim(api: FakeKubeApi, opts: { pv?: Record<string, unknown>; csi?: Record<string, unknown> } = {}) {
  api.claims.set("ns/data", { metadata: { name: "data", namespace: "ns", uid: "pvc-uid" }, spec: { volumeName: "pv1" }, status: { phase: "Bound" } });
  api.persistentVolumes.set("pv1", {
    metadata: { name: "pv1" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      claimRef: { uid: "pvc-uid", name: "data", namespace: "ns" },
      csi: { driver: DRIVER, volumeHandle: "vol-1", fsType: "ext4", volumeAttributes: { k: "v" }, ...opts.csi },
      ...opts.pv,
    },
  });
  return { name: "data", persistentVolumeClaim: { claimName: "data" } };
}

describe("CSI PersistentVolumes", () => {
  test("published in a directory named after the PV, as upstream's; a publication an earlier version made under the pod's volume name is kept, not published again", async () => {
    const { driver, api, manager } = await setup();
    const vol = csiClaim(api);
    await manager.setupPod(pod("u1", [vol]));
    expect((driver.callsOf("NodePublishVolume") as { targetPath: string }[]).map((c) => c.targetPath)).toEqual([target("u1", "pv1")]);
    // The earlier layout: pods/u2/volumes/kubernetes.io~csi/data with the PV recorded in its vol_data.json.
    const legacy = join(root, "pods/u2/volumes/kubernetes.io~csi/data");
    mkdirSync(join(legacy, "mount"), { recursive: true });
    writeFileSync(
      join(legacy, "vol_data.json"),
      JSON.stringify({ driverName: DRIVER, volumeHandle: "vol-1", specVolumeID: "pv1", volumeLifecycleMode: "Persistent", nodeName: "n" }),
    );
    const p2 = pod("u2", [vol]);
    await manager.setupPod(p2);
    expect(driver.callsOf("NodePublishVolume")).toHaveLength(1);
    expect((await manager.mountsFor(p2, p2.spec.containers[0]!))[0]!.hostPath).toBe(target("u2", "data"));
  });

  test("staged once in the global mount dir when the driver stages, published per pod, unstaged after the last pod", async () => {
    const { driver, api, manager } = await setup({ driver: { stageUnstage: true } });
    const vol = csiClaim(api, { pv: { mountOptions: ["noatime"] } });
    const staging = join(root, "plugins/kubernetes.io/csi", DRIVER, sha256("vol-1"), "globalmount");
    await manager.setupPod(pod("u1", [vol]));
    await manager.setupPod(pod("u2", [vol]));
    const stage = driver.callsOf("NodeStageVolume") as { volumeId: string; stagingTargetPath: string; volumeCapability: unknown; volumeContext: Record<string, string> }[];
    expect(stage).toHaveLength(1);
    expect(stage[0]).toMatchObject({
      volumeId: "vol-1",
      stagingTargetPath: staging,
      volumeContext: { k: "v" },
      volumeCapability: { accessType: { oneofKind: "mount", mount: { fsType: "ext4", mountFlags: ["noatime"] } }, accessMode: { mode: 1 } },
    });
    const publish = driver.callsOf("NodePublishVolume") as { stagingTargetPath: string; targetPath: string }[];
    expect(publish.map((c) => [c.stagingTargetPath, c.targetPath])).toEqual([
      [staging, target("u1", "pv1")],
      [staging, target("u2", "pv1")],
    ]);
    const p1 = pod("u1", [vol]);
    expect((await manager.mountsFor(p1, p1.spec.containers[0]!))[0]!.hostPath).toBe(target("u1", "pv1"));
    // Measured by the driver (driverVolumeStats), never walked as a path.
    expect(manager.claimVolumes("u1")).toEqual([]);
    await manager.teardownPod("u1");
    expect(driver.callsOf("NodeUnpublishVolume")).toHaveLength(1);
    expect(driver.callsOf("NodeUnstageVolume")).toHaveLength(0); // u2 still uses it
    await manager.teardownPod("u2");
    expect(driver.callsOf("NodeUnstageVolume")).toEqual([{ volumeId: "vol-1", stagingTargetPath: staging }]);
    expect(existsSync(join(root, "plugins/kubernetes.io/csi", DRIVER, sha256("vol-1")))).toBe(false);
  });

  test("a driver without STAGE_UNSTAGE_VOLUME is only published (no staging path)", async () => {
    const { driver, api, manager } = await setup();
    await manager.setupPod(pod("u1", [csiClaim(api)]));
    expect(driver.callsOf("NodeStageVolume")).toHaveLength(0);
    expect(driver.callsOf("NodePublishVolume")[0]).toMatchObject({ volumeId: "vol-1", stagingTargetPath: "", volumeContext: { k: "v" } });
  });

  test("attachRequired: waits for the VolumeAttachment to be attached, and its metadata is the publish context", async () => {
    const { driver, api, manager } = await setup({ csiDriverSpec: { attachRequired: true } });
    const vol = csiClaim(api);
    const va = attachmentName("vol-1", DRIVER, "n1");
    expect(va).toBe(`csi-${sha256(`vol-1${DRIVER}n1`)}`);
    expect(await failureOf(manager.setupPod(pod("u1", [vol])))).toContain(`waiting for VolumeAttachment ${va}`);
    api.volumeAttachments.set(va, { metadata: { name: va }, status: { attached: false } });
    expect(await failureOf(manager.setupPod(pod("u1", [vol])))).toContain("waiting for external-attacher");
    expect(driver.callsOf("NodePublishVolume")).toHaveLength(0);
    api.volumeAttachments.set(va, { metadata: { name: va }, status: { attached: true, attachmentMetadata: { device: "/dev/x" } } });
    await manager.setupPod(pod("u1", [vol]));
    expect(driver.callsOf("NodePublishVolume")[0]).toMatchObject({ publishContext: { device: "/dev/x" } });
  });

  test("attachRequired with enableControllerAttachDetach false is refused, saying so", async () => {
    const { api, manager } = await setup({ csiDriverSpec: { attachRequired: true }, controllerAttachDetach: false });
    expect(await failureOf(manager.setupPod(pod("u1", [csiClaim(api)])))).toContain("enableControllerAttachDetach: false");
  });

  test("raw block PVs are refused", async () => {
    const { api, manager } = await setup();
    expect(await failureOf(manager.setupPod(pod("u1", [csiClaim(api, { pv: { volumeMode: "Block" } })])))).toContain(
      "volume data has volumeMode Block, but is specified in volumeMounts",
    );
  });
});

describe("fsGroup per the CSIDriver's fsGroupPolicy", () => {
  const withFsGroup = { securityContext: { fsGroup: 4321 } } as Partial<Pod["spec"]>;

  test("ReadWriteOnceWithFSType (the default): a RWO volume with an fsType gets the group", async () => {
    const { api, manager } = await setup();
    await manager.setupPod(pod("u1", [csiClaim(api)], withFsGroup));
    writeFileSync(join(target("u1", "pv1"), "probe"), "x"); // the driver published the dir; ownership was set on it
    expect(statSync(target("u1", "pv1")).gid).toBe(4321);
  });

  test("ReadWriteOnceWithFSType: no fsType, no change", async () => {
    const { api, manager } = await setup();
    await manager.setupPod(pod("u1", [csiClaim(api, { csi: { fsType: "" } })], withFsGroup));
    expect(statSync(target("u1", "pv1")).gid).not.toBe(4321);
  });

  test("File: always; None: never", async () => {
    const a = await setup({ csiDriverSpec: { attachRequired: false, fsGroupPolicy: "File", volumeLifecycleModes: ["Ephemeral"] } });
    await a.manager.setupPod(pod("u1", [inline()], withFsGroup));
    expect(statSync(target("u1", "scratch")).gid).toBe(4321);
    a.driver.close();
    rmSync(join(root, "pods"), { recursive: true, force: true });
    const b = await setup({ csiDriverSpec: { attachRequired: false, fsGroupPolicy: "None" } });
    await b.manager.setupPod(pod("u2", [csiClaim(b.api)], withFsGroup));
    expect(statSync(target("u2", "pv1")).gid).not.toBe(4321);
  });

  test("a driver with VOLUME_MOUNT_GROUP gets the group in the capability and applies it itself", async () => {
    const { driver, api, manager } = await setup({ driver: { mountGroup: true } });
    await manager.setupPod(pod("u1", [csiClaim(api)], withFsGroup));
    expect(driver.callsOf("NodePublishVolume")[0]).toMatchObject({ volumeCapability: { accessType: { mount: { volumeMountGroup: "4321" } } } });
    expect(statSync(target("u1", "pv1")).gid).not.toBe(4321);
  });
});

describe("CSI volume stats (NodeGetVolumeStats)", () => {
  const usage = {
    usage: [
      { unit: 1, total: 10n * 2n ** 30n, available: 6n * 2n ** 30n, used: 4n * 2n ** 30n },
      { unit: 2, total: 1000n, available: 900n, used: 100n },
    ],
  };

  test("a driver with GET_VOLUME_STATS is asked per published volume (id and target path); a claim's volume carries its pvcRef", async () => {
    const { driver, api, manager } = await setup({ driver: { stageUnstage: true, volumeStats: { "*": usage } } });
    await manager.setupPod(pod("u1", [csiClaim(api), inline()]));
    const stats = (await manager.driverVolumeStats("u1")).sort((a, b) => a.name.localeCompare(b.name));
    expect(stats).toEqual([
      {
        name: "data",
        pvcRef: { name: "data", namespace: "ns" },
        capacityBytes: 10 * 2 ** 30,
        availableBytes: 6 * 2 ** 30,
        usedBytes: 4 * 2 ** 30,
        inodes: 1000,
        inodesFree: 900,
        inodesUsed: 100,
      },
      { name: "scratch", capacityBytes: 10 * 2 ** 30, availableBytes: 6 * 2 ** 30, usedBytes: 4 * 2 ** 30, inodes: 1000, inodesFree: 900, inodesUsed: 100 },
    ]);
    const calls = (driver.callsOf("NodeGetVolumeStats") as { volumeId: string; volumePath: string; stagingTargetPath: string }[]).sort((a, b) =>
      a.volumePath.localeCompare(b.volumePath),
    );
    expect(calls).toEqual([
      { volumeId: "vol-1", volumePath: target("u1", "pv1"), stagingTargetPath: "" },
      { volumeId: inlineVolumeHandle("u1", "scratch"), volumePath: target("u1", "scratch"), stagingTargetPath: "" },
    ]);
  });

  test("only bytes reported: the inode figures are 0, as upstream fills them", async () => {
    const { api, manager } = await setup({ driver: { volumeStats: { "vol-1": { usage: [{ unit: 1, total: 100n, available: 0n, used: 0n }] } } } });
    await manager.setupPod(pod("u1", [csiClaim(api)]));
    expect(await manager.driverVolumeStats("u1")).toEqual([
      { name: "data", pvcRef: { name: "data", namespace: "ns" }, capacityBytes: 100, availableBytes: 0, usedBytes: 0, inodes: 0, inodesFree: 0, inodesUsed: 0 },
    ]);
  });

  test("left out: a driver without GET_VOLUME_STATS (never asked), a failing call, a reply without usage, an unregistered driver", async () => {
    const a = await setup();
    await a.manager.setupPod(pod("u1", [csiClaim(a.api)]));
    expect(await a.manager.driverVolumeStats("u1")).toEqual([]);
    expect(a.driver.callsOf("NodeGetVolumeStats")).toHaveLength(0);
    a.driver.close();
    rmSync(join(root, "pods"), { recursive: true, force: true });

    // The fake answers NOT_FOUND for a volume it has no usage for; "other" has an empty usage list.
    const b = await setup({ driver: { volumeStats: { other: { usage: [] } } } });
    await b.manager.setupPod(pod("u2", [csiClaim(b.api)]));
    expect(await b.manager.driverVolumeStats("u2")).toEqual([]);
    expect(b.driver.callsOf("NodeGetVolumeStats")).toHaveLength(1);
    expect(await b.manager.driverVolumeStats("absent")).toEqual([]);
  });
});

describe("access modes (upstream's two mappers)", () => {
  test("a driver with SINGLE_NODE_MULTI_WRITER: ReadWriteOnce is SINGLE_NODE_MULTI_WRITER, ReadWriteOncePod SINGLE_NODE_SINGLE_WRITER, inline volumes as ReadWriteOnce", async () => {
    const { driver, api, manager } = await setup({ driver: { stageUnstage: true, singleNodeMultiWriter: true } });
    await manager.setupPod(pod("u1", [csiClaim(api), inline()]));
    const modes = (m: string) =>
      (driver.callsOf(m) as { volumeId: string; volumeCapability: { accessMode: { mode: number } } }[]).map((c) => [c.volumeId, c.volumeCapability.accessMode.mode]);
    expect(modes("NodeStageVolume")).toEqual([["vol-1", 7]]);
    expect(modes("NodePublishVolume").sort()).toEqual([
      [inlineVolumeHandle("u1", "scratch"), 7],
      ["vol-1", 7],
    ]);
    await manager.teardownPod("u1");
    api.persistentVolumes.get("pv1")!.spec = { ...(api.persistentVolumes.get("pv1")!.spec as object), accessModes: ["ReadWriteOncePod"] };
    await manager.setupPod(pod("u2", [{ name: "data", persistentVolumeClaim: { claimName: "data" } }]));
    expect(modes("NodeStageVolume").at(-1)).toEqual(["vol-1", 6]);
    expect(modes("NodePublishVolume").at(-1)).toEqual(["vol-1", 6]);
  });

  test("a driver without it: ReadWriteOncePod is SINGLE_NODE_WRITER, as ReadWriteOnce; ReadWriteMany MULTI_NODE_MULTI_WRITER", async () => {
    const { driver, api, manager } = await setup({ driver: { stageUnstage: true } });
    await manager.setupPod(pod("u1", [csiClaim(api, { pv: { accessModes: ["ReadWriteOncePod"] } })]));
    const mode = (m: string) => (driver.callsOf(m).at(-1) as { volumeCapability: { accessMode: { mode: number } } }).volumeCapability.accessMode.mode;
    expect([mode("NodeStageVolume"), mode("NodePublishVolume")]).toEqual([1, 1]);
    await manager.teardownPod("u1");
    api.persistentVolumes.get("pv1")!.spec = { ...(api.persistentVolumes.get("pv1")!.spec as object), accessModes: ["ReadWriteMany", "ReadOnlyMany"] };
    await manager.setupPod(pod("u2", [{ name: "data", persistentVolumeClaim: { claimName: "data" } }]));
    expect([mode("NodeStageVolume"), mode("NodePublishVolume")]).toEqual([5, 5]);
  });
});

describe("node expansion (NodeExpandVolume)", () => {
  const GI = 2 ** 30;
  /** The claim and PV after the resizer grew the volume to 2Gi (capacity in the claim's status still 1Gi). */
  function resized(api: FakeKubeApi, status: Record<string, unknown>, opts: { readOnly?: boolean; csi?: Record<string, unknown> } = {}) {
    const vol = csiClaim(api, { pv: { capacity: { storage: "2Gi" } }, ...(opts.csi ? { csi: opts.csi } : {}) });
    const claim = api.claims.get("ns/data")!;
    claim.metadata = { ...claim.metadata, resourceVersion: "7" };
    claim.spec = { ...(claim.spec as object), accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "2Gi" } } };
    claim.status = { phase: "Bound", capacity: { storage: "1Gi" }, ...status };
    return opts.readOnly ? { ...vol, persistentVolumeClaim: { ...vol.persistentVolumeClaim, readOnly: true } } : vol;
  }
  const statusPatches = (api: FakeKubeApi) => api.calls.filter((c) => c.method === "patchPersistentVolumeClaimStatus").map((c) => c.args[2]);

  test("the resizer's NodeResizePending: marked in progress, expanded on the target and staging paths to allocatedResources, then the capacity set and the resize state cleared", async () => {
    const { driver, api, manager, events } = await setup({ driver: { stageUnstage: true, expand: true } });
    const other = { type: "ModifyingVolume", status: "True" };
    const vol = resized(api, {
      allocatedResources: { storage: "2Gi" },
      allocatedResourceStatuses: { storage: "NodeResizePending" },
      conditions: [{ type: "FileSystemResizePending", status: "True" }, other],
    });
    await manager.setupPod(pod("u1", [vol]));
    expect(driver.callsOf("NodeExpandVolume")).toEqual([
      {
        volumeId: "vol-1",
        volumePath: target("u1", "pv1"),
        stagingTargetPath: join(root, "plugins/kubernetes.io/csi", DRIVER, sha256("vol-1"), "globalmount"),
        capacityRange: { requiredBytes: BigInt(2 * GI), limitBytes: 0n },
        volumeCapability: { accessType: { oneofKind: "mount", mount: { fsType: "ext4", mountFlags: [], volumeMountGroup: "" } }, accessMode: { mode: 1 } },
        secrets: {},
      },
    ]);
    expect(statusPatches(api)).toEqual([
      { metadata: { resourceVersion: "7" }, status: { allocatedResourceStatuses: { storage: "NodeResizeInProgress" } } },
      { metadata: { resourceVersion: "8" }, status: { capacity: { storage: "2Gi" }, allocatedResourceStatuses: null, conditions: [other] } },
    ]);
    const claim = api.claims.get("ns/data")!;
    expect(claim.status).toEqual({ phase: "Bound", capacity: { storage: "2Gi" }, allocatedResources: { storage: "2Gi" }, conditions: [other] });
    const success = `MountVolume.NodeExpandVolume succeeded for volume "pv1" n1`;
    expect(events).toEqual([`Pod/p-u1 Normal FileSystemResizeSuccessful ${success}`, `PersistentVolumeClaim/data Normal FileSystemResizeSuccessful ${success}`]);
    // Done: the next sync finds nothing to expand.
    await manager.setupPod(pod("u1", [vol]));
    expect(driver.callsOf("NodeExpandVolume")).toHaveLength(1);
  });

  test("an older resizer (no allocatedResources): expanded to the PV's capacity, the status capacity set", async () => {
    const { driver, api, manager } = await setup({ driver: { expand: true } });
    await manager.setupPod(pod("u1", [resized(api, {})]));
    expect((driver.callsOf("NodeExpandVolume")[0] as { capacityRange: unknown; stagingTargetPath: string }).capacityRange).toEqual({
      requiredBytes: BigInt(2 * GI),
      limitBytes: 0n,
    });
    expect(statusPatches(api)).toEqual([{ metadata: { resourceVersion: "7" }, status: { capacity: { storage: "2Gi" }, allocatedResourceStatuses: null, conditions: [] } }]);
  });

  test("not expanded: the resizer still at work (ControllerResizeInProgress), a read-only claim, a driver without EXPAND_VOLUME, a claim already at the PV's size", async () => {
    const a = await setup({ driver: { expand: true } });
    await a.manager.setupPod(pod("u1", [resized(a.api, { allocatedResources: { storage: "2Gi" }, allocatedResourceStatuses: { storage: "ControllerResizeInProgress" } })]));
    await a.manager.setupPod(pod("u2", [resized(a.api, {}, { readOnly: true })]));
    expect(a.driver.callsOf("NodeExpandVolume")).toHaveLength(0);
    a.api.claims.get("ns/data")!.status = { phase: "Bound", capacity: { storage: "2Gi" } };
    await a.manager.setupPod(pod("u3", [{ name: "data", persistentVolumeClaim: { claimName: "data" } }]));
    expect(a.driver.callsOf("NodeExpandVolume")).toHaveLength(0);
    expect(statusPatches(a.api)).toEqual([]);
    a.driver.close();
    rmSync(join(root, "pods"), { recursive: true, force: true });
    const b = await setup();
    await b.manager.setupPod(pod("u4", [resized(b.api, { allocatedResources: { storage: "2Gi" }, allocatedResourceStatuses: { storage: "NodeResizePending" } })]));
    expect(b.driver.callsOf("NodeExpandVolume")).toHaveLength(0);
    expect(statusPatches(b.api)).toEqual([]);
  });

  test("an infeasible request (INVALID_ARGUMENT): NodeResizeInfeasible and a NodeResizeError condition on the claim, VolumeResizeFailed on the pod; the pod's volume stays ready", async () => {
    const { driver, api, manager, events } = await setup({ driver: { expand: true } });
    driver.failures.set("NodeExpandVolume", { code: 3, message: "too big" });
    await manager.setupPod(pod("u1", [resized(api, { allocatedResources: { storage: "2Gi" }, allocatedResourceStatuses: { storage: "NodeResizePending" } })]));
    const message = "Expander.NodeExpand failed to expand the volume : rpc error: code = InvalidArgument desc = too big";
    const status = api.claims.get("ns/data")!.status as { allocatedResourceStatuses: unknown; conditions: { type: string; status: string; message: string }[]; capacity: unknown };
    expect(status.allocatedResourceStatuses).toEqual({ storage: "NodeResizeInfeasible" });
    expect(status.conditions).toMatchObject([{ type: "NodeResizeError", status: "True", message: `failed to expand pvc with ${message}` }]);
    expect(status.capacity).toEqual({ storage: "1Gi" });
    expect(events).toEqual([`Pod/p-u1 Warning VolumeResizeFailed NodeExpandVolume.NodeExpandVolume failed for volume "pv1" : ${message}`]);
  });
});
