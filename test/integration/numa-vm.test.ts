// NUMA alignment on a real two-node kernel: Debian's cloud kernel in qemu with two NUMA nodes (one socket
// each, two cores per socket: CPUs 0-1 on node 0, 2-3 on node 1; qemu's threads=2 under TCG showed no
// thread siblings in sysfs, so cores are what it gives) boots the probe with
// bunlet.probe=numa (test/vm/checks/numa.ts), which reads the topology from the VM's sysfs as the agent does
// and admits pods through the topology manager (restricted) with the static CPU manager as hint provider.
// Missing qemu or kernel FAILS this test (scripts/setup.sh installs them); it never skips.
import { beforeAll, describe, expect, test } from "bun:test";
import { buildInitramfs } from "../../scripts/vm/initramfs.ts";
import { requireVm, runVm } from "../../scripts/vm/run.ts";
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
    smp: "4,sockets=2,cores=2,threads=1",
    numa: [
      { cpus: "0-1", memoryMb: 512 },
      { cpus: "2-3", memoryMb: 512 },
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

describe("NUMA alignment on a two-node kernel (qemu)", () => {
  test("sysfs shows two NUMA nodes, each one socket of two cores, with their distances", () => {
    const t = value<{ cpus: unknown[]; nodes: { id: number; memoryMiB: number; distances: number[] }[] }>("numa-topology");
    expect(t.cpus).toEqual([
      { cpu: 0, core: 0, socket: 0, numa: 0 },
      { cpu: 1, core: 1, socket: 0, numa: 0 },
      { cpu: 2, core: 2, socket: 1, numa: 1 },
      { cpu: 3, core: 3, socket: 1, numa: 1 },
    ]);
    expect(t.nodes.map((n) => [n.id, n.distances])).toEqual([
      [0, [10, 20]],
      [1, [20, 10]],
    ]);
    for (const n of t.nodes) expect(n.memoryMiB).toBeGreaterThan(300);
  });

  test("restricted: 2 CPUs go to node 1 (node 0 keeps reserved CPU 0), 1 CPU to node 0, and a third pod is refused with TopologyAffinityError", () => {
    const r = value<Record<string, { hints: string; admit: unknown; cpus: number[] }>>("numa-restricted-cpus");
    expect(r["two"]).toEqual({
      hints: JSON.stringify({
        cpu: [
          { affinity: 2, preferred: true },
          { affinity: 3, preferred: false },
        ],
      }),
      admit: { admit: true },
      cpus: [2, 3],
    });
    expect(r["one"]).toEqual({
      hints: JSON.stringify({
        cpu: [
          { affinity: 1, preferred: true },
          { affinity: 3, preferred: false },
        ],
      }),
      admit: { admit: true },
      cpus: [1],
    });
    expect(r["more"]).toEqual({
      hints: JSON.stringify({ cpu: [] }),
      admit: { admit: false, reason: "TopologyAffinityError", message: "Resources cannot be allocated with Topology locality" },
      cpus: [],
    });
  });
});
