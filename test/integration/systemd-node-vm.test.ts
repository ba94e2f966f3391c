// The node users have: Debian 12 booted by systemd on cgroup v2 only, dbus,
// systemd-logind, containerd 1.6 with SystemdCgroup = true, runc, CNI, the
// agent installed with `kubelet install` and started by
// `systemctl enable --now kubelet` with cgroupDriver: systemd. One boot under
// qemu (TCG) runs test/vm/node/run.sh, which prints what it observes; this
// file computes what each observation must be and checks it.
// Missing qemu or mmdebstrap FAILS this test (scripts/setup.sh installs them).
// Measured (2 shared cores): a cold image build 60-80 s, the boot with every
// check to power-off 2.1-4.7 min under TCG (2 vCPUs, 2 GiB); a warm run builds
// nothing but dist/kubelet (1-2 s) and the payload disk (2-3 s).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { containerMemoryQoS, podQosClass, podResourceConfig, qosResourceConfigs, reservedEnforcements, sharesToCpuWeight, systemdCgroupPath } from "../../src/cgroups/index.ts";
import type { Summary } from "../../src/stats/types.ts";
import type { Pod } from "../../src/pods/schema.ts";
import { runNode, type NodeRun } from "../../scripts/vm/run-node.ts";
import { type ControlPlaneHandle, startControlPlane } from "../harness/controlplane.ts";

const repoRoot = resolve(import.meta.dir, "../..");
let run: NodeRun;
let facts: Record<string, string>;

let cp: ControlPlaneHandle | undefined;

beforeAll(async () => {
  // A control plane on this host for the eviction check's API pods (the agent never evicts static pods).
  cp = await startControlPlane({ name: "systemd-vm" });
  await cp.nodeKubeconfig("bunlet-node");
  const pki = join(cp.dir, "pki");
  run = await runNode({
    timeoutMs: 840_000,
    log: (l) => console.error(`vm: ${l}`),
    cluster: {
      apiServerUrl: cp.apiServerUrl,
      caFile: cp.caFile,
      nodeCert: join(pki, "nodes/bunlet-node.crt"),
      nodeKey: join(pki, "nodes/bunlet-node.key"),
      adminCert: join(pki, "admin.crt"),
      adminKey: join(pki, "admin.key"),
    },
  });
  facts = run.facts;
  console.error(
    `systemd node VM: image ${run.imageBuilt ? "built" : "cached"} ${run.ms.image} ms, binary ${run.ms.binary} ms, payload ${run.ms.payload} ms, boot to power-off ${run.ms.boot} ms`,
  );
  if (run.timedOut) console.error(`the VM did not power off in time; console tail:\n${run.output.slice(-6000)}`);
}, 900_000);
afterAll(async () => {
  await cp?.stop();
});

/** The console's last lines (CI shows about 50 lines of a failed test: keep it short). */
const consoleTail = (lines: number) => run.output.replace(/\r/g, "").trimEnd().split("\n").slice(-lines).join("\n");

/** A fact's value; a missing one fails with the console's tail. */
function fact(name: string): string {
  const v = facts[name];
  if (v === undefined) throw new Error(`the node did not report ${name}${run.timedOut ? " (the VM did not power off in time)" : ""}; console tail:\n${consoleTail(15)}`);
  return v;
}

/**
 * What run.sh printed when it gave up (the agent not serving its read-only
 * port, or the static pods not running): the unit's status, the agent's and
 * containerd's journal tails, ctr's listings, the kernel's complaints, one
 * line each. The first check that needs the agent puts them in its error.
 */
function diagnostics(): string {
  const lines = Object.entries(facts)
    .filter(([k]) => k.startsWith("diag-") || ["gave-up", "agent-up", "pods-running", "pods"].includes(k))
    .map(([k, v]) => `${k}: ${v}`);
  return lines.length > 0 ? lines.join("\n") : `no diagnostics from the node; console tail:\n${consoleTail(15)}`;
}

/**
 * The checks after the first need a running agent; when run.sh gave up, each fails with the diagnostics
 * (CI's log keeps only its tail: any failed check there must carry them).
 */
function requireAgent(): void {
  if (facts["gave-up"] !== undefined) throw new Error(`the node gave up: ${facts["gave-up"]}\n${diagnostics()}`);
}
/** key=value words of a fact. */
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
/** test/vm/node/eviction/NAME.json, with sizes in place of those run.sh writes into the hog (any will do for its class). */
const evictionPod = (name: string) =>
  JSON.parse(
    readFileSync(join(repoRoot, "test/vm/node/eviction", `${name}.json`), "utf8")
      .replace(/REQUEST_MIB/g, "100")
      .replace(/FILL_MIB/g, "36"),
  ) as Pod;
interface VmKubeletConfig {
  evictionHard: Record<string, string>;
  memoryThrottlingFactor: number;
  featureGates: Record<string, boolean>;
  enforceNodeAllocatable: string[];
  systemReserved: Record<string, string>;
  kubeReserved: Record<string, string>;
  systemReservedCgroup: string;
  kubeReservedCgroup: string;
  singleProcessOOMKill?: boolean;
}
const kubeletConfig = () => Bun.YAML.parse(readFileSync(join(repoRoot, "test/vm/node/kubelet.yaml"), "utf8")) as VmKubeletConfig;
/** A fact that holds JSON. */
const json = <T>(name: string): T => JSON.parse(fact(name)) as T;
/** What run.sh's `pick` keeps of /stats/summary: the node, and the burstable pod with its containers. */
type Picked = { node: Pick<Summary["node"], "cpu" | "memory" | "io" | "rlimit">; pod: Pick<Summary["pods"][number], "cpu" | "memory" | "io" | "process_stats" | "containers"> };
const num = (v: string | undefined) => {
  const n = Number(v);
  if (v === undefined || v === "" || !Number.isFinite(n)) throw new Error(`not a number: ${JSON.stringify(v)}`);
  return n;
};

describe("a systemd + cgroup v2 node (qemu)", () => {
  test("systemd is PID 1 on the unified hierarchy with every controller; containerd runs with SystemdCgroup", () => {
    expect(fields("node")).toMatchObject({ pid1: "systemd", cgroupfs: "cgroup2fs" });
    expect(fact("controllers").split(" ")).toEqual(expect.arrayContaining(["cpu", "memory", "pids", "io"]));
    expect(fields("runtime").SystemdCgroup).toBe("1");
    expect(fact("containerd-active")).toBe("active");
  });

  test("kubelet install, then systemctl enable --now kubelet: the agent serves its read-only port", () => {
    expect(fields("install")).toEqual({ rc: "0", unit: "yes", binary: "yes" });
    expect(fact("kubelet-active")).toMatch(/^active enabled=enabled/);
    if (!facts["agent-up"]?.startsWith("yes")) throw new Error(`the agent did not come up on the node:\n${diagnostics()}`);
  });

  test("static pods of each QoS class run", () => {
    if (!facts["pods-running"]?.startsWith("yes")) throw new Error(`the static pods did not run on the node:\n${diagnostics()}`);
    const pods = JSON.parse(fact("pods")) as { name: string; state: string }[];
    // Each manifest is of the class its name says (where its slice is, is checked below).
    expect(QOS.map((name) => podQosClass(manifest(name)).toLowerCase())).toEqual([...QOS]);
    for (const name of QOS) expect(pods.find((q) => q.name.startsWith(`${name}-`))).toMatchObject({ state: "running" });
  });

  test("the agent took cgroupDriver systemd from its config (containerd 1.6 cannot answer RuntimeConfig)", () => {
    requireAgent();
    expect(fact("journal-driver")).toContain("systemd");
    expect(fact("journal-driver")).toContain("config");
  });

  for (const name of QOS) {
    test(`${name}: its slice where upstream puts it, cpu.weight / cpu.max / memory.max / pids.max as the spec says, and the container's scope inside`, () => {
      requireAgent();
      const pod = manifest(name);
      const uid = JSON.parse(fact("pods")).find((q: { name: string }) => q.name.startsWith(`${name}-`)).uid as string;
      const qos = podQosClass(pod);
      const components = qos === "Guaranteed" ? ["kubepods", `pod${uid}`] : ["kubepods", qos.toLowerCase(), `pod${uid}`];
      const want = podResourceConfig(pod, { cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, podPidsLimit: 1024 });
      const got = fields(`slice-${name}`);
      expect(got.path).toBe(systemdCgroupPath(components));
      expect(got["cpu.weight"]).toBe(String(sharesToCpuWeight(want.cpuShares!, "linear")));
      expect(got["cpu.max"]).toBe(want.cpuQuota !== undefined && want.cpuQuota > 0 ? `${want.cpuQuota}_100000` : "max_100000");
      expect(got["memory.max"]).toBe(want.memoryLimit !== undefined && want.memoryLimit > 0 ? String(want.memoryLimit) : "max");
      expect(got["pids.max"]).toBe("1024");
      const unit = fields(`unit-${name}`);
      expect(unit).toMatchObject({ ActiveState: "active", DefaultDependencies: "no", TasksMax: "1024" });
      expect(unit.Wants).toBe(qos === "Guaranteed" ? "kubepods.slice" : `kubepods-${qos.toLowerCase()}.slice`);
      expect(unit.CPUWeight).toBe(String(sharesToCpuWeight(want.cpuShares!, "linear")));
      if (want.memoryLimit !== undefined && want.memoryLimit > 0) expect(unit.MemoryMax).toBe(String(want.memoryLimit));
      // runc (systemd driver) puts each container in a cri-containerd-<id>.scope of the pod's slice.
      expect(fact(`scopes-${name}`)).toContain("cri-containerd-ID.scope");
    });
  }

  test("MemoryQoS: memory.min on each pod slice and QoS slice from requests; the containers' memory.min and memory.high (memoryThrottlingFactor) through the CRI", () => {
    requireAgent();
    const k = kubeletConfig();
    expect(k.featureGates.MemoryQoS).toBe(true);
    for (const name of QOS) {
      const pod = manifest(name);
      const want = podResourceConfig(pod, { cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, podPidsLimit: 1024, memoryQoS: true });
      expect(fields(`slice-${name}`)["memory.min"]).toBe(String(want.memoryMin ?? 0));
      // Every container here with a memory request has a limit: node allocatable never enters memory.high.
      const unified = containerMemoryQoS(pod.spec.containers[0]!, { throttlingFactor: k.memoryThrottlingFactor, allocatableMemoryBytes: 0 });
      expect(fields(`container-${name}`)).toMatchObject({ exists: "yes", "memory.min": unified["memory.min"] ?? "0", "memory.high": unified["memory.high"] ?? "max" });
    }
    // singleProcessOOMKill unset on cgroup v2: every container's OOM kill takes the whole container, as upstream.
    expect(k.singleProcessOOMKill).toBeUndefined();
    for (const name of QOS) expect(fields(`container-${name}`)["memory.oom.group"]).toBe("1");
    // The burstable container is the one throttled: request 32Mi, limit 128Mi, factor 0.8.
    expect(Number(fields("container-burstable")["memory.high"])).toBe(Math.floor((32 + 0.8 * 96) * 256) * 4096);
    // The QoS levels sum the active pods' requests; the OOM pod (Burstable) counts until it has failed.
    const q = fields("memory-qos");
    const pods = QOS.map(manifest);
    const options = [qosResourceConfigs(pods, { memoryQoS: true }), qosResourceConfigs([...pods, manifest("oom")], { memoryQoS: true })];
    expect(options.map((c) => ({ kubepods: String(c.guaranteed.memoryMin), burstable: String(c.burstable.memoryMin) }))).toContainEqual({
      kubepods: q.kubepods ?? "",
      burstable: q.burstable ?? "",
    });
    expect(q.besteffort).toBe("0");
  });

  test("enforceNodeAllocatable system-reserved-compressible and kube-reserved: systemReserved's cpu on system.slice, kubeReserved's cpu, memory (and memory.min with MemoryQoS) and pids on kubereserved.slice", () => {
    requireAgent();
    const k = kubeletConfig();
    const enforced = reservedEnforcements(k, true);
    expect(enforced.map((e) => [e.level, e.cgroup])).toEqual([
      ["system-reserved-compressible", "/system.slice"],
      ["kube-reserved", "/kubereserved.slice"],
    ]);
    const [system, kube] = enforced.map((e) => e.config);
    const files = fields("reserved");
    expect(files["system.slice:cpu.weight"]).toBe(String(sharesToCpuWeight(system!.cpuShares!, "linear")));
    // Compressible only: the memory of system.slice (this script, the agent, containerd) is left alone.
    expect(files["system.slice:memory.max"]).toBe("max");
    expect(files).toMatchObject({
      "kubereserved.slice:cpu.weight": String(sharesToCpuWeight(kube!.cpuShares!, "linear")),
      "kubereserved.slice:memory.max": String(kube!.memoryLimit),
      "kubereserved.slice:memory.min": String(kube!.memoryMin),
      "kubereserved.slice:pids.max": String(kube!.pidsLimit),
    });
    expect(kube).toMatchObject({ memoryLimit: 16 * 2 ** 20, pidsLimit: 1000 });
    // Set through systemd too (SetUnitProperties), so a daemon-reload keeps them.
    expect(fact("reserved-units")).toBe(
      `system.slice:${sharesToCpuWeight(system!.cpuShares!, "linear")} kubereserved.slice:${sharesToCpuWeight(kube!.cpuShares!, "linear")},${kube!.memoryLimit},${kube!.pidsLimit},`,
    );
    expect(fact("reserved-journal")).toContain("kubereserved.slice");
  });

  // run.sh reads the files right before and right after fetching the summary, with the pod idle (its load is over),
  // so the pod's and container's counters barely move; the node never idles, so its bounds are what 2 CPUs can do
  // in the 10 s a summary may be old.
  test("/stats/summary from the cgroup v2 files: node, pod and container CPU and memory non-zero and consistent with the files", () => {
    requireAgent();
    const s = json<Picked>("stats-summary");
    const before = fields("stats-files-before");
    const after = fields("stats-files-after");
    const app = s.pod.containers.find((c) => c.name === "main")!;
    for (const v of [
      s.node.cpu?.usageCoreNanoSeconds,
      s.node.cpu?.usageNanoCores,
      s.node.memory?.workingSetBytes,
      s.pod.cpu?.usageCoreNanoSeconds,
      s.pod.cpu?.usageNanoCores,
      s.pod.memory?.workingSetBytes,
      app.cpu?.usageCoreNanoSeconds,
      app.memory?.workingSetBytes,
    ])
      expect(v ?? 0).toBeGreaterThan(0);
    const within = (got: number | undefined, lo: number, hi: number) => {
      expect(got ?? Number.NaN).toBeGreaterThanOrEqual(lo);
      expect(got ?? Number.NaN).toBeLessThanOrEqual(hi);
    };
    // CPU: cumulative, so between the file read before (less what an idle pod uses in 10 s) and the one after.
    within(s.pod.cpu?.usageCoreNanoSeconds, num(before["pod.usage_usec"]) * 1000 - 1e9, num(after["pod.usage_usec"]) * 1000);
    within(app.cpu?.usageCoreNanoSeconds, num(before["ctr.usage_usec"]) * 1000 - 1e9, num(after["ctr.usage_usec"]) * 1000);
    within(s.node.cpu?.usageCoreNanoSeconds, num(before["node.busy_jiffies"]) * 1e7 - 2 * 11e9, num(after["node.busy_jiffies"]) * 1e7);
    // Memory: usage is memory.current (the root: anon + file), the working set that less inactive_file.
    const close = (got: number | undefined, want: number, slack: number) => expect(Math.abs((got ?? Number.NaN) - want)).toBeLessThanOrEqual(slack);
    const podUsage = num(before["pod.memory.current"]);
    close(s.pod.memory?.usageBytes, podUsage, Math.max(2 * 2 ** 20, podUsage * 0.1));
    close(s.pod.memory?.workingSetBytes, podUsage - num(before["pod.inactive_file"]), Math.max(2 * 2 ** 20, podUsage * 0.1));
    const ctrUsage = num(before["ctr.memory.current"]);
    close(app.memory?.usageBytes, ctrUsage, Math.max(2 * 2 ** 20, ctrUsage * 0.1));
    close(app.memory?.workingSetBytes, ctrUsage - num(before["ctr.inactive_file"]), Math.max(2 * 2 ** 20, ctrUsage * 0.1));
    const nodeUsage = num(before["node.anon"]) + num(before["node.file"]);
    close(s.node.memory?.usageBytes, nodeUsage, nodeUsage * 0.15);
    close(s.node.memory?.workingSetBytes, nodeUsage - num(before["node.inactive_file"]), nodeUsage * 0.15);
    // The pod's memory is its container's and its sandbox's: at least the container's.
    expect(s.pod.memory!.usageBytes!).toBeGreaterThanOrEqual(app.memory!.usageBytes! - 2 ** 20);
  });

  test("PSI (KubeletPSI): the node's, pod's and container's cpu/memory/io pressure in /stats/summary; a CPU load in the container raises the pod's and container's, as the files say", () => {
    requireAgent();
    const files = fields("stats-files-before");
    expect(files["node.pressure_files"]).toBe("cpu,io,memory,");
    expect((files["pod.pressure_files"] ?? "").split(",")).toEqual(expect.arrayContaining(["cpu.pressure", "io.pressure", "memory.pressure"]));
    const pre = json<Picked>("psi-before");
    const during = json<Picked>("psi-during");
    const duringFiles = fields("psi-during-files");
    // Each of some and full with its four numbers (checked by type: Bun's toMatchObject with expect.any()
    // writes the matchers into the object it checks).
    const shape = (psi: { some: object; full: object } | undefined) =>
      psi === undefined
        ? "none"
        : [psi.some, psi.full]
            .map((d) =>
              Object.entries(d)
                .map(([k, v]) => `${k}:${typeof v}`)
                .sort()
                .join(","),
            )
            .join(" ");
    const numbers = "avg10:number,avg300:number,avg60:number,total:number avg10:number,avg300:number,avg60:number,total:number";
    for (const where of [during.node, during.pod, during.pod.containers.find((c) => c.name === "main")!]) {
      expect([shape(where.cpu?.psi), shape(where.memory?.psi), shape(where.io?.psi)]).toEqual([numbers, numbers, numbers]);
    }
    const appOf = (p: Picked) => p.pod.containers.find((c) => c.name === "main")!;
    // Four busy loops on a 1.5-CPU quota: the pod's and container's cpu "some" pressure grows and shows in avg10.
    expect(during.pod.cpu!.psi!.some.total).toBeGreaterThan(pre.pod.cpu!.psi!.some.total);
    expect(during.pod.cpu!.psi!.some.avg10).toBeGreaterThan(0);
    expect(appOf(during).cpu!.psi!.some.total).toBeGreaterThan(appOf(pre).cpu!.psi!.some.total);
    expect(appOf(during).cpu!.psi!.some.avg10).toBeGreaterThan(0);
    expect(during.node.cpu!.psi!.some.total).toBeGreaterThan(0);
    // The kernel's numbers as they are (microseconds): what the summary says is at most what the files say just after.
    expect(during.pod.cpu!.psi!.some.total).toBeLessThanOrEqual(num(duringFiles["pod.cpu_some_total"]));
    expect(appOf(during).cpu!.psi!.some.total).toBeLessThanOrEqual(num(duringFiles["ctr.cpu_some_total"]));
  });

  // The kernel's memcg OOM killer kills the container (the kernel log names its scope) and its exit code is
  // 137. The reason is OOMKilled, or Error: with the systemd cgroup driver, containerd may see the task
  // exit before the OOM event of its scope and then reports Error (containerd issues 8893 and 12714;
  // containerd's own CRI tests skip their OOMKilled case with systemd cgroups). The agent reports what
  // containerd says, as upstream's kubelet does, so only those two reasons are accepted, and either way the
  // kernel must have killed it in this container's scope.
  test("a container over its memory limit is killed by the kernel's memcg OOM killer in its scope: exit code 137, reason OOMKilled (or Error: containerd's race)", () => {
    requireAgent();
    const oom = fields("oom");
    expect(oom.exitCode).toBe("137");
    expect(["OOMKilled", "Error"]).toContain(oom.reason ?? "");
    const id = oom.containerID?.replace(/^containerd:\/\//, "") ?? "";
    expect(id).toMatch(/^[0-9a-f]{64}$/);
    const qos = podQosClass(manifest("oom"));
    const components = qos === "Guaranteed" ? ["kubepods", `pod${oom.uid}`] : ["kubepods", qos.toLowerCase(), `pod${oom.uid}`];
    const killedIn = fact("oom-kernel")
      .split(/\s+/)
      .map((w) => w.replace(/^task_memcg=/, ""));
    expect(killedIn).toContain(`${systemdCgroupPath(components)}/cri-containerd-${id}.scope`);
  });

  // run.sh, with the agent restarted in cluster mode (static pods are never evicted, as upstream): a
  // BestEffort API pod (victim) holds 300 MiB; run.sh itself holds 200 MiB as the system would on a real
  // node (so that the hog can request what it holds: allocatable is capacity minus reserved and the
  // threshold); a Burstable API pod (hog) then fills a tmpfs until the agent's memory.available (root cgroup
  // memory.stat, cgroup v2) is 100 MiB under evictionHard; its request covers what it holds, which is more
  // than the victim's. Upstream ranks pods over their requests first, then by priority (both 0 here), then
  // by usage above requests: the victim goes first although the hog holds more. Its eviction alone gives
  // back more than the node was short: with the hog's fill still in place, later passes evict nothing, and
  // nothing after run.sh frees the fill either.
  test("under real memory pressure (evictionHard memory.available) the BestEffort pod is evicted first, Failed/Evicted, before a Burstable pod holding more within its requests; nothing else is evicted", () => {
    requireAgent();
    expect(fact("eviction-node")).toMatch(/^registered/);
    const victim = evictionPod("victim");
    const hog = evictionPod("hog");
    expect(podQosClass(victim)).toBe("BestEffort");
    expect(podQosClass(hog)).toBe("Burstable");
    const p = fields("eviction-pressure");
    const threshold = Number((kubeletConfig().evictionHard["memory.available"] ?? "").replace(/Mi$/, ""));
    expect(num(p.threshold_mib)).toBe(threshold);
    expect(num(p.available_before_mib)).toBeGreaterThan(threshold);
    // The scenario's premise: the victim holds more than the node is made short of.
    expect(num(p.victim_mib)).toBeGreaterThan(num(p.short_mib) + 100);
    const v = fields("eviction-victim");
    expect(v).toMatchObject({ phase: "Failed", reason: "Evicted" });
    expect(v.message).toStartWith("The_node_was_low_on_resource:_memory._Threshold_quantity:_");
    // Real pressure, as the agent observed it when it evicted (upstream's message): under the threshold.
    const seen = /_available:_(\d+)Ki\._Container_main_was_using_(\d+)Ki,_request_is_0,/.exec(v.message ?? "");
    expect(seen).not.toBeNull();
    expect(num(seen![1]) / 1024).toBeLessThan(threshold);
    // The hog's cgroup holds its fill, more than the victim was using: ranking by usage alone would pick the hog.
    expect(num(p.hog_memory_current)).toBeGreaterThanOrEqual(num(p.fill_mib) * 2 ** 20);
    expect(num(p.hog_memory_current)).toBeGreaterThan(num(seen![2]) * 1024);
    expect(num(seen![2]) / 1024).toBeGreaterThan(num(p.short_mib) + 100);
    expect(fact("eviction-reclaim")).toContain("resourceName=memory");
    // 25 s after the eviction, the fill still in place: the pressure is over and the hog runs.
    expect(p.hog).toBe("Running/-");
    expect(num(p.available_mib)).toBeGreaterThan(threshold);
    expect(fact("evicted-pods").replace(/"/g, "").split(/\s+/).filter(Boolean)).toEqual(["pod=default/victim-0"]);
    const after = fields("eviction-after");
    expect(after).toMatchObject({ hog: "Running/-", besteffort: "Running/-", burstable: "Running/-", guaranteed: "Running/-" });
    expect(num(after.available_mib)).toBeGreaterThan(threshold);
  });

  // run.sh, in cluster mode after the memory check: evictionHard pid.available was set 300 tasks under what the agent
  // reported available at the restart; a Burstable API pod then starts 600 sleeping processes (its pids.max is
  // podPidsLimit, 1024). The node's pid.available (the smaller of pid_max and threads-max, less the kernel's task
  // count, as upstream) goes under the threshold: the Node gets PIDPressure and the agent evicts that pod.
  test("under real PID pressure (evictionHard pid.available) the pod with the most processes is evicted, Failed/Evicted, and the Node reports PIDPressure; static pods stay", () => {
    requireAgent();
    const setup = fields("pid-setup");
    expect(num(setup.maxpid)).toBe(Math.min(num(setup.pid_max), num(setup.threads_max)));
    expect(setup.config).toBe("1");
    expect(num(setup.threshold)).toBe(num(setup.maxpid) - num(setup.curproc) - 300);
    const p = fields("pid-pressure");
    // The sampling loop stops at the eviction, which the Node's PIDPressure may be posted just after (status updates are
    // asynchronous to the eviction pass, one every nodeStatusUpdateFrequency): seen during the pressure or within 20 s
    // after it (it stays True for evictionPressureTransitionPeriod).
    expect([p.condition, p.after]).toContain("True");
    expect(num(p.min_available)).toBeLessThan(num(setup.threshold));
    expect(num(p.max_forker_procs)).toBeGreaterThan(300);
    expect(num(p.max_forker_procs)).toBeLessThanOrEqual(1024);
    const v = fields("pid-victim");
    expect(v).toMatchObject({ phase: "Failed", reason: "Evicted" });
    expect(v.message).toStartWith("The_node_was_low_on_resource:_pids.");
    expect(fact("pid-reclaim")).toContain("resourceName=pids");
    // The journal holds the memory check's eviction too: the forker is the only one since.
    expect(fact("pid-evicted").replace(/"/g, "").split(/\s+/).filter(Boolean)).toEqual(["pod=default/victim-0", "pod=default/forker-0"]);
    expect(fields("pid-others")).toEqual({ besteffort: "Running/-", burstable: "Running/-", guaranteed: "Running/-" });
  });

  test("the agent's logs are in the journal", () => {
    requireAgent();
    expect(Number(fields("journal").lines)).toBeGreaterThan(10);
  });

  test("systemctl restart kubelet restarts no container", () => {
    requireAgent();
    const r = fields("restart");
    expect(r.same).toBe("yes");
    expect(r.active).toBe("active");
  });

  test("systemctl stop kubelet leaves the pods running", () => {
    requireAgent();
    const s = fields("stop");
    expect(s.kubelet).toBe("inactive");
    expect(Number(s.running_tasks)).toBeGreaterThanOrEqual(6); // three sandboxes and their containers
    expect(Number(s.slices)).toBeGreaterThanOrEqual(3);
    expect(fields("restarted")).toEqual({ kubelet: "active", same: "yes" });
  });

  test("logind shutdown: the agent holds a delay lock, and on poweroff stops the pods by priority (priority 0 before 2000000000)", () => {
    requireAgent();
    expect(fact("inhibitor")).toContain("delay");
    // "<unix time> <pod>" per stopped container, in the order they got TERM, then poweroff-at=<unix time>.
    const words = fact("shutdown-order").split(/\s+/);
    const poweroffAt = Number(words.find((w) => w.startsWith("poweroff-at="))?.slice("poweroff-at=".length));
    const stops = new Map<string, { index: number; at: number }>();
    for (let i = 1; i < words.length; i += 1) if (QOS.includes(words[i] as (typeof QOS)[number])) stops.set(words[i]!, { index: stops.size, at: Number(words[i - 1]) });
    expect([...stops.keys()].sort()).toEqual([...QOS].sort());
    expect(stops.get("burstable")!.index).toBeLessThan(stops.get("guaranteed")!.index);
    expect(stops.get("besteffort")!.index).toBeLessThan(stops.get("guaranteed")!.index);
    // Within the grace periods: 15 s for priority 0, then 10 s.
    for (const s of stops.values()) expect(s.at - poweroffAt).toBeLessThanOrEqual(25);
    expect(run.timedOut).toBe(false);
  });
});
