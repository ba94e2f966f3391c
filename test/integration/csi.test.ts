// CSI with a real driver: k8s.io/kubernetes' CSI mock driver (the one
// upstream's e2e storage tests run), served with the registration side of
// node-driver-registrar (k8s.io/kubelet pluginregistration v1) by csi-mock,
// built from Go modules by scripts/controlplane/build.sh --with-csi-mock on
// first use, against a real control plane and containerd. csi-mock logs
// every CSI call it answers as a JSON line; the test reads what the agent
// asked from there. The mock mounts nothing: it makes (or leaves to the
// runtime) the target directory and removes it on unpublish.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "csi-node";
const DRIVER = "io.kubernetes.storage.mock";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let driver: Subprocess | undefined;
let driverLog: string;
let root: string;
let kubeletPort: number;
let csiNodeBeforeDrivers: any;

const { kubectl, tryJson, apply } = adminKubectl(() => cp);

/** GET on the agent's 10250 as the cluster admin (its serving certificate is self-signed). */
async function kubeletGet(path: string): Promise<{ status: number; body: string }> {
  const pki = join(cp.dir, "pki");
  const res = await fetch(`https://127.0.0.1:${kubeletPort}${path}`, {
    tls: { cert: readFileSync(join(pki, "admin.crt"), "utf8"), key: readFileSync(join(pki, "admin.key"), "utf8"), rejectUnauthorized: false },
  } as RequestInit);
  return { status: res.status, body: await res.text() };
}

/** The pod's volume entries in /stats/summary once a stats pass has them. */
const summaryVolumes = async (podName: string) => {
  const r = await kubeletGet("/stats/summary");
  if (r.status !== 200) return undefined;
  return (JSON.parse(r.body).pods as { podRef: { name: string }; volume?: Record<string, any>[] }[]).find((p) => p.podRef.name === podName)?.volume ?? [];
};
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

function csiMockBinary(): string {
  const script = resolve(import.meta.dir, "../../scripts/controlplane/build.sh");
  const r = Bun.spawnSync(["bash", script, "--with-csi-mock"], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`build.sh --with-csi-mock failed:\n${r.stderr.toString()}`);
  return join(r.stdout.toString().trim().split("\n").pop()!, "csi-mock");
}

interface Call {
  method?: string;
  request?: Record<string, any>;
  error?: string;
  registration?: boolean;
}

const calls = (): Call[] =>
  existsSync(driverLog)
    ? readFileSync(driverLog, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Call)
    : [];
const callsOf = (method: string) => calls().filter((c) => c.method === `/csi.v1.Node/${method}`);
const driverTail = () => (existsSync(driverLog) ? readFileSync(driverLog, "utf8").split("\n").slice(-20).join("\n") : "");

const pod = (name: string, volume: Record<string, unknown>, script: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: {
    nodeName: NODE,
    terminationGracePeriodSeconds: 1,
    serviceAccountName: "default",
    automountServiceAccountToken: false,
    containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sh", "-c", script], volumeMounts: [{ name: "data", mountPath: "/data" }] }],
    volumes: [{ name: "data", ...volume }],
  },
});

const running = (name: string) =>
  eventually(
    `pod ${name} Running`,
    async () => {
      const p = await tryJson("pod", name);
      return p?.status?.phase === "Running" ? p : undefined;
    },
    90_000,
  ).catch((e) => {
    throw new Error(`${(e as Error).message}\ndriver log:\n${driverTail()}\n${agent.describe()}`);
  });

const gone = (name: string) => eventually(`pod ${name} gone`, async () => (await cp.kubectl(["get", "pod", name])).code !== 0, 60_000);

beforeAll(async () => {
  requireRoot();
  const binary = csiMockBinary();
  [ctd, cp] = await startTogether([startContainerd({ name: "csi" }), startControlPlane({ name: "csi" })]);
  kubeletPort = await freePort();
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, "--node-ip=127.0.0.1"],
    // /metrics and /stats/summary on 10250 for the cluster admin; volume usage measured every 5 s instead of every minute.
    extraConfig: {
      port: kubeletPort,
      authentication: { x509: { clientCAFile: cp.caFile }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
      volumeStatsAggPeriod: "5s",
      // Running pods are synced (and their claims looked at for node expansion) every 10 s instead of every minute.
      syncFrequency: "10s",
    },
  });
  root = join(agent.dir, "root");
  await apply({
    apiVersion: "storage.k8s.io/v1",
    kind: "CSIDriver",
    metadata: { name: DRIVER },
    spec: { attachRequired: false, podInfoOnMount: true, volumeLifecycleModes: ["Persistent", "Ephemeral"] },
  });
  mkdirSync(join(root, "plugins", "mock"), { recursive: true });
  driverLog = join(agent.dir, "csi-mock.log");
  const fd = openSync(driverLog, "a");
  await eventually("the agent's node", async () => (await tryJson("node", NODE)) !== undefined, 60_000);
  // Upstream creates the node's CSINode as soon as the Node exists, before any driver registers.
  csiNodeBeforeDrivers = await eventually("CSINode before any driver", () => tryJson("csinode", NODE), 60_000);
  driver = Bun.spawn(
    [
      binary,
      `--name=${DRIVER}`,
      `--csi-address=${join(root, "plugins", "mock", "csi.sock")}`,
      `--registration-path=${join(root, "plugins_registry", "mock-reg.sock")}`,
      "--attach-limit=5",
      "--node-expansion",
    ],
    { stdout: fd, stderr: fd },
  );
  process.once("exit", () => driver?.kill("SIGKILL"));
}, 1_800_000);

afterAll(async () => {
  driver?.kill("SIGTERM");
  await driver?.exited;
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("CSI with the mock driver and the registration protocol", () => {
  test("CSINode exists before any driver registers: no drivers, owned by the Node, upstream's migrated-plugins annotation", async () => {
    const node = await tryJson("node", NODE);
    expect(csiNodeBeforeDrivers.spec.drivers ?? []).toEqual([]);
    expect(csiNodeBeforeDrivers.metadata.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: NODE, uid: node.metadata.uid }]);
    // Ready only once the CSINode exists (upstream: "CSINode is not yet initialized" until then).
    const ready = node.status.conditions.find((c: { type: string }) => c.type === "Ready");
    expect(ready.status).toBe("True");
    expect(Date.parse(ready.lastTransitionTime)).toBeGreaterThanOrEqual(Date.parse(csiNodeBeforeDrivers.metadata.creationTimestamp));
    expect(csiNodeBeforeDrivers.metadata.annotations["storage.alpha.kubernetes.io/migrated-plugins"]).toBe(
      "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume",
    );
  });

  test("the driver registers through plugins_registry: CSINode lists it (nodeID, topologyKeys, allocatable), the node carries its topology label and node ID", async () => {
    const csiNode = await eventually(
      "CSINode with the driver",
      async () => {
        const n = await tryJson("csinode", NODE);
        return n?.spec?.drivers?.length ? n : undefined;
      },
      60_000,
    ).catch((e) => {
      throw new Error(`${(e as Error).message}\ndriver log:\n${driverTail()}\n${agent.describe()}`);
    });
    expect(csiNode.spec.drivers).toEqual([{ name: DRIVER, nodeID: DRIVER, topologyKeys: [`${DRIVER}/node`], allocatable: { count: 5 } }]);
    const node = await tryJson("node", NODE);
    expect(csiNode.metadata.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: NODE, uid: node.metadata.uid }]);
    expect(node.metadata.labels[`${DRIVER}/node`]).toBe("some-mock-node");
    expect(JSON.parse(node.metadata.annotations["csi.volume.kubernetes.io/nodeid"])).toEqual({ [DRIVER]: DRIVER });
    expect(calls().some((c) => c.registration === true)).toBe(true);
    expect(calls().filter((c) => c.method === "/csi.v1.Node/NodeGetInfo")).toHaveLength(1);
  }, 90_000);

  test("an inline ephemeral volume is published for the pod with its attributes and the pod's info, and unpublished when the pod is deleted", async () => {
    await apply(pod("inline", { csi: { driver: DRIVER, volumeAttributes: { color: "blue" } } }, "echo hello > /data/hello; sleep 3600"));
    const p = await running("inline");
    const uid = p.metadata.uid as string;
    const target = join(root, "pods", uid, "volumes", "kubernetes.io~csi", "data", "mount");
    const published = callsOf("NodePublishVolume").find((c) => c.request?.targetPath === target);
    expect(published?.error).toBeUndefined();
    expect(published?.request?.volumeId).toBe(`csi-${sha256(`${uid}data`)}`);
    expect(published?.request?.volumeContext).toEqual({
      color: "blue",
      "csi.storage.k8s.io/pod.name": "inline",
      "csi.storage.k8s.io/pod.namespace": "default",
      "csi.storage.k8s.io/pod.uid": uid,
      "csi.storage.k8s.io/serviceAccount.name": "default",
      "csi.storage.k8s.io/ephemeral": "true",
    });
    // The container writes into the published directory.
    expect(await eventually("the pod's file in the target", () => (existsSync(join(target, "hello")) ? readFileSync(join(target, "hello"), "utf8") : undefined))).toBe("hello\n");
    // Asked for its usage; the mock answers NOT_FOUND for an inline volume, which upstream leaves out of the summary.
    const statsCall = await eventually("NodeGetVolumeStats of the inline volume", () => callsOf("NodeGetVolumeStats").find((c) => c.request?.volumePath === target), 60_000);
    expect(statsCall.error).toContain("NotFound");
    expect((await summaryVolumes("inline"))?.find((v) => v.name === "data")).toBeUndefined();
    await kubectl("delete", "pod", "inline", "--wait=false");
    await gone("inline");
    const unpublished = await eventually("NodeUnpublishVolume", () => callsOf("NodeUnpublishVolume").find((c) => c.request?.targetPath === target), 30_000);
    expect(unpublished.request?.volumeId).toBe(`csi-${sha256(`${uid}data`)}`);
    expect(unpublished.error).toBeUndefined();
    await eventually("the pod's directory removed", () => !existsSync(join(root, "pods", uid)), 30_000);
  }, 180_000);

  test("a claim bound to a CSI PersistentVolume is staged in the global mount dir, published, then unpublished and unstaged when the pod goes", async () => {
    // The mock driver starts with volumes "1", "2" and "3"; the PV controller binds the claim to this PV.
    await apply(
      {
        apiVersion: "v1",
        kind: "PersistentVolume",
        metadata: { name: "mock-pv" },
        spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], storageClassName: "", csi: { driver: DRIVER, volumeHandle: "1", fsType: "ext4" } },
      },
      {
        apiVersion: "v1",
        kind: "PersistentVolumeClaim",
        metadata: { name: "mock-claim", namespace: "default" },
        spec: { accessModes: ["ReadWriteOnce"], storageClassName: "", volumeName: "mock-pv", resources: { requests: { storage: "1Gi" } } },
      },
    );
    await eventually("claim bound", async () => (await tryJson("pvc", "mock-claim"))?.status?.phase === "Bound", 60_000);
    await apply(pod("claimed", { persistentVolumeClaim: { claimName: "mock-claim" } }, "echo persisted > /data/f; sleep 3600"));
    const p = await running("claimed");
    const uid = p.metadata.uid as string;
    const staging = join(root, "plugins", "kubernetes.io", "csi", DRIVER, sha256("1"), "globalmount");
    // Named after the PV, as upstream's (a takeover finds the upstream kubelet's publications there).
    const target = join(root, "pods", uid, "volumes", "kubernetes.io~csi", "mock-pv", "mount");
    const staged = callsOf("NodeStageVolume").find((c) => c.request?.volumeId === "1");
    expect(staged?.error).toBeUndefined();
    expect(staged?.request?.stagingTargetPath).toBe(staging);
    const published = callsOf("NodePublishVolume").find((c) => c.request?.targetPath === target);
    expect(published?.error).toBeUndefined();
    expect(published?.request).toMatchObject({
      volumeId: "1",
      stagingTargetPath: staging,
      volumeCapability: { mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } },
    });
    expect(await eventually("the pod's file", () => (existsSync(join(target, "f")) ? readFileSync(join(target, "f"), "utf8") : undefined))).toBe("persisted\n");

    // The driver has GET_VOLUME_STATS: its NodeGetVolumeStats answer (the mock reports only the volume's 100 GiB total) is the
    // volume's entry in /stats/summary, with the claim, and kubelet_volume_stats_* for the claim.
    const data = await eventually("the claim's volume in /stats/summary", async () => (await summaryVolumes("claimed"))?.find((v) => v.name === "data"), 60_000, 1000);
    const GiB100 = 100 * 2 ** 30;
    expect(data).toMatchObject({
      pvcRef: { name: "mock-claim", namespace: "default" },
      capacityBytes: GiB100,
      availableBytes: 0,
      usedBytes: 0,
      inodes: 0,
      inodesFree: 0,
      inodesUsed: 0,
    });
    expect((await summaryVolumes("claimed"))?.filter((v) => v.name === "data")).toHaveLength(1); // measured by the driver only, never walked too
    const asked = callsOf("NodeGetVolumeStats").find((c) => c.request?.volumePath === target);
    expect(asked?.request?.volumeId).toBe("1");
    expect(asked?.error).toBeUndefined();
    const metrics = (await kubeletGet("/metrics")).body;
    const sample = (name: string) => new RegExp(`^kubelet_volume_stats_${name}\\{namespace="default",persistentvolumeclaim="mock-claim"\\} (\\S+)$`, "m").exec(metrics)?.[1];
    expect(Number(sample("capacity_bytes"))).toBe(GiB100);
    expect(Number(sample("used_bytes"))).toBe(0);
    expect(Number(sample("inodes_free"))).toBe(0);

    // Node expansion: the test plays the external resizer (none runs here): the PV grows to 2Gi and the claim's status says
    // node expansion is pending. The agent calls NodeExpandVolume (the driver has EXPAND_VOLUME) on the published and staging
    // paths, then records the new capacity on the claim and clears the pending state, as upstream's node expander.
    await kubectl("patch", "pv", "mock-pv", "--type=merge", "-p", JSON.stringify({ spec: { capacity: { storage: "2Gi" } } }));
    await kubectl(
      "patch",
      "pvc",
      "mock-claim",
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { allocatedResources: { storage: "2Gi" }, allocatedResourceStatuses: { storage: "NodeResizePending" } } }),
    );
    const expanded = await eventually(
      "the claim's capacity updated by the node",
      async () => {
        const c = await tryJson("pvc", "mock-claim");
        return c?.status?.capacity?.storage === "2Gi" ? c : undefined;
      },
      90_000,
      1000,
    ).catch(async (e) => {
      throw new Error(`${(e as Error).message}\nclaim: ${JSON.stringify((await tryJson("pvc", "mock-claim"))?.status)}\ndriver log:\n${driverTail()}\n${agent.describe()}`);
    });
    expect(expanded.status.allocatedResourceStatuses).toBeUndefined();
    expect(expanded.status.allocatedResources).toEqual({ storage: "2Gi" });
    const expand = callsOf("NodeExpandVolume");
    expect(expand).toHaveLength(1);
    expect(expand[0]?.error).toBeUndefined();
    expect(expand[0]?.request).toMatchObject({ volumeId: "1", volumePath: target, stagingTargetPath: staging, capacityRange: { requiredBytes: String(2 * 2 ** 30) } });
    const resizeEvents = JSON.parse(await kubectl("get", "events", "--field-selector", "reason=FileSystemResizeSuccessful", "-o", "json")).items as {
      involvedObject: { kind: string; name: string };
      message: string;
    }[];
    expect(resizeEvents.map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}`).sort()).toEqual(["PersistentVolumeClaim/mock-claim", "Pod/claimed"]);
    expect(resizeEvents[0]?.message).toBe(`MountVolume.NodeExpandVolume succeeded for volume "mock-pv" ${NODE}`);

    await kubectl("delete", "pod", "claimed", "--wait=false");
    await gone("claimed");
    await eventually("NodeUnstageVolume", () => callsOf("NodeUnstageVolume").find((c) => c.request?.volumeId === "1"), 30_000);
    // The mount calls only: a background NodeGetVolumeStats may land anywhere.
    const order = calls()
      .filter((c) => c.request?.volumeId === "1")
      .map((c) => c.method?.split("/").pop())
      .filter((m) => m !== "NodeGetVolumeStats");
    expect(order.slice(-2)).toEqual(["NodeUnpublishVolume", "NodeUnstageVolume"]);
    expect(existsSync(join(root, "plugins", "kubernetes.io", "csi", DRIVER, sha256("1")))).toBe(false);
  }, 180_000);

  test("a volume of a driver that is not registered fails with a FailedMount event naming why, and the pod does not run", async () => {
    await apply({
      apiVersion: "storage.k8s.io/v1",
      kind: "CSIDriver",
      metadata: { name: "absent.csi.example.com" },
      spec: { attachRequired: false, volumeLifecycleModes: ["Ephemeral"] },
    });
    await apply(pod("absent", { csi: { driver: "absent.csi.example.com" } }, "sleep 3600"));
    const event = await eventually(
      "FailedMount event",
      async () => {
        const events = JSON.parse(await kubectl("get", "events", "--field-selector", "involvedObject.name=absent", "-o", "json")).items as { reason: string; message: string }[];
        return events.find((e) => e.reason === "FailedMount");
      },
      60_000,
    );
    expect(event.message).toContain("driver name absent.csi.example.com not found in the list of registered CSI drivers");
    expect((await tryJson("pod", "absent"))?.status?.phase).toBe("Pending");
    await kubectl("delete", "pod", "absent", "--wait=false");
  }, 90_000);

  test("the driver's registration socket going away removes its CSINode entry and its node ID; the CSINode stays", async () => {
    driver?.kill("SIGTERM"); // csi-mock removes its sockets on the way out, as node-driver-registrar does
    await driver?.exited;
    driver = undefined;
    const csiNode = await eventually(
      "CSINode without the driver",
      async () => {
        const n = await tryJson("csinode", NODE);
        return n && !(n.spec.drivers ?? []).length ? n : undefined;
      },
      60_000,
    );
    expect(csiNode.metadata.annotations["storage.alpha.kubernetes.io/migrated-plugins"]).toContain("kubernetes.io/gce-pd");
    const node = await eventually("node ID annotation removed", async () => {
      const n = await tryJson("node", NODE);
      return n?.metadata?.annotations?.["csi.volume.kubernetes.io/nodeid"] === undefined ? n : undefined;
    });
    expect(node.metadata.labels[`${DRIVER}/node`]).toBe("some-mock-node"); // topology labels stay, as upstream leaves them
  }, 90_000);
});
