// memorySwap on this cgroup v1 host with a real containerd and runc: upstream
// gives every container NoSwap on cgroup v1 (LimitedSwap needs v2), which on
// v1 is memory.memsw.limit_in_bytes = memory.limit_in_bytes (no swap above
// the limit). Configured LimitedSwap, the agent says so at start and a
// Burstable container gets memsw = its memory limit; a container without a
// memory limit is left unlimited. (The LimitedSwap computation on v2 is unit
// tested in src/cgroups/swap.test.ts.)
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { detectCgroupLayout, nodeCgroupFs } from "../../src/cgroups/index.ts";
import { createCriClient } from "../../src/cri/client.ts";
import type { CriService } from "../../src/cri/index.ts";
import { memoryLogger } from "../../src/util/log.ts";
import { eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

const MI = 2 ** 20;
let ctd: ContainerdHandle;
let cri: CriService;
let agent: AgentHandle;
let memoryMount = "";

beforeAll(async () => {
  requireRoot();
  const layout = detectCgroupLayout("/", nodeCgroupFs);
  if (layout.version !== "v1") throw new Error("this test is for the cgroup v1 host the notes describe");
  memoryMount = layout.hierarchies.find((h) => h.controllers.includes("memory"))!.mountPoint;
  ctd = await startContainerd({ name: "swap" });
  cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 20_000, logger: memoryLogger().logger });
  agent = await startAgent(ctd, { extraConfig: { memorySwap: { swapBehavior: "LimitedSwap" } } });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  cri?.close();
  await ctd?.stop();
}, 60_000);

const put = (name: string, resources?: Record<string, Record<string, string>>) =>
  writeFileSync(
    join(agent.manifests, `${name}.json`),
    JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: "default" },
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"], ...(resources ? { resources } : {}) }],
      },
    }),
  );

/** A running container's memory cgroup file, found through its process's /proc/<pid>/cgroup. */
async function memoryFile(podName: string, file: string): Promise<string | undefined> {
  const c = (await cri.listContainers({ state: { state: 1 } })).find((x) => x.labels["io.kubernetes.pod.name"]?.startsWith(podName));
  if (!c) return undefined;
  const pid = JSON.parse((await cri.containerStatus(c.id, true)).info["info"] ?? "{}").pid as number;
  const line = readFileSync(`/proc/${pid}/cgroup`, "utf8")
    .trim()
    .split("\n")
    .map((l) => l.split(":"))
    .find(([, controllers]) => controllers!.split(",").includes("memory"))!;
  return readFileSync(join(memoryMount, line.slice(2).join(":"), file), "utf8").trim();
}

test(
  "LimitedSwap on cgroup v1 is NoSwap: memory+swap limit = memory limit; said at start",
  explainFailure(
    async () => {
      await eventually(
        "the agent says LimitedSwap is NoSwap here",
        () => agent.log().includes("LimitedSwap needs cgroup v2: on this cgroup v1 host every container gets NoSwap"),
        30_000,
      );
      put("burstable", { requests: { memory: `${16}Mi` }, limits: { memory: `${48}Mi` } });
      put("besteffort");
      const memsw = await eventually("Burstable container running", () => memoryFile("burstable", "memory.memsw.limit_in_bytes"), 60_000);
      expect(await memoryFile("burstable", "memory.limit_in_bytes")).toBe(String(48 * MI));
      expect(memsw).toBe(String(48 * MI));
      const unlimited = await eventually("BestEffort container running", () => memoryFile("besteffort", "memory.memsw.limit_in_bytes"), 60_000);
      expect(BigInt(unlimited)).toBeGreaterThan(BigInt(2 ** 60));
    },
    () => agent,
    () => ctd,
  ),
  180_000,
);
