// Pod and container seLinuxOptions reach the runtime: containerd's verbose
// PodSandboxStatus and ContainerStatus echo the CRI config the agent sent,
// so the sandbox carries the pod's label and each container its own (a
// container's options replacing the pod's whole) or the pod's. On a host
// without SELinux (no /sys/fs/selinux) runc applies no label: the pod must
// still run.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import type { CriService } from "../../src/cri/index.ts";
import { memoryLogger } from "../../src/util/log.ts";
import { eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let agent: AgentHandle;
let cri: CriService;

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "selinux" });
  agent = await startAgent(ctd);
  cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 10_000, logger: memoryLogger().logger });
}, 120_000);

afterAll(async () => {
  cri?.close();
  await agent?.kill("SIGKILL");
  await ctd?.stop();
}, 60_000);

type Echoed = { config?: { linux?: { security_context?: { selinux_options?: Record<string, string> } } } };
const selinuxOf = (info: Record<string, string>) => (JSON.parse(info.info ?? "{}") as Echoed).config?.linux?.security_context?.selinux_options;

test(
  "the sandbox gets the pod's seLinuxOptions, a container its own or the pod's, and the pod runs",
  explainFailure(
    async () => {
      const podLabel = { user: "system_u", role: "system_r", type: "container_t", level: "s0:c1,c2" };
      writeFileSync(
        join(agent.manifests, "labelled.json"),
        JSON.stringify({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "labelled", namespace: "default" },
          spec: {
            terminationGracePeriodSeconds: 1,
            securityContext: { seLinuxOptions: podLabel },
            containers: [
              { name: "inherits", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] },
              { name: "own", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"], securityContext: { seLinuxOptions: { level: "s0:c7,c9" } } },
            ],
          },
        }),
      );
      await eventually(
        "labelled running with both containers",
        async () => {
          const p = (await agent.pods().catch(() => undefined))?.items.find((x) => x.metadata.name.startsWith("labelled"));
          return p?.status.phase === "Running" && (p.status.containerStatuses ?? []).filter((c) => c.state?.running).length === 2;
        },
        60_000,
      );
      const [sandbox] = await cri.listPodSandbox({ labelSelector: { "io.kubernetes.pod.name": "labelled-test-node" } });
      expect(sandbox).toBeDefined();
      expect(selinuxOf((await cri.podSandboxStatus(sandbox!.id, true)).info)).toEqual(podLabel);
      const containers = await cri.listContainers({ podSandboxId: sandbox!.id });
      const byName = new Map(containers.map((c) => [c.metadata?.name, c.id]));
      expect(selinuxOf((await cri.containerStatus(byName.get("inherits")!, true)).info)).toEqual(podLabel);
      // Go's JSON omits empty strings: only the level the container set.
      expect(selinuxOf((await cri.containerStatus(byName.get("own")!, true)).info)).toEqual({ level: "s0:c7,c9" });
    },
    () => agent,
    () => ctd,
  ),
  120_000,
);
