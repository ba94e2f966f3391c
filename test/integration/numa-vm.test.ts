// NUMA alignment on a real two-node kernel: Debian's cloud kernel in qemu with two NUMA nodes of three
// CPUs each (CPUs 0-2 on node 0, 3-5 on node 1), each CPU its own socket (measured: `sockets=2,cores=3`
// never finished booting, stop_machine soft-locked on every CPU, with thread=single too; qemu's threads=2
// under TCG showed no thread siblings in sysfs) boots the probe with
// bunlet.probe=numa (test/vm/checks/numa.ts), which reads the topology from the VM's sysfs as the agent does,
// admits pods through the topology manager with the static CPU manager and the device manager as hint
// providers (a device plugin over real gRPC with devices on both nodes), and writes their cpusets into
// cgroups, where the kernel reports the CPUs a process in them may run on.
// Missing qemu or kernel FAILS this test (scripts/setup.sh installs them); it never skips.
import { beforeAll, describe, expect, test } from "bun:test";
import { buildInitramfs } from "../../scripts/vm/initramfs.ts";
import { requireVm, runVm } from "../../scripts/vm/run.ts";
import { parseCpuSet } from "../../src/util/cpuset.ts";
import { NUMA_DEVICE } from "../vm/checks/numa.ts";
import { parseProbeOutput, type ProbeResult } from "../vm/protocol.ts";

let result: ProbeResult;

beforeAll(async () => {
  const { kernel } = requireVm();
  const initramfs = await buildInitramfs();
  const run = await runVm({
    initramfs: initramfs.path,
    kernel,
    timeoutMs: 120_000,
    memoryMb: 1024,
    smp: "6,sockets=6,cores=1,threads=1",
    numa: [
      { cpus: "0-2", memoryMb: 512 },
      { cpus: "3-5", memoryMb: 512 },
    ],
    append: "bunlet.probe=numa",
  });
  if (run.timedOut) throw new Error(`the VM did not power off within 120 s; output:\n${run.output.slice(-4000)}`);
  result = parseProbeOutput(run.output);
  console.error(`NUMA VM: initramfs ${initramfs.built ? "built" : "cached"} in ${initramfs.ms} ms, VM ${run.ms} ms, probe ${result.ms} ms`);
}, 200_000);

function value<T>(name: string): T {
  const r = result.checks[name];
  if (!r) throw new Error(`the probe did not run check ${name}`);
  if (!r.ok) throw new Error(`check ${name} failed in the VM:\n${r.error}`);
  return r.value as T;
}

/** How many of `cpus` (a cpuset) each NUMA node holds, by the VM's sysfs cpulists. */
const perNode = (cpus: string, cpulists: Record<string, string>) =>
  Object.fromEntries(Object.entries(cpulists).map(([node, list]) => [node, parseCpuSet(cpus).filter((c) => parseCpuSet(list).includes(c)).length]));

type Kernel = { cpusetCpus: string; effective: string; allowed: string };
/** The container cgroup's cpuset.cpus, cpuset.cpus.effective and a process's Cpus_allowed_list in it: all `cpus`. */
const runsOn = (cpus: string): Kernel => ({ cpusetCpus: cpus, effective: cpus, allowed: cpus });

describe("NUMA alignment on a two-node kernel (qemu)", () => {
  test("sysfs shows two NUMA nodes of three CPUs (each its own socket), with their distances", () => {
    const t = value<{ cpus: unknown[]; nodes: { id: number; memoryMiB: number; distances: number[] }[]; cpulists: Record<string, string> }>("numa-topology");
    expect(t.cpus).toEqual([
      { cpu: 0, core: 0, socket: 0, numa: 0 },
      { cpu: 1, core: 1, socket: 1, numa: 0 },
      { cpu: 2, core: 2, socket: 2, numa: 0 },
      { cpu: 3, core: 3, socket: 3, numa: 1 },
      { cpu: 4, core: 4, socket: 4, numa: 1 },
      { cpu: 5, core: 5, socket: 5, numa: 1 },
    ]);
    expect(t.nodes.map((n) => [n.id, n.distances])).toEqual([
      [0, [10, 20]],
      [1, [20, 10]],
    ]);
    expect(t.cpulists).toEqual({ "0": "0-2", "1": "3-5" });
    for (const n of t.nodes) expect(n.memoryMiB).toBeGreaterThan(300);
  });

  test("restricted: 2 CPUs go to node 0 (the narrowest preferred hint, lowest first; CPU 0 reserved), 1 CPU to node 1, and 3 more CPUs (2 left) are refused with TopologyAffinityError", () => {
    const r = value<Record<string, { hints: string; admit: unknown; cpus: number[] }>>("numa-restricted-cpus");
    expect(r["two"]).toEqual({
      hints: JSON.stringify({
        cpu: [
          { affinity: 1, preferred: true },
          { affinity: 2, preferred: true },
          { affinity: 3, preferred: false },
        ],
      }),
      admit: { admit: true },
      cpus: [1, 2],
    });
    expect(r["one"]).toEqual({
      hints: JSON.stringify({
        cpu: [
          { affinity: 2, preferred: true },
          { affinity: 3, preferred: false },
        ],
      }),
      admit: { admit: true },
      cpus: [3],
    });
    expect(r["more"]).toEqual({
      hints: JSON.stringify({ cpu: [] }),
      admit: { admit: false, reason: "TopologyAffinityError", message: "Resources cannot be allocated with Topology locality" },
      cpus: [],
    });
  });

  describe("single-numa-node with a device plugin's devices on both nodes (the agent's wiring from a KubeletConfiguration)", () => {
    type Admitted = { admit: true; cpuset: string; kernel: Kernel; devices: string[]; env: { key: string; value: string }[] };
    const devices = () =>
      value<{
        pods: Record<string, Admitted | { admit: false; status: Record<string, unknown>; cpus: number[]; devices: unknown }>;
        events: { type: string; reason: string; message: string; object: string }[];
        allocateCalls: string[][];
        cpulists: Record<string, string>;
        nodeResources: { capacity: Record<string, string>; allocatable: Record<string, string> };
      }>("numa-devices");

    test("the plugin registers over gRPC and its three devices are the node's capacity and allocatable", () => {
      expect(devices().nodeResources).toEqual({ capacity: { [NUMA_DEVICE]: "3" }, allocatable: { [NUMA_DEVICE]: "3" } });
    });

    test("a pod whose CPUs fit only node 1 and whose devices only node 0 is refused: TopologyAffinityError, a Warning event, Failed; nothing kept", () => {
      const d = devices();
      expect(d.pods["split"]).toEqual({
        admit: false,
        status: expect.objectContaining({ phase: "Failed", reason: "TopologyAffinityError", message: "Resources cannot be allocated with Topology locality" }),
        cpus: [],
        devices: null,
      });
      expect(d.events).toEqual([{ type: "Warning", reason: "TopologyAffinityError", message: "Resources cannot be allocated with Topology locality", object: "Pod/split" }]);
    });

    test("3 CPUs + 1 device: node 1's CPUs and node 1's device, Allocate'd through the plugin; the kernel runs the container on node 1 only", () => {
      const d = devices();
      expect(d.pods["aligned"]).toEqual({ admit: true, cpuset: "3-5", kernel: runsOn("3-5"), devices: ["dev-1a"], env: [{ key: "FAKE_DEVICES", value: "dev-1a" }] });
      expect(perNode("3-5", d.cpulists)).toEqual({ "0": 0, "1": 3 });
    });

    test("then 2 CPUs + 2 devices (what the refused pod would have taken is free again): all on node 0", () => {
      const d = devices();
      expect(d.pods["node0"]).toEqual({
        admit: true,
        cpuset: "1-2",
        kernel: runsOn("1-2"),
        devices: ["dev-0a", "dev-0b"],
        env: [{ key: "FAKE_DEVICES", value: "dev-0a,dev-0b" }],
      });
      expect(perNode("1-2", d.cpulists)).toEqual({ "0": 2, "1": 0 });
      expect(d.allocateCalls).toEqual([["dev-1a"], ["dev-0a", "dev-0b"]]);
    });
  });

  describe("cpuManagerPolicyOptions distribute-cpus-across-numa (CPU 0 reserved: node 0 has 2 free, node 1 has 3)", () => {
    const distribute = () =>
      value<{ pods: Record<string, { admit: unknown; topologyManagerPolicy: string; cpuset: string; kernel: Kernel | null }>; cpulists: Record<string, string> }>(
        "numa-distribute",
      );

    test("4 CPUs, more than a node holds: 2 on each node (packed without the option: node 1 whole, as upstream's NUMA-first take, and 1 on node 0); the kernel agrees", () => {
      const d = distribute();
      expect(d.pods["distributed-four"]).toEqual({ admit: { admit: true }, topologyManagerPolicy: "none", cpuset: "1-4", kernel: runsOn("1-4") });
      expect(perNode("1-4", d.cpulists)).toEqual({ "0": 2, "1": 2 });
      expect(d.pods["packed-four"]).toEqual({ admit: { admit: true }, topologyManagerPolicy: "none", cpuset: "1,3-5", kernel: runsOn("1,3-5") });
      expect(perNode("1,3-5", d.cpulists)).toEqual({ "0": 1, "1": 3 });
    });

    test("2 CPUs, which one node holds, stay on one node: the one that leaves the free CPUs most balanced (node 1), as upstream", () => {
      const d = distribute();
      expect(d.pods["distributed-two"]).toEqual({ admit: { admit: true }, topologyManagerPolicy: "none", cpuset: "3-4", kernel: runsOn("3-4") });
      expect(perNode("3-4", d.cpulists)).toEqual({ "0": 0, "1": 2 });
    });
  });
});
