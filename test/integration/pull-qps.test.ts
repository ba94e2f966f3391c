// registryPullQPS / registryBurst with a real containerd pulling from a local
// registry: at 1 pull per second with a burst of 1, three pods whose images
// must be pulled at once are not pulled together. The first pull goes
// through; the others fail at once with upstream's "pull QPS exceeded"
// (ErrImagePull, then the image back-off retries them), so the registry
// sees the pulls spread out, at least a second apart, and every pod runs.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { startRegistry, type RegistryHandle } from "../harness/registry.ts";

let ctd: ContainerdHandle;
let agent: AgentHandle;
let registry: RegistryHandle;

beforeAll(async () => {
  requireRoot();
  registry = startRegistry();
  ctd = await startContainerd({ name: "pullqps" });
  agent = await startAgent(ctd, { extraConfig: { registryPullQPS: 1, registryBurst: 1, serializeImagePulls: false } });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  registry?.stop();
  await ctd?.stop();
}, 60_000);

test(
  "pulls over the rate fail with pull QPS exceeded and are retried: the registry sees them at least a second apart",
  explainFailure(
    async () => {
      const names = ["qps-a", "qps-b", "qps-c"];
      for (const name of names)
        writeFileSync(
          join(agent.manifests, `${name}.json`),
          JSON.stringify({
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name, namespace: "default" },
            spec: {
              terminationGracePeriodSeconds: 1,
              containers: [{ name: "main", image: `${registry.host}/qps/${name}:1`, imagePullPolicy: "Always", command: ["sleep", "3600"] }],
            },
          }),
        );
      await eventually(
        "all three pods running",
        async () => (await agent.pods().catch(() => undefined))?.items.filter((p) => names.some((n) => p.metadata.name.startsWith(n)) && p.status.phase === "Running").length === 3,
        90_000,
      );
      expect(agent.log()).toContain("pull QPS exceeded");
      const firstManifest = names
        .map((n) => Math.min(...registry.requests.filter((r) => r.repository === `qps/${n}` && r.kind === "manifests").map((r) => r.startedAt)))
        .sort((a, b) => a - b);
      for (let i = 1; i < firstManifest.length; i++) expect(firstManifest[i]! - firstManifest[i - 1]!).toBeGreaterThanOrEqual(900);
    },
    () => agent,
    () => ctd,
  ),
  180_000,
);
