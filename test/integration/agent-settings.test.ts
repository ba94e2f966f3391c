// Settings that act on the agent process itself, checked on a running agent:
// maxOpenFiles is its RLIMIT_NOFILE (read from /proc/<pid>/limits), and
// enableDebugFlagsHandler's PUT /debug/flags/v changes its log verbosity
// while it runs (the V(10) "CRI call" lines start and stop), and
// makeIPTablesUtilChains (the default) writes upstream's chains into the
// host's iptables. And on this one-NUMA-node host, topologyManagerPolicy
// single-numa-node with the pod scope starts and admits a Guaranteed pod, as
// upstream does there.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let agent: AgentHandle;

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "agentsettings" });
  // Below this host's hard limit (raising it needs CAP_SYS_RESOURCE): a value the agent can set.
  agent = await startAgent(ctd, {
    extraConfig: {
      maxOpenFiles: 4096,
      authentication: { anonymous: { enabled: true } },
      authorization: { mode: "AlwaysAllow" },
      topologyManagerPolicy: "single-numa-node",
      topologyManagerScope: "pod",
      makeIPTablesUtilChains: true,
    },
  });
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await ctd?.stop();
  // The host's tables are shared: remove what the agent wrote (its canary monitor died with it).
  for (const binary of ["iptables", "ip6tables"]) {
    for (const table of ["mangle", "nat", "filter"]) Bun.spawnSync([binary, "-w", "5", "-t", table, "-X", "KUBE-KUBELET-CANARY"]);
    Bun.spawnSync([binary, "-w", "5", "-t", "mangle", "-X", "KUBE-IPTABLES-HINT"]);
  }
  for (const chain of ["INPUT", "OUTPUT"]) Bun.spawnSync(["iptables", "-w", "5", "-t", "filter", "-D", chain, "-j", "KUBE-FIREWALL"]);
  Bun.spawnSync(["iptables", "-w", "5", "-t", "filter", "-F", "KUBE-FIREWALL"]);
  Bun.spawnSync(["iptables", "-w", "5", "-t", "filter", "-X", "KUBE-FIREWALL"]);
}, 60_000);

test(
  "maxOpenFiles: the running agent's open file limit, soft and hard",
  explainFailure(
    async () => {
      // Set in the start-up checks, after the config is loaded: wait for them.
      await eventually("the agent started", async () => agent.log().includes('"starting node agent"'), 30_000);
      const limits = readFileSync(`/proc/${agent.pid()}/limits`, "utf8");
      expect(limits.split("\n").find((l) => l.startsWith("Max open files"))).toMatch(/^Max open files\s+4096\s+4096\s+files/);
    },
    () => agent,
    () => ctd,
  ),
);

test(
  "PUT /debug/flags/v sets the running agent's verbosity: V(10) lines appear at 10 and stop at 2",
  explainFailure(
    async () => {
      const port = (JSON.parse(readFileSync(join(agent.dir, "kubelet.yaml"), "utf8")) as { port: number }).port;
      const put = (body: string) => fetch(`https://127.0.0.1:${port}/debug/flags/v`, { method: "PUT", body, tls: { rejectUnauthorized: false } } as RequestInit);
      const criCalls = () =>
        agent
          .log()
          .split("\n")
          .filter((l) => l.includes(' "CRI call" ')).length;
      await eventually("the kubelet API serving", async () => agent.log().includes('"serving the kubelet API"'), 30_000);
      expect(criCalls()).toBe(0);
      const raised = await put("10");
      expect([raised.status, await raised.text()]).toEqual([200, "successfully set klog.logging.verbosity to 10\n"]);
      await eventually("V(10) CRI call lines", async () => criCalls() > 0, 15_000);
      const lowered = await put("2");
      expect(lowered.status).toBe(200);
      await Bun.sleep(1000); // a call under way when the level changed may still finish its line
      const after = criCalls();
      await Bun.sleep(3000); // the pod lifecycle event generator relists every second
      expect(criCalls()).toBe(after);
      const bad = await put("ten");
      expect(bad.status).toBe(400);
    },
    () => agent,
    () => ctd,
  ),
  60_000,
);

const iptables = (binary: string, args: string[]) => {
  const r = Bun.spawnSync([binary, "-w", "5", ...args]);
  return { code: r.exitCode, out: r.stdout.toString() };
};

test(
  "makeIPTablesUtilChains: KUBE-IPTABLES-HINT (both families), KUBE-FIREWALL jumped to from INPUT and OUTPUT with the martian rule, canaries in mangle, nat and filter",
  explainFailure(
    async () => {
      await eventually("initialized iptables rules", async () => agent.log().includes('"initialized iptables rules" protocol=iptables'), 15_000);
      for (const binary of ["iptables", "ip6tables"]) {
        expect(iptables(binary, ["-t", "mangle", "-S", "KUBE-IPTABLES-HINT"]).code).toBe(0);
        for (const table of ["mangle", "nat", "filter"]) expect(iptables(binary, ["-t", table, "-S", "KUBE-KUBELET-CANARY"]).code).toBe(0);
      }
      const firewall = iptables("iptables", ["-t", "filter", "-S", "KUBE-FIREWALL"]).out;
      expect(firewall).toContain("-d 127.0.0.0/8");
      expect(firewall).toContain("! -s 127.0.0.0/8");
      expect(firewall).toContain("block incoming localnet connections");
      expect(firewall).toContain("-j DROP");
      for (const chain of ["INPUT", "OUTPUT"]) expect(iptables("iptables", ["-t", "filter", "-C", chain, "-j", "KUBE-FIREWALL"]).code).toBe(0);
    },
    () => agent,
    () => ctd,
  ),
  30_000,
);

test(
  "topologyManagerPolicy single-numa-node, scope pod, on a host with one NUMA node: a Guaranteed pod is admitted and runs",
  explainFailure(
    async () => {
      expect(readdirSync("/sys/devices/system/node").filter((n) => /^node\d+$/.test(n))).toEqual(["node0"]);
      writeFileSync(
        join(agent.manifests, "aligned.json"),
        JSON.stringify({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "aligned", namespace: "default" },
          spec: {
            terminationGracePeriodSeconds: 1,
            containers: [
              {
                name: "main",
                image: ctd.busyboxImage,
                imagePullPolicy: "IfNotPresent",
                command: ["sleep", "3600"],
                resources: { requests: { cpu: "100m", memory: "16Mi" }, limits: { cpu: "100m", memory: "16Mi" } },
              },
            ],
          },
        }),
      );
      await eventually(
        "aligned running",
        async () => (await agent.pods().catch(() => undefined))?.items.find((p) => p.metadata.name.startsWith("aligned"))?.status.phase === "Running",
        60_000,
      );
    },
    () => agent,
    () => ctd,
  ),
  90_000,
);
