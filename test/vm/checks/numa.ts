/**
 * NUMA alignment on a real two-node kernel (the VM boots with two NUMA
 * nodes of three CPUs each, every CPU its own socket: CPUs 0-2 on node 0,
 * 3-5 on node 1). The CPU topology and the NUMA nodes are read from the VM's sysfs
 * as the agent reads them. Run only when the kernel command line says
 * bunlet.probe=numa (test/integration/numa-vm.test.ts).
 *
 * - numa-restricted-cpus: the static CPU manager (a hint provider) and the
 *   topology manager admit pods with policy restricted.
 * - numa-devices: the agent's own wiring (loadConfig, buildCpuManager,
 *   buildDevices, buildTopologyManager, PodAdmission, HostPodSyncer) from a
 *   KubeletConfiguration with single-numa-node; a device plugin (the fake one
 *   of src/devices, over real gRPC on unix sockets) registers devices on
 *   node 0 and node 1; pods are admitted, their devices allocated (Allocate
 *   RPC) and their cpusets written into cgroups the way runc writes the
 *   CRI's cpuset_cpus, and a process in each reports where the kernel lets it run.
 * - numa-distribute: distribute-cpus-across-numa through the same wiring.
 */
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { buildCpuManager, buildDevices, buildTopologyManager } from "../../../src/agent/node.ts";
import { PodAdmission } from "../../../src/agent/pod-workers.ts";
import { configFromFields } from "../../../src/config/testing.ts";
import { CpuPolicy, PolicyCpuManager, readCpuTopology } from "../../../src/cpumanager/index.ts";
import { memoryStateStore } from "../../../src/cpumanager/fake.ts";
import { FakeDevicePlugin } from "../../../src/devices/fake-plugin.ts";
import type { Pod } from "../../../src/pods/schema.ts";
import { HostPodSyncer } from "../../../src/sync/pod-syncer.ts";
import { readNumaNodes, TopologyManager } from "../../../src/topologymanager/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { DisposalStack } from "../../../src/util/disposal.ts";
import { memoryLogger } from "../../../src/util/log.ts";
import type { ProbeCheck, ProbeContext } from "../protocol.ts";

const BB = "/bin/busybox";
const CG = "/sys/fs/cgroup";
/** The extended resource the test's device plugin serves. */
export const NUMA_DEVICE = "example.com/numa-dev";
/** Its devices: two on node 0, one on node 1. */
export const NUMA_DEVICES = [
  { id: "dev-0a", numa: [0] },
  { id: "dev-0b", numa: [0] },
  { id: "dev-1a", numa: [1] },
];

const guaranteed = (uid: string, cpus: number, devices = 0): Pod => {
  const r = { cpu: String(cpus), memory: "64Mi", ...(devices ? { [NUMA_DEVICE]: String(devices) } : {}) };
  return {
    metadata: { name: uid, namespace: "default", uid },
    spec: { containers: [{ name: "c", image: "x", resources: { requests: r, limits: r } }] },
  } as unknown as Pod;
};

/** A KubeletConfiguration as the agent loads it (its file given by --config), with its own root directory. */
function agentConfig(fields: Record<string, unknown>, rootDir: string) {
  rmSync(rootDir, { recursive: true, force: true });
  mkdirSync(rootDir, { recursive: true });
  return configFromFields(fields, { rootDir, hostname: "numa-vm" });
}

/** The agent's CPU, device and topology managers, built by its own builders from `fields`. */
async function agentManagers(fields: Record<string, unknown>, rootDir: string, admitted: Pod[]) {
  const config = agentConfig(fields, rootDir);
  const clock = new FakeClock(0);
  const log = memoryLogger();
  const stack = new DisposalStack({ clock, logger: log.logger });
  const w = { config, stack, clock, logger: log.logger };
  const pods = { activePods: () => admitted, activePod: (uid: string) => admitted.find((p) => p.metadata.uid === uid) };
  const sources = { allSourcesReady: () => true };
  // The CPU manager talks to the runtime only in its reconcile loop, which is not started here.
  const cri = { listContainers: async () => [], updateContainerResources: async () => {} } as never;
  const cpuManager = buildCpuManager(w, { cri, pods, sources });
  const metrics = { devicePluginRegistered() {}, devicePluginAllocated() {} } as never;
  const devices = await buildDevices(w, { sources, pods, nodeStatusRequests: { request() {} } as never, metrics });
  const machine = { memoryBytes: 1024 * 2 ** 20 } as never;
  const { topology } = buildTopologyManager(w, { node: { machine }, pods, sources, devices, cpuManager });
  return { config, cpuManager, devices, topology, stack, log };
}

/** cgroup2 mounted, with cpuset enabled from the root down to `/numa`. */
async function cpusetRoot(ctx: ProbeContext): Promise<string> {
  try {
    ctx.read(join(CG, "cgroup.controllers"));
  } catch {
    const r = await ctx.run([BB, "mount", "-t", "cgroup2", "cgroup2", CG]);
    if (r.code !== 0) throw new Error(`mount cgroup2: ${r.stderr}`);
  }
  await Bun.write(join(CG, "cgroup.subtree_control"), "+cpuset");
  const root = join(CG, "numa");
  mkdirSync(root, { recursive: true });
  await Bun.write(join(root, "cgroup.subtree_control"), "+cpuset");
  return root;
}

/**
 * The container's cgroup as runc makes it from the CRI's cpuset_cpus
 * (cpuset.cpus), and where the kernel lets a process in it run.
 */
async function runWithCpuset(ctx: ProbeContext, root: string, name: string, cpus: string) {
  const pod = join(root, name);
  mkdirSync(pod, { recursive: true });
  await Bun.write(join(pod, "cgroup.subtree_control"), "+cpuset");
  const dir = join(pod, "c");
  mkdirSync(dir, { recursive: true });
  await Bun.write(join(dir, "cpuset.cpus"), cpus);
  const r = await ctx.run([BB, "sh", "-c", `echo $$ > ${dir}/cgroup.procs && exec ${BB} grep Cpus_allowed_list /proc/self/status`], { timeoutMs: 10_000 });
  if (r.code !== 0) throw new Error(`a process in ${dir}: ${r.stderr}`);
  return { cpusetCpus: ctx.read(join(dir, "cpuset.cpus")), effective: ctx.read(join(dir, "cpuset.cpus.effective")), allowed: r.stdout.replace("Cpus_allowed_list:", "").trim() };
}

/** Each NUMA node's CPUs as the VM's sysfs lists them. */
const nodeCpulists = (ctx: ProbeContext, nodes: number[]) => Object.fromEntries(nodes.map((n) => [n, ctx.read(`/sys/devices/system/node/node${n}/cpulist`)]));

const bigints = (_k: string, v: unknown) => (typeof v === "bigint" ? Number(v) : v);

export const numaChecks: ProbeCheck[] = [
  {
    name: "numa-topology",
    async run(ctx) {
      const topology = readCpuTopology("/sys");
      const nodes = readNumaNodes("/sys", 0).map((n) => ({ id: n.id, memoryMiB: Math.round(n.memoryBytes / 2 ** 20), distances: n.distances }));
      return {
        cpus: topology.cpus,
        nodes,
        cpulists: nodeCpulists(
          ctx,
          nodes.map((n) => n.id),
        ),
      };
    },
  },
  {
    name: "numa-restricted-cpus",
    async run() {
      const topology = readCpuTopology("/sys");
      const nodes = readNumaNodes("/sys", 0);
      const policy = new CpuPolicy({
        policy: "static",
        fullPcpusOnly: false,
        distributeCpusAcrossNuma: false,
        topology,
        reservedSystemCpus: [0],
        reservedMilliCpu: 0,
        store: memoryStateStore(),
        statePath: "/tmp/cpu_manager_state",
      });
      const cpuManager = new PolicyCpuManager({
        policy,
        cri: { listContainers: async () => [], updateContainerResources: async () => {} },
        pods: { activePods: () => [] },
        sources: { allSourcesReady: () => false },
        reconcilePeriodMs: 10_000,
        clock: new FakeClock(0),
        logger: memoryLogger().logger,
      });
      const tm = new TopologyManager({
        policy: "restricted",
        scope: "container",
        options: { preferClosestNuma: false, maxAllowableNumaNodes: 8 },
        numa: { nodes: nodes.map((n) => n.id), distances: new Map(nodes.map((n) => [n.id, n.distances])) },
        providers: [cpuManager],
        logger: memoryLogger().logger,
      });
      const out: Record<string, unknown> = {};
      for (const [uid, cpus] of [
        ["two", 2],
        ["one", 1],
        ["more", 3],
      ] as const) {
        const p = guaranteed(uid, cpus);
        out[uid] = {
          hints: String(JSON.stringify(cpuManager.containerHints(p, p.spec.containers[0]!), bigints)),
          admit: tm.admit(p),
          cpus: policy.exclusiveCpus(uid, "c"),
        };
      }
      return out;
    },
  },
  {
    name: "numa-devices",
    async run(ctx) {
      const admitted: Pod[] = [];
      const m = await agentManagers({ cpuManagerPolicy: "static", reservedSystemCPUs: "0", topologyManagerPolicy: "single-numa-node" }, "/tmp/numa-devices", admitted);
      const plugin = new FakeDevicePlugin({ dir: "/tmp/numa-devices/device-plugins", resource: NUMA_DEVICE, endpoint: "numa.sock", devices: NUMA_DEVICES });
      try {
        await plugin.serve();
        await plugin.register();
        // Registered, dialed back and listed: the node's allocatable has the three devices.
        const t0 = Date.now();
        while (m.devices.nodeResources().allocatable[NUMA_DEVICE] !== "3") {
          if (Date.now() - t0 > 20_000) throw new Error(`the plugin's devices did not arrive: ${JSON.stringify(m.devices.nodeResources())}\n${m.log.lines.join("\n")}`);
          await Bun.sleep(50);
        }
        const events: { type: string; reason: string; message: string; object: string }[] = [];
        const statuses: Record<string, unknown> = {};
        const admission = new PodAdmission(m.config.kubelet, {
          facts: { name: "numa-vm", labels: {}, taints: [], allocatable: { cpu: 6000, memory: 2 ** 30, "ephemeral-storage": 2 ** 34, pods: 110 } },
          nodeShutdown: undefined,
          eviction: { admitPod: () => ({ admit: true }) },
          topology: m.topology,
          allocation: undefined,
        });
        // The pod syncer's admission step: a refused pod gets an event and a Failed status, never runs.
        const syncer = new HostPodSyncer({
          runtime: {} as never,
          admission,
          status: { set: (pod, s) => (statuses[pod.metadata.uid!] = s), delete() {} },
          clock: new FakeClock(0),
          logger: m.log.logger,
          recorder: { event: (o, type, reason, message) => events.push({ type, reason, message, object: `${o.kind}/${o.name}` }) },
        });
        const root = await cpusetRoot(ctx);
        const out: Record<string, unknown> = {};
        // split: 3 CPUs fit node 1 only, 2 devices node 0 only. aligned: node 1 (CPUs and its device). node0: what is left, all on node 0.
        for (const [uid, cpus, devs] of [
          ["split", 3, 2],
          ["aligned", 3, 1],
          ["node0", 2, 2],
        ] as const) {
          const pod = guaranteed(uid, cpus, devs);
          const admit = syncer.admitPod(pod, [...admitted]);
          if (!admit) {
            out[uid] = { admit, status: statuses[uid], cpus: m.cpuManager.exclusiveCpus(uid, "c"), devices: m.devices.allocations().get(uid) ?? null };
            continue;
          }
          admitted.push(pod);
          const cpuset = m.cpuManager.cpusetFor(pod, pod.spec.containers[0]!)!;
          const run = await m.devices.runOptions(pod, "c");
          const ids = m.devices.allocations().get(uid)?.get("c")?.get(NUMA_DEVICE) ?? [];
          out[uid] = { admit, cpuset, kernel: await runWithCpuset(ctx, root, uid, cpuset), devices: ids, env: run.envs };
        }
        return {
          pods: out,
          events,
          allocateCalls: plugin.calls.filter((c) => c.method === "Allocate").map((c) => c.ids),
          cpulists: nodeCpulists(ctx, [0, 1]),
          nodeResources: m.devices.nodeResources(),
        };
      } finally {
        plugin.kill();
        await m.stack.dispose();
      }
    },
  },
  {
    name: "numa-distribute",
    async run(ctx) {
      const root = await cpusetRoot(ctx);
      const out: Record<string, unknown> = {};
      // Each case on a fresh node: the CPU manager's options, the pod's CPUs.
      for (const [name, options, cpus] of [
        ["distributed-four", { "distribute-cpus-across-numa": "true" }, 4],
        ["distributed-two", { "distribute-cpus-across-numa": "true" }, 2],
        ["packed-four", undefined, 4],
      ] as const) {
        const admitted: Pod[] = [];
        const fields = { cpuManagerPolicy: "static", reservedSystemCPUs: "0", ...(options ? { cpuManagerPolicyOptions: options } : {}) };
        const m = await agentManagers(fields, `/tmp/numa-${name}`, admitted);
        try {
          const pod = guaranteed(name, cpus);
          const admit = m.topology.admit(pod);
          const cpuset = m.cpuManager.cpusetFor(pod, pod.spec.containers[0]!) ?? "";
          out[name] = { admit, topologyManagerPolicy: m.config.kubelet.topologyManagerPolicy, cpuset, kernel: admit.admit ? await runWithCpuset(ctx, root, name, cpuset) : null };
        } finally {
          await m.stack.dispose();
        }
      }
      return { pods: out, cpulists: nodeCpulists(ctx, [0, 1]) };
    },
  },
];
