// Pod-level resources (spec.resources, PodLevelResources: on by default in
// 1.34) against a real control plane, a real containerd and the agent as a
// real process. The API server defaults and validates the pod and computes
// its QoS class; the agent must reach the same class (the status it reports
// carries it) and give the pod cgroup the pod's limits, and each container
// without limits of its own the pod's, as upstream. Checked in the kernel's
// own files on this cgroup v1 (hybrid) host: cpu.cfs_quota_us, cpu.shares,
// memory.limit_in_bytes, and the container process's oom_score_adj
// (a negative one is raised to containerd's own 0 on this host).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { detectCgroupLayout, nodeCgroupFs } from "../../src/cgroups/index.ts";
import { eventually, explainFailure, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "pod-level-node";
const MI = 2 ** 20;
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
const mounts = new Map<string, string>();

const { tryJson: getJson, apply } = adminKubectl(() => cp);
const readCg = (controller: string, path: string, file: string) => readFileSync(join(mounts.get(controller)!, path, file), "utf8").trim();

beforeAll(async () => {
  requireRoot();
  const layout = detectCgroupLayout("/", nodeCgroupFs);
  if (layout.version !== "v1") throw new Error("this test reads cgroup v1 files (the hybrid host the notes describe)");
  for (const h of layout.hierarchies) for (const c of h.controllers) mounts.set(c, h.mountPoint);
  [ctd, cp] = await startTogether([startContainerd({ name: "pod-level" }), startControlPlane({ name: "pod-level" })]);
  agent = await startAgent(ctd, { nodeName: NODE, extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, "--node-ip=127.0.0.1"], extraConfig: { port: await freePort() } });
  await eventually("node registered", async () => (await getJson("node", NODE)) !== undefined, 60_000);
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

const container = (name: string, resources?: unknown) => ({
  name,
  image: ctd.busyboxImage,
  imagePullPolicy: "IfNotPresent",
  command: ["sleep", "3600"],
  ...(resources ? { resources } : {}),
});
const podOf = (name: string, resources: unknown, containers: unknown[]) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: { terminationGracePeriodSeconds: 1, resources, containers },
});

/** The pod once Running, with its cgroup (kubepods[/burstable]/pod<uid>) and each container's (<pod cgroup>/<container ID>). */
async function runningPod(name: string) {
  const pod = await eventually(
    `${name} Running`,
    async () => {
      const p = await getJson("pod", name);
      return p?.status?.phase === "Running" ? p : undefined;
    },
    90_000,
  );
  const qos = pod.status.qosClass as string;
  const podCgroup = join(ctd.cgroupParent, "kubepods", ...(qos === "Guaranteed" ? [] : [qos.toLowerCase()]), `pod${pod.metadata.uid}`);
  const values = (path: string) => ({
    quota: Number(readCg("cpu", path, "cpu.cfs_quota_us")),
    shares: Number(readCg("cpu", path, "cpu.shares")),
    memory: Number(readCg("memory", path, "memory.limit_in_bytes")),
  });
  const containers = Object.fromEntries(
    (pod.status.containerStatuses as { name: string; containerID: string }[]).map((c) => {
      const path = join(podCgroup, c.containerID.replace("containerd://", ""));
      const pid = readCg("memory", path, "cgroup.procs").split("\n")[0]!;
      return [c.name, { ...values(path), oomScoreAdj: Number(readFileSync(`/proc/${pid}/oom_score_adj`, "utf8").trim()) }];
    }),
  );
  return { pod, qos, podCgroup: values(podCgroup), containers };
}

describe("pod-level resources on a real node", () => {
  test(
    "pod limits {cpu: 500m, memory: 64Mi} over containers without limits: Burstable, the pod cgroup and both containers bounded by the pod's limits",
    explainFailure(
      async () => {
        await apply(podOf("pod-limits", { limits: { cpu: "500m", memory: "64Mi" } }, [container("app", { requests: { cpu: "100m", memory: "32Mi" } }), container("idle")]));
        const { pod, qos, podCgroup, containers } = await runningPod("pod-limits");
        // The API server defaulted the pod's requests to the containers' (100m, 32Mi): requests below limits.
        expect(pod.spec.resources.requests).toEqual({ cpu: "100m", memory: "32Mi" });
        expect(qos).toBe("Burstable");
        expect(podCgroup).toEqual({ quota: 50_000, shares: 102, memory: 64 * MI });
        // Each container's own cgroup: no limit of its own, so the pod's; shares from its request, or (none) from that cpu limit.
        expect(containers["app"]).toMatchObject({ quota: 50_000, shares: 102, memory: 64 * MI });
        expect(containers["idle"]).toMatchObject({ quota: 50_000, shares: 512, memory: 64 * MI });
        for (const c of Object.values(containers)) expect(c.oomScoreAdj).toBeGreaterThan(2);
      },
      () => agent,
      () => ctd,
    ),
    150_000,
  );

  test(
    "Guaranteed by pod-level resources alone (containers ask for nothing): the pod cgroup directly under kubepods, Guaranteed's oom_score_adj",
    explainFailure(
      async () => {
        await apply(podOf("pod-guaranteed", { limits: { cpu: "500m", memory: "64Mi" } }, [container("app")]));
        const { pod, qos, podCgroup, containers } = await runningPod("pod-guaranteed");
        expect(pod.spec.resources.requests).toEqual({ cpu: "500m", memory: "64Mi" });
        expect(qos).toBe("Guaranteed");
        expect(podCgroup).toEqual({ quota: 50_000, shares: 512, memory: 64 * MI });
        // The agent asks for -997; containerd's restrict_oom_score_adj (required here, where processes lack
        // CAP_SYS_RESOURCE: NOTES) raises a negative value to its own, 0. BestEffort, the class without
        // pod-level resources, would be 1000, and Burstable above 0 (the test above).
        expect(containers["app"]).toEqual({ quota: 50_000, shares: 512, memory: 64 * MI, oomScoreAdj: 0 });
      },
      () => agent,
      () => ctd,
    ),
    150_000,
  );

  test(
    "admission fits the pod's own requests: a pod asking more CPU than the node has at pod level fails OutOfcpu, though its containers ask for little",
    explainFailure(
      async () => {
        const node = await getJson("node", NODE);
        const allocatable = String(node.status.allocatable.cpu);
        const cpus = Math.ceil(allocatable.endsWith("m") ? Number(allocatable.slice(0, -1)) / 1000 : Number(allocatable));
        // Bound to the node directly (the scheduler would not place it): the agent's admission decides.
        const big = podOf("pod-too-big", { requests: { cpu: String(cpus + 1) } }, [container("app", { requests: { cpu: "10m" } })]) as {
          spec: Record<string, unknown>;
        };
        big.spec.nodeName = NODE;
        await apply(big);
        const failed = await eventually(
          "pod-too-big Failed",
          async () => {
            const p = await getJson("pod", "pod-too-big");
            return p?.status?.phase === "Failed" ? p : undefined;
          },
          60_000,
        );
        expect(failed.status.reason).toBe("OutOfcpu");
        expect(failed.status.message).toContain(`Node didn't have enough resource: cpu, requested: ${(cpus + 1) * 1000}`);
      },
      () => agent,
      () => ctd,
    ),
    90_000,
  );
});
