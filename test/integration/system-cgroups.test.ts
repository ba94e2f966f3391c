// kubeletCgroups on this host's real cgroups (v1 hybrid here; v2 alike): the
// agent creates the cgroup in every hierarchy and moves its own process into
// it, as upstream's container manager. The cgroup sits below this test's own
// cgroup (ownCgroup: the memory path on these machines), so the agent stays
// inside the memory cgroup it was started in. systemCgroups is not run here:
// it would move every process of the shared host's root cgroup; its unit
// tests run on a fake cgroupfs (src/cgroups/system-cgroups.test.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readFileSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { detectCgroupLayout, nodeCgroupFs } from "../../src/cgroups/index.ts";
import { hierarchyDir, type Hierarchy } from "../../src/cgroups/detect.ts";
import { eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { ownCgroup, requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let agent: AgentHandle;
const kubeletCgroup = `${ownCgroup().replace(/\/$/, "")}/bunlet-kubelet-${process.pid}`;
let hierarchies: Hierarchy[] = [];
/** The directories the agent will have made: the cgroup and any missing ancestor, deepest first. */
let made: string[] = [];

beforeAll(async () => {
  requireRoot();
  const layout = detectCgroupLayout("/", nodeCgroupFs);
  hierarchies = layout.version === "v2" ? [layout.unified] : [...layout.hierarchies, ...(layout.unified ? [layout.unified] : [])];
  const chain: string[] = [];
  for (let p = kubeletCgroup; p !== "/"; p = p.slice(0, p.lastIndexOf("/")) || "/") chain.push(p);
  made = hierarchies.flatMap((h) => chain.map((p) => hierarchyDir(h, p)).filter((d) => !existsSync(d)));
  ctd = await startContainerd({ name: "syscg" });
  agent = await startAgent(ctd, { extraConfig: { kubeletCgroups: kubeletCgroup } });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await ctd?.stop();
  // Deepest first: the agent is gone, so the cgroups it made are empty.
  for (const d of made.sort((a, b) => b.length - a.length)) if (existsSync(d)) rmdirSync(d);
}, 60_000);

test(
  "kubeletCgroups: the agent's process is in the configured cgroup in every hierarchy",
  explainFailure(
    async () => {
      const pid = agent.pid();
      expect(pid).toBeDefined();
      await eventually("the agent is ready", async () => (await fetch(`http://127.0.0.1:${agent.healthzPort}/healthz`).catch(() => undefined))?.ok, 60_000);
      const lines = readFileSync(`/proc/${pid}/cgroup`, "utf8").trim().split("\n");
      // Every hierarchy line (cpu, memory, name=systemd, the hybrid "0::" ...) names the cgroup.
      expect(lines.length).toBe(hierarchies.length);
      for (const line of lines) expect(line.slice(line.indexOf(":", line.indexOf(":") + 1) + 1)).toBe(kubeletCgroup);
      for (const h of hierarchies) {
        const procs = readFileSync(join(hierarchyDir(h, kubeletCgroup), "cgroup.procs"), "utf8")
          .trim()
          .split("\n");
        expect(procs).toContain(String(pid));
      }
      expect(agent.log()).toContain("moved the agent into kubeletCgroups");
    },
    () => agent,
    () => ctd,
  ),
  120_000,
);
