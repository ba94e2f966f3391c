// kubectl debug (ephemeral containers) and in-place pod resize against a
// real control plane (1.34: InPlacePodVerticalScaling on by default), a real
// containerd and the agent as a real process, driven with the real kubectl.
// Resize results are checked in the kernel's own files: the pod cgroup and
// the container cgroup (cgroup v1 hybrid host: cpu.cfs_quota_us,
// memory.limit_in_bytes).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";
import { detectCgroupLayout, nodeCgroupFs } from "../../src/cgroups/index.ts";

const NODE = "debug-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;

const { kubectl, tryJson: getJson, apply: applyObjects } = adminKubectl(() => cp);
const apply = (_name: string, obj: unknown) => applyObjects(obj);
const running = (name: string) => eventually(`${name} Running`, async () => (await getJson("pod", name))?.status?.phase === "Running", 60_000);

const kubectlArgv = (...args: string[]) => [join(cp.binDir, "kubectl"), "--kubeconfig", cp.adminKubeconfig, ...args];

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "debug-resize" }), startControlPlane({ name: "debug-resize" })]);
  const kubeconfig = await cp.nodeKubeconfig(NODE);
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${kubeconfig}`, "--node-ip=127.0.0.1"],
    extraConfig: {
      port: await freePort(),
      // The API server reaches 10250 with its kubelet client certificate for attach and logs.
      authentication: { x509: { clientCAFile: join(cp.dir, "pki", "ca.crt") }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
    },
  });
  await eventually("node registered", async () => (await getJson("node", NODE)) !== undefined, 60_000);
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("kubectl debug: ephemeral containers", () => {
  const target = () => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "target", namespace: "default" },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "app", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }] },
  });

  beforeAll(async () => {
    await apply("target", target());
    await running("target");
  }, 90_000);

  test("kubectl debug --target adds a container that sees the target's processes; its status is reported; the app is not restarted", async () => {
    await kubectl("debug", "target", `--image=${ctd.busyboxImage}`, "--image-pull-policy=IfNotPresent", "--target=app", "-c", "debugger", "--", "ps");
    const status = await eventually(
      "debugger terminated",
      async () => {
        const p = await getJson("pod", "target");
        const s = p?.status?.ephemeralContainerStatuses?.find((c: { name: string }) => c.name === "debugger");
        return s?.state?.terminated ? p : undefined;
      },
      60_000,
    );
    const debuggerStatus = status.status.ephemeralContainerStatuses.find((c: { name: string }) => c.name === "debugger");
    expect(debuggerStatus.state.terminated.exitCode).toBe(0);
    expect(debuggerStatus.containerID).toStartWith("containerd://");
    expect(await kubectl("logs", "target", "-c", "debugger")).toContain("sleep 3600");
    // Never restarted: still the same terminated container a few syncs later.
    await Bun.sleep(3000);
    const later = (await getJson("pod", "target"))!.status;
    expect(later.ephemeralContainerStatuses.find((c: { name: string }) => c.name === "debugger").containerID).toBe(debuggerStatus.containerID);
    expect(later.containerStatuses[0].restartCount).toBe(0);
    expect(later.containerStatuses[0].state.running).toBeDefined();
    expect(later.phase).toBe("Running");
  }, 90_000);

  test("kubectl debug -i attaches to the ephemeral container's stdin and stdout", async () => {
    // Typed after the prompt would appear, as a person does: input sent before kubectl attached is not delivered.
    const proc = Bun.spawn(kubectlArgv("debug", "-i", "target", `--image=${ctd.busyboxImage}`, "--image-pull-policy=IfNotPresent", "--target=app", "-c", "shell", "--", "sh"), {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr] = [new Response(proc.stdout).text(), new Response(proc.stderr).text()];
    await eventually(
      "shell running",
      async () => {
        const s = (await getJson("pod", "target"))?.status?.ephemeralContainerStatuses?.find((c: { name: string }) => c.name === "shell");
        return s?.state?.running !== undefined;
      },
      60_000,
    );
    await Bun.sleep(2000);
    proc.stdin.write("ps; echo debug-$((40+2))\n");
    proc.stdin.flush();
    await Bun.sleep(1500);
    proc.stdin.write("exit\n");
    proc.stdin.end();
    const r = { code: await proc.exited, stdout: await stdout, stderr: await stderr };
    expect(r.stdout).toContain("debug-42");
    expect(r.stdout).toContain("sleep 3600");
    expect(r.code).toBe(0);
    const p = (await getJson("pod", "target"))!;
    expect(p.status.ephemeralContainerStatuses.map((c: { name: string }) => c.name).sort()).toEqual(["debugger", "shell"]);
    expect(p.status.containerStatuses[0].restartCount).toBe(0);
  }, 90_000);

  test("ephemeral containers are removed with the pod", async () => {
    await kubectl("delete", "pod", "target", "--wait=true", "--timeout=60s");
    const { containers } = await listCriContainers();
    expect(containers.filter((c) => c.labels["io.kubernetes.pod.name"] === "target")).toEqual([]);
  }, 90_000);
});

/** The runtime's own view (crictl would do the same). */
async function listCriContainers(): Promise<{ containers: { labels: Record<string, string> }[] }> {
  const { createCriClient } = await import("../../src/cri/client.ts");
  const { memoryLogger } = await import("../../src/util/log.ts");
  const cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 10_000, logger: memoryLogger().logger });
  try {
    return { containers: await cri.listContainers() };
  } finally {
    cri.close();
  }
}

/** v1 hierarchy mount points on this host, by controller. */
function cgroupMounts(): Map<string, string> {
  const layout = detectCgroupLayout("/", nodeCgroupFs);
  if (layout.version !== "v1") throw new Error("this test reads cgroup v1 files (the hybrid host the notes describe)");
  const mounts = new Map<string, string>();
  for (const h of layout.hierarchies) for (const c of h.controllers) mounts.set(c, h.mountPoint);
  return mounts;
}

describe("in-place pod resize (kubectl patch --subresource resize)", () => {
  const MI = 2 ** 20;
  let mounts: Map<string, string>;
  const podCgroup = (uid: string, qos: "burstable" | "guaranteed") => join(ctd.cgroupParent, "kubepods", ...(qos === "burstable" ? ["burstable"] : []), `pod${uid}`);
  const readCg = (controller: string, path: string, file: string) => readFileSync(join(mounts.get(controller)!, path, file), "utf8").trim();
  /** The pod's cgroup and the cgroup of its container `name` (containerd's cgroupfs layout: <pod cgroup>/<container ID>). */
  async function cgroupsOf(podName: string, name: string, qos: "burstable" | "guaranteed" = "burstable") {
    const p = (await getJson("pod", podName))!;
    const id = (p.status.containerStatuses.find((c: { name: string }) => c.name === name).containerID as string).replace("containerd://", "");
    const pod = podCgroup(p.metadata.uid, qos);
    return {
      pod: {
        quota: Number(readCg("cpu", pod, "cpu.cfs_quota_us")),
        memory: Number(readCg("memory", pod, "memory.limit_in_bytes")),
        shares: Number(readCg("cpu", pod, "cpu.shares")),
      },
      container: {
        quota: Number(readCg("cpu", join(pod, id), "cpu.cfs_quota_us")),
        memory: Number(readCg("memory", join(pod, id), "memory.limit_in_bytes")),
        shares: Number(readCg("cpu", join(pod, id), "cpu.shares")),
      },
      containerID: id,
    };
  }
  const resize = (podName: string, containers: unknown[]) =>
    kubectl("patch", "pod", podName, "--subresource", "resize", "--type", "strategic", "--patch", JSON.stringify({ spec: { containers } }));
  const conditionsOf = async (podName: string) => (await getJson("pod", podName))!.status.conditions as { type: string; status: string; reason?: string; message?: string }[];
  const app = (name: string, resources: unknown, extra: Record<string, unknown> = {}) => ({
    name,
    image: ctd.busyboxImage,
    imagePullPolicy: "IfNotPresent",
    command: ["sleep", "3600"],
    resources,
    ...extra,
  });

  beforeAll(async () => {
    mounts = cgroupMounts();
    await Promise.all([
      apply("resizable", {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "resizable", namespace: "default" },
        spec: { terminationGracePeriodSeconds: 1, containers: [app("app", { requests: { cpu: "100m", memory: "32Mi" }, limits: { cpu: "200m", memory: "64Mi" } })] },
      }),
      apply("restarter", {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "restarter", namespace: "default" },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [
            app(
              "strict",
              { requests: { cpu: "50m", memory: "32Mi" }, limits: { cpu: "100m", memory: "64Mi" } },
              { resizePolicy: [{ resourceName: "memory", restartPolicy: "RestartContainer" }] },
            ),
            app("easy", { requests: { cpu: "50m", memory: "32Mi" }, limits: { cpu: "100m", memory: "64Mi" } }),
          ],
        },
      }),
    ]);
    await Promise.all([running("resizable"), running("restarter")]);
  }, 90_000);

  test("raising the CPU limit and the memory limit of a running container changes the pod and container cgroups without a restart", async () => {
    const before = await cgroupsOf("resizable", "app");
    expect(before.pod).toMatchObject({ quota: 20_000, memory: 64 * MI });
    expect(before.container).toMatchObject({ quota: 20_000, memory: 64 * MI });
    await resize("resizable", [{ name: "app", resources: { requests: { cpu: "150m", memory: "32Mi" }, limits: { cpu: "300m", memory: "96Mi" } } }]);
    const after = await eventually(
      "cgroups resized",
      async () => {
        const c = await cgroupsOf("resizable", "app");
        return c.container.quota === 30_000 && c.container.memory === 96 * MI ? c : undefined;
      },
      60_000,
    );
    expect(after.pod).toMatchObject({ quota: 30_000, memory: 96 * MI, shares: 153 });
    expect(after.container.shares).toBe(153);
    expect(after.containerID).toBe(before.containerID);
    const status = await eventually(
      "resize reported",
      async () => {
        const p = (await getJson("pod", "resizable"))!;
        const cs = p.status.containerStatuses[0];
        const settled = cs.resources?.limits?.cpu === "300m" && !p.status.conditions.some((c: { type: string }) => c.type.startsWith("PodResize"));
        // observedGeneration: the status reflects the resized spec (a resize bumps metadata.generation).
        return settled && p.status.observedGeneration === p.metadata.generation ? p.status : undefined;
      },
      30_000,
    );
    expect(status.containerStatuses[0].restartCount).toBe(0);
    expect(status.containerStatuses[0].resources).toEqual({ requests: { cpu: "150m", memory: "32Mi" }, limits: { cpu: "300m", memory: "96Mi" } });
    // allocatedResources as the agent reports it (the API server keeps it only with its alpha gate on).
    const local = (await agent.pods()).items.find((p) => p.metadata.name === "resizable") as unknown as { status: { containerStatuses: { allocatedResources: unknown }[] } };
    expect(local.status.containerStatuses[0]!.allocatedResources).toEqual({ cpu: "150m", memory: "32Mi" });
  }, 120_000);

  test("lowering the limits again shrinks the pod and container cgroups, still without a restart", async () => {
    await resize("resizable", [{ name: "app", resources: { requests: { cpu: "100m", memory: "32Mi" }, limits: { cpu: "200m", memory: "48Mi" } } }]);
    const after = await eventually(
      "cgroups shrunk",
      async () => {
        const c = await cgroupsOf("resizable", "app");
        return c.pod.memory === 48 * MI && c.pod.quota === 20_000 ? c : undefined;
      },
      60_000,
    );
    expect(after.container).toMatchObject({ quota: 20_000, memory: 48 * MI });
    expect((await getJson("pod", "resizable"))!.status.containerStatuses[0].restartCount).toBe(0);
  }, 120_000);

  test("a resize with resizePolicy RestartContainer restarts exactly that container", async () => {
    const before = await cgroupsOf("restarter", "strict");
    await resize("restarter", [
      { name: "strict", resources: { requests: { cpu: "50m", memory: "32Mi" }, limits: { cpu: "100m", memory: "80Mi" } } },
      { name: "easy", resources: { requests: { cpu: "50m", memory: "32Mi" }, limits: { cpu: "150m", memory: "64Mi" } } },
    ]);
    const p = await eventually(
      "strict restarted",
      async () => {
        const p = (await getJson("pod", "restarter"))!;
        const strict = p.status.containerStatuses.find((c: { name: string }) => c.name === "strict");
        return strict.restartCount === 1 && strict.state.running ? p : undefined;
      },
      60_000,
    );
    const easy = p.status.containerStatuses.find((c: { name: string }) => c.name === "easy");
    expect(easy.restartCount).toBe(0);
    const strict = await cgroupsOf("restarter", "strict");
    expect(strict.containerID).not.toBe(before.containerID);
    expect(strict.container.memory).toBe(80 * MI);
    await eventually("easy resized in place", async () => (await cgroupsOf("restarter", "easy")).container.quota === 15_000, 30_000);
    expect((await getJson("pod", "restarter"))!.status.containerStatuses.find((c: { name: string }) => c.name === "easy").restartCount).toBe(0);
  }, 120_000);

  test("a resize larger than the node is Infeasible and changes nothing", async () => {
    const before = await cgroupsOf("resizable", "app");
    await resize("resizable", [{ name: "app", resources: { requests: { cpu: "500", memory: "32Mi" }, limits: { cpu: "500", memory: "48Mi" } } }]);
    const pending = await eventually("PodResizePending Infeasible", async () => (await conditionsOf("resizable")).find((c) => c.type === "PodResizePending"), 60_000);
    expect(pending).toMatchObject({ status: "True", reason: "Infeasible" });
    expect(pending.message).toStartWith("Node didn't have enough capacity: cpu, requested: 500000, capacity: ");
    await Bun.sleep(2000);
    const after = await cgroupsOf("resizable", "app");
    expect(after).toEqual(before);
    const status = (await getJson("pod", "resizable"))!.status;
    expect(status.containerStatuses[0].resources.limits).toEqual({ cpu: "200m", memory: "48Mi" });
    expect(status.containerStatuses[0].restartCount).toBe(0);
  }, 120_000);

  test("a sidecar (restartable init container) is resized in place too", async () => {
    await apply("with-sidecar", {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "with-sidecar", namespace: "default" },
      spec: {
        terminationGracePeriodSeconds: 0,
        initContainers: [app("proxy", { requests: { cpu: "50m", memory: "16Mi" }, limits: { cpu: "100m", memory: "32Mi" } }, { restartPolicy: "Always" })],
        containers: [app("app", { requests: { cpu: "50m", memory: "16Mi" }, limits: { cpu: "100m", memory: "32Mi" } })],
      },
    });
    await running("with-sidecar");
    const sidecarCgroup = async () => {
      const p = (await getJson("pod", "with-sidecar"))!;
      const s = p.status.initContainerStatuses[0];
      const id = (s.containerID as string).replace("containerd://", "");
      return { id, restartCount: s.restartCount as number, quota: Number(readCg("cpu", join(podCgroup(p.metadata.uid, "burstable"), id), "cpu.cfs_quota_us")) };
    };
    const before = await sidecarCgroup();
    expect(before.quota).toBe(10_000);
    const patch = { spec: { initContainers: [{ name: "proxy", resources: { requests: { cpu: "50m", memory: "16Mi" }, limits: { cpu: "250m", memory: "32Mi" } } }] } };
    await kubectl("patch", "pod", "with-sidecar", "--subresource", "resize", "--type", "strategic", "--patch", JSON.stringify(patch));
    const after = await eventually(
      "sidecar resized",
      async () => {
        const c = await sidecarCgroup();
        return c.quota === 25_000 ? c : undefined;
      },
      60_000,
    );
    expect(after.id).toBe(before.id);
    expect(after.restartCount).toBe(0);
    expect(Number(readCg("cpu", podCgroup((await getJson("pod", "with-sidecar"))!.metadata.uid, "burstable"), "cpu.cfs_quota_us"))).toBe(35_000);
    await kubectl("delete", "pod", "with-sidecar", "--wait=false");
  }, 120_000);

  test("a resize that needs room other pods hold is Deferred, and applied once one of them is deleted", async () => {
    // nodeName set: only the agent's own admission decides (the scheduler would weigh the pending resize above).
    const bound = (name: string, resources: unknown) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: "default" },
      spec: { nodeName: NODE, terminationGracePeriodSeconds: 0, containers: [app("app", resources)] },
    });
    await apply("hog", bound("hog", { requests: { cpu: "1500m", memory: "16Mi" } }));
    await apply("grower", bound("grower", { requests: { cpu: "100m", memory: "16Mi" }, limits: { cpu: "200m", memory: "64Mi" } }));
    await Promise.all([running("hog"), running("grower")]);
    await resize("grower", [{ name: "app", resources: { requests: { cpu: "600m", memory: "16Mi" }, limits: { cpu: "800m", memory: "64Mi" } } }]);
    const pending = await eventually("PodResizePending Deferred", async () => (await conditionsOf("grower")).find((c) => c.type === "PodResizePending"), 60_000);
    expect(pending).toMatchObject({ status: "True", reason: "Deferred" });
    expect(pending.message).toMatch(/^Node didn't have enough resource: cpu, requested: 600, used: \d+, capacity: \d+$/);
    expect((await cgroupsOf("grower", "app")).container.quota).toBe(20_000);
    await kubectl("delete", "pod", "hog", "--wait=false");
    await eventually("grower resized", async () => (await cgroupsOf("grower", "app")).container.quota === 80_000, 60_000);
    await eventually("PodResizePending cleared", async () => !(await conditionsOf("grower")).some((c) => c.type.startsWith("PodResize")), 30_000);
    expect((await cgroupsOf("grower", "app")).pod.quota).toBe(80_000);
    expect((await getJson("pod", "grower"))!.status.containerStatuses[0].restartCount).toBe(0);
    await kubectl("delete", "pod", "grower", "--wait=false");
  }, 150_000);

  test("allocations are checkpointed: after kill -9 and a restart the agent keeps the pending resize pending and applies nothing", async () => {
    const before = await cgroupsOf("resizable", "app");
    const uid = (await getJson("pod", "resizable"))!.metadata.uid;
    expect(existsSync(join(agent.dir, "root", "checkpoints", "allocated-resources", `${uid}.json`))).toBe(true);
    const decisions = () => agent.log().split("pod resize not accepted").length - 1;
    const seen = decisions();
    await agent.kill("SIGKILL");
    agent.start();
    await eventually("the restarted agent looked at the pod", () => decisions() > seen, 60_000);
    expect(agent.log().split("starting node agent")[2]).not.toContain("pod rejected by node admission");
    await Bun.sleep(2000);
    expect(await cgroupsOf("resizable", "app")).toEqual(before);
    const status = (await getJson("pod", "resizable"))!.status;
    expect(status.containerStatuses[0].restartCount).toBe(0);
    expect(status.conditions.find((c: { type: string }) => c.type === "PodResizePending")).toMatchObject({ status: "True", reason: "Infeasible" });
  }, 120_000);
});
