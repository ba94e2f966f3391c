// PersistentVolumeClaims provisioned by the real local-path provisioner
// (github.com/rancher/local-path-provisioner, built from Go modules by
// scripts/controlplane/build.sh --with-local-path-provisioner on first use),
// run as a host process against a real control plane: the scheduler picks
// the node (WaitForFirstConsumer), the provisioner's helper pod makes the
// directory on it (a pod this agent runs), the PV controller binds the claim
// to a hostPath PV, and the agent mounts it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, openSync, readFileSync, statfsSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "pv-node";
const NS = "local-path-storage";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let provisioner: Subprocess | undefined;
let provisionerLog: string;
let storage: string;
let kubeletPort: number;

/** GET on the agent's 10250 as the cluster admin (its serving certificate is self-signed). */
async function kubeletGet(path: string): Promise<{ status: number; body: string }> {
  const pki = join(cp.dir, "pki");
  const res = await fetch(`https://127.0.0.1:${kubeletPort}${path}`, {
    tls: { cert: readFileSync(join(pki, "admin.crt"), "utf8"), key: readFileSync(join(pki, "admin.key"), "utf8"), rejectUnauthorized: false },
  } as RequestInit);
  return { status: res.status, body: await res.text() };
}

const { kubectl, tryJson, apply } = adminKubectl(() => cp);

function provisionerBinary(): string {
  const script = resolve(import.meta.dir, "../../scripts/controlplane/build.sh");
  const r = Bun.spawnSync(["bash", script, "--with-local-path-provisioner"], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`build.sh --with-local-path-provisioner failed:\n${r.stderr.toString()}`);
  return join(r.stdout.toString().trim().split("\n").pop()!, "local-path-provisioner");
}

const claimPod = (name: string, claim: string, script: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: {
    restartPolicy: "Never",
    terminationGracePeriodSeconds: 1,
    containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sh", "-c", script], volumeMounts: [{ name: "data", mountPath: "/data" }] }],
    volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
    ...extra,
  },
});

const phaseOf = async (name: string) => (await tryJson("pod", name))?.status?.phase as string | undefined;
const provisionerTail = () => (existsSync(provisionerLog) ? readFileSync(provisionerLog, "utf8").split("\n").slice(-20).join("\n") : "");

beforeAll(async () => {
  requireRoot();
  const binary = provisionerBinary();
  kubeletPort = await freePort();
  [ctd, cp] = await startTogether([startContainerd({ name: "pv" }), startControlPlane({ name: "pv" })]);
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, "--node-ip=127.0.0.1"],
    // /metrics and /stats/summary on 10250 for the cluster admin's client certificate (cluster CA).
    extraConfig: {
      port: kubeletPort,
      authentication: { x509: { clientCAFile: cp.caFile }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
    },
  });
  storage = join(agent.dir, "local-path");
  mkdirSync(storage, { recursive: true });
  const conf = join(agent.dir, "local-path-config");
  mkdirSync(conf, { recursive: true });
  writeFileSync(join(conf, "config.json"), JSON.stringify({ nodePathMap: [{ node: "DEFAULT_PATH_FOR_NON_LISTED_NODES", paths: [storage] }] }));
  // The upstream helper pod template, with the test's busybox image (no registry here).
  writeFileSync(
    join(conf, "helperPod.yaml"),
    JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "helper-pod" },
      spec: { containers: [{ name: "helper-pod", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent" }] },
    }),
  );
  await apply(
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "local-path-provisioner-service-account", namespace: NS } },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "local-path-config", namespace: NS },
      data: { setup: '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n', teardown: '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n' },
    },
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "local-path" },
      provisioner: "rancher.io/local-path",
      volumeBindingMode: "WaitForFirstConsumer",
      reclaimPolicy: "Delete",
    },
  );
  provisionerLog = join(agent.dir, "local-path-provisioner.log");
  const fd = openSync(provisionerLog, "a");
  provisioner = Bun.spawn(
    [
      binary,
      "--debug",
      "start",
      "--config",
      join(conf, "config.json"),
      "--helper-pod-file",
      join(conf, "helperPod.yaml"),
      "--kubeconfig",
      cp.adminKubeconfig,
      "--namespace",
      NS,
      "--helper-image",
      ctd.busyboxImage,
    ],
    { stdout: fd, stderr: fd },
  );
  process.once("exit", () => provisioner?.kill("SIGKILL"));
}, 1_800_000);

afterAll(async () => {
  provisioner?.kill("SIGTERM");
  await provisioner?.exited;
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("PersistentVolumeClaims from the local-path provisioner", () => {
  test("a provisioned claim is mounted and written, and the data is there for the next pod using it; volume stats: a local claim's file system, nothing for a hostPath one", async () => {
    await apply({
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "data", namespace: "default" },
      spec: { accessModes: ["ReadWriteOnce"], storageClassName: "local-path", resources: { requests: { storage: "16Mi" } } },
    });
    await apply(claimPod("writer", "data", "echo hello-from-writer > /data/msg"));
    await eventually("writer Succeeded", async () => (await phaseOf("writer")) === "Succeeded", 120_000).catch(async (e) => {
      throw new Error(`${(e as Error).message}\nwriter: ${JSON.stringify((await tryJson("pod", "writer"))?.status)}\nprovisioner:\n${provisionerTail()}\n${agent.describe()}`);
    });
    const pvc = await tryJson("pvc", "data");
    expect(pvc.status.phase).toBe("Bound");
    const pv = await tryJson("pv", pvc.spec.volumeName);
    expect(pv.spec.hostPath.path.startsWith(storage)).toBe(true);
    expect(readFileSync(join(pv.spec.hostPath.path, "msg"), "utf8")).toBe("hello-from-writer\n");

    await kubectl("delete", "pod", "writer", "--wait=true", "--timeout=60s");
    await apply(claimPod("reader", "data", 'test "$(cat /data/msg)" = hello-from-writer && touch /data/read-ok && sleep 3600'));
    await eventually(
      "reader read what the writer wrote",
      async () => {
        if ((await phaseOf("reader")) === "Failed") throw new Error("reader Failed: the data was not there");
        return existsSync(join(pv.spec.hostPath.path, "read-ok"));
      },
      90_000,
    );

    // Volume stats as upstream: a hostPath PV (the provisioner's default type) has no metrics (the hostPath plugin's
    // MetricsNil); a local PV (volumeType: local on the claim) reports the file system it is on (MetricsStatFS), by claim.
    await apply({
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "fast", namespace: "default", annotations: { volumeType: "local" } },
      spec: { accessModes: ["ReadWriteOnce"], storageClassName: "local-path", resources: { requests: { storage: "16Mi" } } },
    });
    await apply(claimPod("local-user", "fast", "sleep 3600"));
    let last = "";
    const capacity = await eventually(
      "kubelet_volume_stats_capacity_bytes for the local claim",
      async () => {
        const r = await kubeletGet("/metrics");
        last = `${r.status} ${
          r.body
            .split("\n")
            .filter((l) => l.includes("volume_stats"))
            .join("\n") || r.body.slice(0, 300)
        }`;
        return r.status === 200 ? /^kubelet_volume_stats_capacity_bytes\{namespace="default",persistentvolumeclaim="fast"\} (\S+)$/m.exec(r.body)?.[1] : undefined;
      },
      120_000,
      2000,
    ).catch(async (e) => {
      throw new Error(`${(e as Error).message}\nlast /metrics answer: ${last}\nlocal-user: ${JSON.stringify((await tryJson("pod", "local-user"))?.status)}\n${agent.describe()}`);
    });
    const fast = await tryJson("pv", (await tryJson("pvc", "fast")).spec.volumeName);
    expect(fast.spec.local.path.startsWith(storage)).toBe(true);
    const fs = statfsSync(fast.spec.local.path);
    expect(Number(capacity)).toBe(Number(fs.blocks) * Number(fs.bsize));
    const metrics = (await kubeletGet("/metrics")).body;
    expect(Number(/^kubelet_volume_stats_used_bytes\{namespace="default",persistentvolumeclaim="fast"\} (\S+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);
    expect(Number(/^kubelet_volume_stats_inodes\{namespace="default",persistentvolumeclaim="fast"\} (\S+)$/m.exec(metrics)?.[1])).toBe(Number(fs.files));
    expect(metrics).not.toContain('persistentvolumeclaim="data"');
    const summary = JSON.parse((await kubeletGet("/stats/summary")).body);
    const volumesOf = (name: string) => summary.pods.find((p: any) => p.podRef.name === name)?.volume ?? [];
    expect(volumesOf("local-user").find((v: any) => v.name === "data")).toMatchObject({ pvcRef: { name: "fast", namespace: "default" }, capacityBytes: Number(capacity) });
    expect(volumesOf("reader").find((v: any) => v.name === "data")).toBeUndefined();
  }, 360_000);

  test("a pod whose claim does not exist waits with a FailedMount event naming it, and starts nothing", async () => {
    await apply(claimPod("orphan", "nope", "true", { nodeName: NODE }));
    const events = await eventually(
      "FailedMount for the missing claim",
      async () => {
        const out = await kubectl("get", "events", "--field-selector", "involvedObject.name=orphan", "-o", "custom-columns=REASON:.reason,MESSAGE:.message", "--no-headers");
        return out.includes("FailedMount") ? out : undefined;
      },
      60_000,
    );
    expect(events).toContain(
      'MountVolume.SetUp failed for volume "data" : error processing PVC default/nope: failed to fetch PVC from API server: persistentvolumeclaims "nope" not found',
    );
    const pod = await tryJson("pod", "orphan");
    expect(pod.status.phase).toBe("Pending");
    expect(pod.status.containerStatuses?.[0]?.state?.running).toBeUndefined();
  }, 90_000);
});
