// The static CPU manager on this host's real CPUs (2 here), a real containerd
// and runc on cgroup v1: CPU 0 reserved, a Guaranteed 1-CPU pod gets CPU 1 to
// itself (the cpuset.cpus of its container's cgroup), a BestEffort pod's
// container shrinks to CPU 0 through UpdateContainerResources, a second
// Guaranteed pod is rejected for want of CPUs with upstream's reason, the
// state file has upstream's shape, an agent restart moves nothing, and
// deleting the Guaranteed pod gives CPU 1 back to the shared pool.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { detectCgroupLayout, nodeCgroupFs } from "../../src/cgroups/index.ts";
import { createCriClient } from "../../src/cri/client.ts";
import type { CriService } from "../../src/cri/index.ts";
import { memoryLogger } from "../../src/util/log.ts";
import { agentPaths, eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let cri: CriService;
let agent: AgentHandle;
let cpusetMount = "";

beforeAll(async () => {
  requireRoot();
  if (availableParallelism() < 2) throw new Error("this test needs at least 2 CPUs");
  const layout = detectCgroupLayout("/", nodeCgroupFs);
  cpusetMount = layout.version === "v1" ? (layout.hierarchies.find((h) => h.controllers.includes("cpuset"))?.mountPoint ?? "") : (layout.unified?.mountPoint ?? "");
  ctd = await startContainerd({ name: "cpumgr" });
  cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 20_000, logger: memoryLogger().logger });
  agent = await startAgent(ctd, { extraConfig: { cpuManagerPolicy: "static", reservedSystemCPUs: "0", cpuManagerReconcilePeriod: "1s" } });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  cri?.close();
  await ctd?.stop();
}, 60_000);

const manifest = (name: string, resources?: Record<string, string>) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: {
    terminationGracePeriodSeconds: 1,
    containers: [
      {
        name: "main",
        image: ctd.busyboxImage,
        imagePullPolicy: "IfNotPresent",
        command: ["sleep", "3600"],
        ...(resources ? { resources: { limits: resources, requests: resources } } : {}),
      },
    ],
  },
});
const put = (name: string, resources?: Record<string, string>) => writeFileSync(join(agent.manifests, `${name}.json`), JSON.stringify(manifest(name, resources)));

/** The running container of a pod: its ID and the cpuset.cpus of its cgroup (from its process's /proc/<pid>/cgroup). */
async function containerOf(podName: string): Promise<{ id: string; cpus: string } | undefined> {
  const all = await cri.listContainers({ state: { state: 1 } });
  const c = all.find((x) => x.labels["io.kubernetes.pod.name"]?.startsWith(podName) && x.labels["io.kubernetes.container.name"] === "main");
  if (!c) return undefined;
  const status = await cri.containerStatus(c.id, true);
  const pid = JSON.parse(status.info["info"] ?? "{}").pid as number;
  // v1: the line of the cpuset hierarchy; v2: the one unified line, where the kernel's effective set is read.
  const lines = readFileSync(`/proc/${pid}/cgroup`, "utf8")
    .trim()
    .split("\n")
    .map((l) => l.split(":"));
  const v1 = lines.find(([, controllers]) => controllers!.split(",").includes("cpuset"));
  const file = v1
    ? join(cpusetMount, v1.slice(2).join(":"), "cpuset.cpus")
    : join(
        cpusetMount,
        lines
          .find(([h]) => h === "0")!
          .slice(2)
          .join(":"),
        "cpuset.cpus.effective",
      );
  return { id: c.id, cpus: readFileSync(file, "utf8").trim() };
}

const stateFile = () => JSON.parse(readFileSync(join(agentPaths(ctd).rootDir, "cpu_manager_state"), "utf8"));
const podStatus = async (name: string) => (await agent.pods()).items.find((p) => p.metadata.name.startsWith(name)) as any;

test(
  "exclusive CPU 1 for a Guaranteed pod, the shared pool shrinks and grows, a restart moves nothing",
  explainFailure(
    async () => {
      // A BestEffort pod first: it runs on every CPU.
      put("shared");
      const before = await eventually(
        "BestEffort container running on 0-1",
        async () => {
          const c = await containerOf("shared");
          return c?.cpus === "0-1" && c;
        },
        60_000,
      );
      expect(stateFile()).toMatchObject({ policyName: "static", defaultCpuSet: "0-1" });

      // A Guaranteed pod with 1 CPU: CPU 1 is its own, the shared container is moved to CPU 0 (reserved CPUs stay shared).
      put("exclusive", { cpu: "1", memory: "64Mi" });
      const exclusive = await eventually(
        "Guaranteed container on CPU 1",
        async () => {
          const c = await containerOf("exclusive");
          return c?.cpus === "1" && c;
        },
        60_000,
      );
      const shrunk = await eventually(
        "BestEffort container moved to CPU 0",
        async () => {
          const c = await containerOf("shared");
          return c?.cpus === "0" && c;
        },
        30_000,
      );
      expect(shrunk.id).toBe(before.id); // updated in place, not restarted
      const uid = (await podStatus("exclusive")).metadata.uid;
      const state = stateFile();
      expect(state).toEqual({ policyName: "static", defaultCpuSet: "0", entries: { [uid]: { main: "1" } }, checksum: expect.any(Number) });

      // No CPU left to give: a second Guaranteed pod is rejected at admission with upstream's reason.
      put("nocpu", { cpu: "1", memory: "64Mi" });
      const rejected = await eventually("second Guaranteed pod Failed", async () => {
        const p = await podStatus("nocpu");
        return p?.status.phase === "Failed" && p;
      });
      expect(rejected.status.reason).toBe("UnexpectedAdmissionError");
      expect(rejected.status.message).toBe("Allocate failed due to not enough cpus available to satisfy request: requested=1, available=0, which is unexpected");
      rmSync(join(agent.manifests, "nocpu.json"));

      // Restart: the state file is read back; the same containers keep the same CPUs.
      expect(await agent.kill("SIGTERM")).toBe(0);
      agent.start();
      await eventually(
        "agent serving pods again",
        async () => (await agent.pods().catch(() => undefined))?.items.some((p) => p.metadata.name.startsWith("exclusive") && p.status.phase === "Running"),
        60_000,
      );
      await Bun.sleep(3000); // three reconcile periods
      expect(await containerOf("exclusive")).toEqual(exclusive);
      expect(await containerOf("shared")).toEqual(shrunk);
      expect(stateFile()).toEqual(state);

      // The Guaranteed pod goes: CPU 1 is shared again, and the BestEffort container gets it back.
      rmSync(join(agent.manifests, "exclusive.json"));
      await eventually("BestEffort container back on 0-1", async () => (await containerOf("shared"))?.cpus === "0-1", 60_000);
      expect(stateFile()).toEqual({ policyName: "static", defaultCpuSet: "0-1", checksum: expect.any(Number) });
    },
    () => agent,
    () => ctd,
  ),
  240_000,
);
