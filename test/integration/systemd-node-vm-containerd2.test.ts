// The same systemd + cgroup v2 node as systemd-node-vm.test.ts, booted once more
// with containerd 2.x (built from Go modules by scripts/containerd2/build.sh,
// cached) in place of Debian's 1.6, configured from its own default (config
// `version = 4`) with `SystemdCgroup = true`. containerd 2.x answers CRI
// RuntimeConfig, which 1.6 does not: the agent must take the cgroup driver
// from it, and refuse to start (exit 2, a message naming both settings) when
// its config file says cgroupfs. run.sh's "containerd2" mode checks that, the
// pods, their slices, the OOM kill, and the oom_score_adj runc gives a static pod
// Guaranteed by pod-level resources alone (containerd 2.x here does not clamp
// negative values, as the project's hosts require), then powers off.
// Measured (2 shared cores, TCG): the boot to power-off 1.5-2.5 min.
import { beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { containerMemoryQoS, podQosClass, reservedEnforcements, sharesToCpuWeight, systemdCgroupPath } from "../../src/cgroups/index.ts";
import type { Pod } from "../../src/pods/schema.ts";
import { type NodeRun, runNode } from "../../scripts/vm/run-node.ts";

const repoRoot = resolve(import.meta.dir, "../..");
let run: NodeRun;
let facts: Record<string, string>;

beforeAll(async () => {
  run = await runNode({ mode: "containerd2", timeoutMs: 480_000, log: (l) => console.error(`vm: ${l}`) });
  facts = run.facts;
  console.error(`systemd node VM (containerd 2.x): payload ${run.ms.payload} ms, boot to power-off ${run.ms.boot} ms`);
}, 600_000);

const consoleTail = (lines: number) => run.output.replace(/\r/g, "").trimEnd().split("\n").slice(-lines).join("\n");

/** run.sh's diagnostics when it gave up (the agent not up, or the pods not running), one line per source. */
function diagnostics(): string {
  const lines = Object.entries(facts)
    .filter(([k]) => k.startsWith("diag-") || ["gave-up", "agent-up", "pods-running", "pods"].includes(k))
    .map(([k, v]) => `${k}: ${v}`);
  return lines.length > 0 ? lines.join("\n") : `no diagnostics from the node; console tail:\n${consoleTail(15)}`;
}

function fact(name: string): string {
  if (facts["gave-up"] !== undefined) throw new Error(`the node gave up: ${facts["gave-up"]}\n${diagnostics()}`);
  const v = facts[name];
  if (v === undefined) throw new Error(`the node did not report ${name}${run.timedOut ? " (the VM did not power off in time)" : ""}; console tail:\n${consoleTail(15)}`);
  return v;
}
function fields(name: string): Record<string, string> {
  return Object.fromEntries(
    fact(name)
      .split(/\s+/)
      .filter((w) => w.includes("="))
      .map((w) => [w.slice(0, w.indexOf("=")), w.slice(w.indexOf("=") + 1)]),
  );
}
const manifest = (name: string) => Bun.YAML.parse(readFileSync(join(repoRoot, "test/vm/node/manifests", `${name}.yaml`), "utf8")) as Pod;
const QOS = ["guaranteed", "burstable", "besteffort"] as const;

describe("a systemd + cgroup v2 node with containerd 2.x (qemu)", () => {
  test("containerd 2.x runs with SystemdCgroup = true", () => {
    expect(fact("runtime")).toMatch(/containerd=v?2\.\d+/);
    expect(fields("runtime").SystemdCgroup).toBe("1");
    expect(fact("containerd-active")).toBe("active");
  });

  test("a config file saying cgroupfs while containerd 2.x reports systemd: the agent exits 2 naming both settings", () => {
    expect(fields("mismatch")).toEqual({ rc: "2", config: "cgroupDriver:cgroupfs" });
    const message = fact("mismatch-message");
    expect(message).toContain('cgroupDriver is "cgroupfs" in the kubelet configuration');
    expect(message).toContain('the container runtime reports cgroup driver "systemd"');
  });

  test("with cgroupDriver systemd the agent asks CRI RuntimeConfig and takes the driver from containerd 2.x", () => {
    expect(fact("kubelet-active")).toMatch(/^active enabled=enabled/);
    if (!facts["agent-up"]?.startsWith("yes")) throw new Error(`the agent did not come up on the node:\n${diagnostics()}`);
    expect(fact("journal-driver")).toContain("driver=systemd from=runtime");
  });

  test("static pods of each QoS class run, each in its systemd slice with its container's scope", () => {
    if (!facts["pods-running"]?.startsWith("yes")) throw new Error(`the static pods did not run on the node:\n${diagnostics()}`);
    const pods = JSON.parse(fact("pods")) as { name: string; uid: string; state: string }[];
    for (const name of QOS) {
      const pod = pods.find((q) => q.name.startsWith(`${name}-`));
      expect(pod).toMatchObject({ state: "running" });
      const qos = podQosClass(manifest(name));
      const components = qos === "Guaranteed" ? ["kubepods", `pod${pod!.uid}`] : ["kubepods", qos.toLowerCase(), `pod${pod!.uid}`];
      expect(fields(`slice-${name}`).path).toBe(systemdCgroupPath(components));
      expect(fact(`scopes-${name}`)).toContain("cri-containerd-ID.scope");
    }
  });

  test("MemoryQoS through containerd 2.x and its runc: each container's memory.min and memory.high; kubeReserved on kubereserved.slice", () => {
    const k = Bun.YAML.parse(readFileSync(join(repoRoot, "test/vm/node/kubelet.yaml"), "utf8")) as Parameters<typeof reservedEnforcements>[0] & { memoryThrottlingFactor: number };
    for (const name of QOS) {
      const unified = containerMemoryQoS(manifest(name).spec.containers[0]!, { throttlingFactor: k.memoryThrottlingFactor, allocatableMemoryBytes: 0 });
      expect(fields(`container-${name}`)).toMatchObject({ exists: "yes", "memory.min": unified["memory.min"] ?? "0", "memory.high": unified["memory.high"] ?? "max" });
    }
    const kube = reservedEnforcements(k, true).find((e) => e.level === "kube-reserved")!.config;
    expect(fields("reserved")).toMatchObject({
      "kubereserved.slice:cpu.weight": String(sharesToCpuWeight(kube.cpuShares!, "linear")),
      "kubereserved.slice:memory.max": String(kube.memoryLimit),
      "kubereserved.slice:pids.max": String(kube.pidsLimit),
    });
  });

  test("a container over its memory limit: exit code 137, OOMKilled, killed by the kernel's memcg OOM killer in its scope", () => {
    const oom = fields("oom");
    expect(oom).toMatchObject({ exitCode: "137", phase: "Failed" });
    // As on 1.6 (see systemd-node-vm.test.ts): containerd may report Error when the exit comes before the OOM event.
    expect(["OOMKilled", "Error"]).toContain(oom.reason ?? "");
    const id = oom.containerID?.replace(/^containerd:\/\//, "") ?? "";
    const qos = podQosClass(manifest("oom"));
    const components = qos === "Guaranteed" ? ["kubepods", `pod${oom.uid}`] : ["kubepods", qos.toLowerCase(), `pod${oom.uid}`];
    expect(fact("oom-kernel").split(/\s+/)).toContain(`task_memcg=${systemdCgroupPath(components)}/cri-containerd-${id}.scope`);
    expect(run.timedOut).toBe(false);
  });

  test("pod-level resources: a static pod Guaranteed by spec.resources alone sits in its kubepods slice and its container gets Guaranteed's oom_score_adj, -997, from runc", () => {
    const pod = Bun.YAML.parse(readFileSync(join(repoRoot, "test/vm/node/podlevel/podlevel.yaml"), "utf8")) as Pod;
    expect(pod.spec.containers[0]!.resources).toBeUndefined();
    expect(podQosClass(pod)).toBe("Guaranteed");
    const p = fields("podlevel");
    expect(p).toMatchObject({ running: "yes", qos: "Guaranteed", path: systemdCgroupPath(["kubepods", `pod${p.uid}`]) });
    // Beside it, the container-level classes: Guaranteed -997, BestEffort 1000, Burstable in between (from its memory request).
    const adj = fields("oom-score-adj");
    expect(adj).toMatchObject({ podlevel: "-997", guaranteed: "-997", besteffort: "1000" });
    expect(Number(adj.burstable)).toBeGreaterThanOrEqual(2);
    expect(Number(adj.burstable)).toBeLessThan(1000);
  });
});
