// The static CPU manager on this host's real CPUs (2 here), a real containerd
// and runc on cgroup v1: CPU 0 reserved, a Guaranteed 1-CPU pod gets CPU 1 to
// itself (the cpuset.cpus of its container's cgroup), a BestEffort pod's
// container shrinks to CPU 0 through UpdateContainerResources, a second
// Guaranteed pod is rejected for want of CPUs with upstream's reason, the
// state file has upstream's shape, an agent restart moves nothing, and
// deleting the Guaranteed pod gives CPU 1 back to the shared pool.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import type { CriService } from "../../src/cri/index.ts";
import { memoryLogger } from "../../src/util/log.ts";
import { agentPaths, eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { putSleepingPod, runningMain } from "../harness/cpuset.ts";

let ctd: ContainerdHandle;
let cri: CriService;
let agent: AgentHandle;

beforeAll(async () => {
  requireRoot();
  if (availableParallelism() < 2) throw new Error("this test needs at least 2 CPUs");
  ctd = await startContainerd({ name: "cpumgr" });
  cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 20_000, logger: memoryLogger().logger });
  agent = await startAgent(ctd, { extraConfig: { cpuManagerPolicy: "static", reservedSystemCPUs: "0", cpuManagerReconcilePeriod: "1s" } });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  cri?.close();
  await ctd?.stop();
}, 60_000);

const put = (name: string, resources?: Record<string, string>) => putSleepingPod({ manifests: agent.manifests, image: ctd.busyboxImage }, name, resources);

/** The running container of a pod: its ID and the cpuset.cpus of its cgroup. */
async function containerOf(podName: string): Promise<{ id: string; cpus: string } | undefined> {
  const c = await runningMain(cri, podName, "cpus");
  return c && { id: c.id, cpus: c.cpuset };
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
