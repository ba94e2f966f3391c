// spec.hostUsers: false against the runtime under test (BUNLET_RUNTIME).
// containerd 2.x reports user namespace support in its CRI Status: the pod
// runs in its own user namespace, 0 → the slot the agent allocated (written
// to <rootDir>/pods/<uid>/userns), its emptyDir is an idmapped mount (a file
// its root writes is the host's root's), a restarted agent keeps the slot,
// and deleting the pod frees it. containerd 1.6 reports no runtime handlers:
// the sandbox is refused with upstream's message and the pod never runs in
// the host's user namespace.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { agentPaths, eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let agent: AgentHandle;
let rootDir = "";

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "userns" });
  rootDir = agentPaths(ctd).rootDir;
  // --v=3: standalone, the refusal's event is only in the log, where events are logged at --v=3 as upstream's.
  agent = await startAgent(ctd, { extraArgs: ["--v=3"] });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await ctd?.stop();
}, 60_000);

const manifest = (image: string) =>
  JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "userns", namespace: "default" },
    spec: {
      hostUsers: false,
      terminationGracePeriodSeconds: 1,
      volumes: [{ name: "data", emptyDir: {} }],
      containers: [
        {
          name: "main",
          image,
          imagePullPolicy: "IfNotPresent",
          command: ["sh", "-c", "cat /proc/self/uid_map > /data/uid_map && cat /proc/self/gid_map > /data/gid_map && touch /data/by-root && sleep 3600"],
          volumeMounts: [{ name: "data", mountPath: "/data" }],
        },
      ],
    },
  });

const podNamed = async () => (await agent.pods().catch(() => undefined))?.items.find((p) => p.metadata.name === "userns-test-node");
const mapLine = (text: string) => text.trim().split(/\s+/).map(Number);

test(
  "hostUsers: false runs in its own user namespace on containerd 2.x and is refused with upstream's reason on 1.6",
  explainFailure(
    async () => {
      writeFileSync(join(agent.manifests, "userns.json"), manifest(ctd.busyboxImage));
      if (ctd.runtime === "containerd16") {
        // No runtime_handlers in 1.6's Status: upstream HandlerSupportsUserNamespaces says no.
        await eventually("the refusal in the agent's events", () => agent.log().includes("runtime does not support user namespaces"), 60_000);
        const pod = await podNamed();
        expect(pod?.status.phase).toBe("Pending");
        expect(pod?.status.containerStatuses[0]?.state["running"]).toBeUndefined();
        expect(agent.log()).toContain("FailedCreatePodSandBox");
        expect(existsSync(join(rootDir, "pods", pod!.metadata.uid, "userns"))).toBe(false);
        return;
      }
      const pod = await eventually(
        "pod running",
        async () => {
          const p = await podNamed();
          return p?.status.containerStatuses[0]?.state["running"] ? p : undefined;
        },
        60_000,
      );
      const uid = pod.metadata.uid;
      const stored = JSON.parse(readFileSync(join(rootDir, "pods", uid, "userns"), "utf8")) as { uidMappings: { hostId: number; containerId: number; length: number }[] };
      const hostId = stored.uidMappings[0]!.hostId;
      expect(stored.uidMappings).toEqual([{ hostId, containerId: 0, length: 65536 }]);
      // No "kubelet" user on the test host: upstream's default range 65536..2^32, one slot of idsPerPod.
      expect(hostId % 65536).toBe(0);
      expect(hostId).toBeGreaterThanOrEqual(65536);
      const data = join(rootDir, "pods", uid, "volumes", "kubernetes.io~empty-dir", "data");
      const uidMap = await eventually("uid_map written", () => (existsSync(join(data, "by-root")) ? readFileSync(join(data, "uid_map"), "utf8") : undefined));
      expect(mapLine(uidMap)).toEqual([0, hostId, 65536]);
      expect(mapLine(readFileSync(join(data, "gid_map"), "utf8"))).toEqual([0, hostId, 65536]);
      // The emptyDir is an idmapped mount with the pod's mappings: the pod's root (host ID hostId) writes as the host's root.
      expect(statSync(join(data, "by-root")).uid).toBe(0);
      expect(statSync(join(data, "by-root")).gid).toBe(0);

      // A restarted agent reads the slot back: the running container is kept, the mapping file unchanged.
      const before = pod.status.containerStatuses[0]!.state;
      await agent.kill("SIGKILL");
      agent.start();
      await eventually("agent serves again", async () => (await podNamed())?.status.containerStatuses[0]?.state["running"], 60_000);
      expect((await podNamed())?.status.containerStatuses[0]?.state).toEqual(before);
      expect(JSON.parse(readFileSync(join(rootDir, "pods", uid, "userns"), "utf8")).uidMappings[0].hostId).toBe(hostId);

      // Deleting the pod releases the slot: its mapping file goes with it.
      rmSync(join(agent.manifests, "userns.json"));
      await eventually("mapping file removed", () => !existsSync(join(rootDir, "pods", uid, "userns")), 60_000);
    },
    () => agent,
    () => ctd,
  ),
  240_000,
);
