// podCIDR on a real containerd: the agent hands it to the runtime over CRI
// UpdateRuntimeConfig at start (upstream updatePodCIDR), and containerd
// accepts it (its CNI config template, when it has one, gets the CIDR).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let agent: AgentHandle;

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "podcidr" });
  agent = await startAgent(ctd, { extraConfig: { podCIDR: "10.244.7.0/24" } });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await ctd?.stop();
}, 60_000);

test(
  "the podCIDR setting reaches containerd through UpdateRuntimeConfig, once",
  explainFailure(
    async () => {
      await eventually("the runtime took the pod CIDR", () => agent.log().includes("updating pod CIDR"), 30_000);
      const lines = agent
        .log()
        .split("\n")
        .filter((l) => l.includes("updating pod CIDR"));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain("10.244.7.0/24");
      expect(agent.log()).not.toContain("pod CIDR update failed");
    },
    () => agent,
    () => ctd,
  ),
  60_000,
);
