// crashLoopBackOff.maxContainerRestartPeriod with the KubeletCrashLoopBackOffMax
// gate, on a real containerd: a container that exits at once is restarted
// every 2 seconds instead of after 10, 20, 40... seconds (upstream's default
// back-off would allow 2 restarts in the window where this sees at least 5).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let agent: AgentHandle;

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "crashloop" });
  agent = await startAgent(ctd, {
    extraConfig: { featureGates: { KubeletCrashLoopBackOffMax: true }, crashLoopBackOff: { maxContainerRestartPeriod: "2s" } },
  });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await ctd?.stop();
}, 60_000);

test(
  "a crashing container is restarted every maxContainerRestartPeriod (2s): at least 5 restarts within 30 seconds of the first",
  explainFailure(
    async () => {
      writeFileSync(
        join(agent.manifests, "crasher.json"),
        JSON.stringify({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "crasher", namespace: "default" },
          spec: {
            terminationGracePeriodSeconds: 1,
            containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sh", "-c", "exit 1"] }],
          },
        }),
      );
      const restarts = async () =>
        (await agent.pods().catch(() => undefined))?.items.find((p) => p.metadata.name.startsWith("crasher"))?.status.containerStatuses?.[0]?.restartCount ?? 0;
      await eventually("the first restart", async () => (await restarts()) >= 1, 60_000);
      const first = Date.now();
      await eventually("five restarts", async () => (await restarts()) >= 5, 30_000, 250);
      // Four more restarts, each after a 2 s back-off plus the container's start: well under the 30 s (10+20 s by default).
      expect(Date.now() - first).toBeLessThan(30_000);
      // Between restarts it waits with upstream's message: the whole back-off in Go's format and the pod as format.Pod prints it.
      const message = await eventually(
        "a CrashLoopBackOff waiting message",
        async () => {
          const pod = (await agent.pods().catch(() => undefined))?.items.find((p) => p.metadata.name.startsWith("crasher"));
          const waiting = pod?.status.containerStatuses?.[0]?.state.waiting as { reason?: string; message?: string } | undefined;
          return waiting?.reason === "CrashLoopBackOff" ? `${waiting.message} ${pod!.metadata.name}_default(${pod!.metadata.uid})` : undefined;
        },
        30_000,
        100,
      );
      expect(message).toMatch(/^back-off 2s restarting failed container=main pod=(\S+) \1$/);
    },
    () => agent,
    () => ctd,
  ),
  150_000,
);
