// Disk pressure for real: the agent's root dir and pod logs on a small
// tmpfs, a pod that fills it with logs, and the eviction manager evicting
// exactly that pod (Failed, reason Evicted) while the node reports
// DiskPressure. Cluster mode, because static pods are critical and never
// evicted, as upstream.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "evict-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;

const getJson = async (...args: string[]): Promise<any> => {
  const r = await cp.kubectl(["get", ...args, "-o", "json"]);
  return r.code === 0 ? JSON.parse(r.stdout) : undefined;
};

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "evict" }), startControlPlane({ name: "evict" })]);
  const small = join(ctd.dir, "small-nodefs"); // under the harness dir: its purge unmounts it
  mkdirSync(small, { recursive: true });
  const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", small]);
  if (mount.exitCode !== 0) throw new Error(`mount tmpfs: ${mount.stderr}`);
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, `--root-dir=${join(small, "root")}`],
    extraConfig: {
      podLogsDir: join(small, "logs"),
      evictionHard: { "nodefs.available": "60%", "memory.available": "100Mi", "imagefs.available": "5%" },
      evictionPressureTransitionPeriod: "30s",
      containerLogMaxSize: "500Mi",
    },
  });
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

test("filling nodefs brings DiskPressure and evicts the pod using the disk, not the quiet one", async () => {
  await eventually("node Ready", async () => (await getJson("node", NODE))?.status.conditions.find((c: any) => c.type === "Ready")?.status === "True");
  const pod = (name: string, script: string) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default" },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "c", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sh", "-c", script] }] },
  });
  const line = "x".repeat(1000);
  for (const p of [pod("quiet", "sleep 3600"), pod("hog", `while true; do echo ${line}; done`)]) {
    const file = join(cp.dir, `${p.metadata.name}.json`);
    writeFileSync(file, JSON.stringify(p));
    expect((await cp.kubectl(["apply", "-f", file])).code).toBe(0);
  }
  const evicted = await eventually(
    "hog evicted",
    async () => {
      const p = await getJson("pod", "hog");
      return p?.status?.phase === "Failed" ? p : undefined;
    },
    120_000,
    1000,
  );
  expect(evicted.status.reason).toBe("Evicted");
  expect(evicted.status.message).toStartWith("The node was low on resource: ephemeral-storage.");
  const pressure = await eventually(
    "DiskPressure reported",
    async () => {
      const node = await getJson("node", NODE);
      return node?.status.conditions.find((c: any) => c.type === "DiskPressure" && c.status === "True");
    },
    30_000,
    1000,
  );
  expect(pressure.reason).toBe("KubeletHasDiskPressure");
  // As upstream, the node lifecycle controller turns the condition into the taint.
  await eventually(
    "disk-pressure taint",
    async () => (await getJson("node", NODE))?.spec.taints?.some((t: any) => t.key === "node.kubernetes.io/disk-pressure" && t.effect === "NoSchedule"),
    30_000,
    1000,
  );
  expect((await getJson("pod", "quiet")).status.phase).toBe("Running");
  const events = await getJson("events", "--field-selector", "involvedObject.name=hog");
  expect(events.items.map((e: any) => e.reason)).toContain("Evicted");
}, 200_000);
