// The Static memory manager on this host's real NUMA topology (one node here,
// /sys/devices/system/node), a real containerd and runc: a reservedMemory
// that does not add up to kubeReserved + evictionHard stops the agent with
// exit 2 naming the field; with a matching one, a Guaranteed pod's memory is
// pinned to node 0 (cpuset.mems through the CRI, in the OCI spec runc got and
// in the container's cgroup), the state file has upstream's shape, a pod
// asking more than the node has is refused at admission with upstream's
// reason and message, an agent restart keeps the assignment, and a deleted
// pod's memory is given back at the next admission. The pod resources API
// reports the pinned memory and each node's allocatable memory.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import type { CriService } from "../../src/cri/index.ts";
import { PodResourcesListerClient } from "../../src/devices/gen/podresources/api.client.ts";
import { dialUnix } from "../../src/util/grpc.ts";
import { memoryLogger } from "../../src/util/log.ts";
import { agentPaths, eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { putSleepingPod, runningMain } from "../harness/cpuset.ts";

let ctd: ContainerdHandle;
let cri: CriService;
let agent: AgentHandle | undefined;
let bad: AgentHandle | undefined;
const Mi = 2 ** 20;

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "memmgr" });
  cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 20_000, logger: memoryLogger().logger });
}, 120_000);

afterAll(async () => {
  await bad?.kill("SIGKILL");
  await agent?.kill("SIGKILL");
  cri?.close();
  await ctd?.stop();
}, 60_000);

const put = (name: string, resources?: Record<string, string>) => putSleepingPod({ manifests: agent!.manifests, image: ctd.busyboxImage }, name, resources);

/** The running container of a pod: its ID, the cpuset.mems runc was given (OCI spec) and its cgroup's cpuset.mems. */
async function containerOf(podName: string): Promise<{ id: string; specMems: string | undefined; cgroupMems: string } | undefined> {
  const c = await runningMain(cri, podName, "mems");
  return c && { id: c.id, specMems: c.info.runtimeSpec?.linux?.resources?.cpu?.mems, cgroupMems: c.cpuset };
}

const stateFile = () => JSON.parse(readFileSync(join(agentPaths(ctd).rootDir, "memory_manager_state"), "utf8"));
const podStatus = async (name: string) => (await agent!.pods()).items.find((p) => p.metadata.name.startsWith(name)) as any;
const config = (reserved: string) => ({
  memoryManagerPolicy: "Static",
  reservedMemory: [{ numaNode: 0, limits: { memory: reserved } }],
  kubeReserved: { memory: "256Mi" },
  evictionHard: { "memory.available": "100Mi" },
  topologyManagerPolicy: "restricted",
  topologyManagerScope: "pod",
});

test(
  "reservedMemory that does not match Node Allocatable: exit 2 naming the field",
  explainFailure(
    async () => {
      bad = await startAgent(ctd, { name: "bad", extraConfig: config("256Mi") });
      expect(await bad.exited()).toBe(2);
      expect(bad.log()).toContain(
        'reservedMemory (--reserved-memory): the total amount "256Mi" of type "memory" is not equal to the value "356Mi" determined by Node Allocatable feature',
      );
    },
    () => bad,
  ),
  60_000,
);

test(
  "a Guaranteed pod's memory pinned to NUMA node 0, upstream's state file, admission refusal, a restart keeps it",
  explainFailure(
    async () => {
      agent = await startAgent(ctd, { extraConfig: config("356Mi") });
      put("shared");
      put("pinned", { cpu: "100m", memory: "64Mi" });
      const pinned = await eventually("Guaranteed container running", () => containerOf("pinned"), 60_000);
      const shared = await eventually("BestEffort container running", () => containerOf("shared"), 30_000);
      // The CRI carried cpuset_mems for the Guaranteed container only; the kernel applied it to its cgroup.
      expect(pinned.specMems).toBe("0");
      expect(pinned.cgroupMems).toBe("0");
      expect(shared.specMems ?? "").toBe("");

      // /pods lists a pod once its first sync step began (its status is set before the runtime step), which a quick read may precede.
      const uid = (await eventually("pinned in /pods", () => podStatus("pinned"), 10_000)).metadata.uid;
      const state = stateFile();
      expect(state.policyName).toBe("Static");
      expect(state.entries).toEqual({ [uid]: { main: [{ numaAffinity: [0], type: "memory", size: 64 * Mi }] } });
      const table = state.machineState["0"].memoryMap.memory;
      expect(table.systemReserved).toBe(356 * Mi);
      expect(table.reserved).toBe(64 * Mi);
      expect(table.free).toBe(table.allocatable - 64 * Mi);
      expect(state.machineState["0"]).toMatchObject({ numberOfAssignments: 1, cells: [0] });
      expect(typeof state.checksum).toBe("number");

      // The pod resources API on the agent's socket: the container's block, and node 0's allocatable memory.
      const podres = new PodResourcesListerClient(dialUnix(join(agentPaths(ctd).rootDir, "pod-resources", "kubelet.sock")));
      const listed = (await podres.list({}).response).podResources.find((p) => p.name.startsWith("pinned"));
      expect(listed?.containers[0]?.memory).toEqual([{ memoryType: "memory", size: BigInt(64 * Mi), topology: { nodes: [{ iD: 0n }] } }]);
      expect((await podres.getAllocatableResources({}).response).memory).toContainEqual({
        memoryType: "memory",
        size: BigInt(table.allocatable),
        topology: { nodes: [{ iD: 0n }] },
      });

      // More than node 0 has free: refused at admission with upstream's reason and message.
      put("toobig", { cpu: "100m", memory: "100Ti" });
      const rejected = await eventually("oversized Guaranteed pod Failed", async () => {
        const p = await podStatus("toobig");
        return p?.status.phase === "Failed" && p;
      });
      expect(rejected.status.reason).toBe("UnexpectedAdmissionError");
      expect(rejected.status.message).toBe("Allocate failed due to [memorymanager] failed to find NUMA nodes to extend the current topology hint, which is unexpected");
      rmSync(join(agent.manifests, "toobig.json"));

      // Restart: the state file is read back and validated; the container keeps its pinning.
      expect(await agent.kill("SIGTERM")).toBe(0);
      agent.start();
      await eventually(
        "agent serving pods again",
        async () => (await agent!.pods().catch(() => undefined))?.items.some((p) => p.metadata.name.startsWith("pinned") && p.status.phase === "Running"),
        60_000,
      );
      await Bun.sleep(2000);
      expect(await containerOf("pinned")).toEqual(pinned);
      expect(stateFile().entries).toEqual(state.entries);
      expect(stateFile().machineState).toEqual(state.machineState);

      // The pod goes; the next Guaranteed pod's admission gives its memory back first.
      rmSync(join(agent.manifests, "pinned.json"));
      await eventually("pinned pod gone", async () => (await podStatus("pinned")) === undefined, 60_000);
      put("next", { cpu: "100m", memory: "32Mi" });
      await eventually("next Guaranteed container running", () => containerOf("next"), 60_000);
      const nextUid = (await eventually("next in /pods", () => podStatus("next"), 10_000)).metadata.uid;
      const after = stateFile();
      expect(after.entries).toEqual({ [nextUid]: { main: [{ numaAffinity: [0], type: "memory", size: 32 * Mi }] } });
      expect(after.machineState["0"].memoryMap.memory.reserved).toBe(32 * Mi);
    },
    () => agent,
    () => ctd,
  ),
  240_000,
);
