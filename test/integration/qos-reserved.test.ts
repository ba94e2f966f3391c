// qosReserved memory=50% with the QOSReserved gate, on this host's real
// cgroup v1 memory hierarchy: with a Guaranteed pod requesting 64Mi running,
// the burstable QoS cgroup's memory limit is the kubepods limit (capacity −
// reserved) minus half of that request, and besteffort's the burstable limit minus half
// of the Burstable pods' requests (upstream setMemoryReserve).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { detectCgroupLayout, nodeCgroupFs } from "../../src/cgroups/index.ts";
import { eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

const MI = 2 ** 20;
let ctd: ContainerdHandle;
let agent: AgentHandle;
let memoryMount = "";

beforeAll(async () => {
  requireRoot();
  const layout = detectCgroupLayout("/", nodeCgroupFs);
  if (layout.version !== "v1") throw new Error("this test is for the cgroup v1 host the notes describe");
  memoryMount = layout.hierarchies.find((h) => h.controllers.includes("memory"))!.mountPoint;
  ctd = await startContainerd({ name: "qosres" });
  agent = await startAgent(ctd, { extraConfig: { qosReserved: { memory: "50%" }, featureGates: { QOSReserved: true } } });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await ctd?.stop();
}, 60_000);

const put = (name: string, resources: Record<string, Record<string, string>>) =>
  writeFileSync(
    join(agent.manifests, `${name}.json`),
    JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: "default" },
      spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"], resources }] },
    }),
  );
const limit = (dir: string) => Number(readFileSync(join(memoryMount, ctd.cgroupParent, dir, "memory.limit_in_bytes"), "utf8").trim());

test(
  "burstable and besteffort memory limits keep 50% of higher classes' requests free",
  explainFailure(
    async () => {
      put("guaranteed", { requests: { cpu: "100m", memory: "64Mi" }, limits: { cpu: "100m", memory: "64Mi" } });
      put("burstable", { requests: { memory: "32Mi" } });
      await eventually("both pods running", async () => (await agent.pods().catch(() => undefined))?.items.filter((p) => p.status.phase === "Running").length === 2, 60_000);
      // enforceNodeAllocatable pods: capacity − reserved (none here), as upstream; not the Node's allocatable, which
      // also takes off evictionHard's memory.available (100Mi by default). The kernel rounds the limit down to a page.
      const memTotal = Number(/^MemTotal:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"))![1]) * 1024;
      const kubepods = limit("kubepods");
      expect(kubepods).toBe(memTotal - (memTotal % 4096));
      await eventually("burstable limit = kubepods - 32Mi", () => limit("kubepods/burstable") === kubepods - 32 * MI, 30_000);
      expect(limit("kubepods/besteffort")).toBe(kubepods - 32 * MI - 16 * MI);
    },
    () => agent,
    () => ctd,
  ),
  180_000,
);
