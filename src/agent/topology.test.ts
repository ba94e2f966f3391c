// buildTopologyManager over a fake sysfs: what stops the agent at start (exit 2: StartupConfigError) and what starts.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { configFromFields } from "../config/testing.ts";
import { FakeClock } from "../util/clock.ts";
import { DisposalStack } from "../util/disposal.ts";
import { StartupConfigError } from "../util/errors.ts";
import { memoryLogger } from "../util/log.ts";
import { buildTopologyManager } from "./node.ts";

const GiKb = 1024 * 1024;

/** A sysfs with `count` NUMA nodes of 4 GiB each; distances unless `noDistances`. */
function fakeSys(count: number, noDistances = false): string {
  const root = mkdtempSync(join(tmpdir(), "sys-"));
  for (let id = 0; id < count; id++) {
    const dir = join(root, "devices/system/node", `node${id}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "meminfo"), `Node ${id} MemTotal:       ${4 * GiKb} kB\n`);
    if (!noDistances) writeFileSync(join(dir, "distance"), Array.from({ length: count }, (_, j) => (j === id ? 10 : 20)).join(" "));
  }
  return root;
}

const noHints = { containerHints: () => undefined, podHints: () => undefined, allocate: () => undefined };

function build(fields: Record<string, unknown>, sys: string) {
  const rootDir = mkdtempSync(join(tmpdir(), "root-"));
  const config = configFromFields(fields, { rootDir, hostname: "n1" });
  const clock = new FakeClock(0);
  const logger = memoryLogger().logger;
  const w = { config, stack: new DisposalStack({ clock, logger }), clock, logger };
  const run = () =>
    buildTopologyManager(w, {
      node: { machine: { memoryBytes: 8 * 2 ** 30 } as never },
      pods: { activePods: () => [] } as never,
      sources: { allSourcesReady: () => true },
      devices: noHints,
      cpuManager: noHints,
      sysRoot: sys,
    });
  return { run, rootDir };
}

const startError = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    if (err instanceof StartupConfigError) return err.message;
    throw err;
  }
  return "started";
};

const staticConfig = (reserved: Record<string, string>[]) => ({
  memoryManagerPolicy: "Static",
  reservedMemory: reserved.map((limits, numaNode) => ({ numaNode, limits })),
  kubeReserved: { memory: "1Gi" },
  evictionHard: { "memory.available": "100Mi" },
});

describe("buildTopologyManager", () => {
  test("Static with reservedMemory that adds up: starts and writes memory_manager_state for both nodes", () => {
    const { run, rootDir } = build(staticConfig([{ memory: "1Gi" }, { memory: "100Mi" }]), fakeSys(2));
    expect(startError(run)).toBe("started");
    const state = JSON.parse(readFileSync(join(rootDir, "memory_manager_state"), "utf8"));
    expect(state.policyName).toBe("Static");
    expect(Object.keys(state.machineState)).toEqual(["0", "1"]);
    expect(state.machineState["1"].memoryMap.memory).toEqual({
      total: 4 * 2 ** 30,
      systemReserved: 100 * 2 ** 20,
      allocatable: 4 * 2 ** 30 - 100 * 2 ** 20,
      reserved: 0,
      free: 4 * 2 ** 30 - 100 * 2 ** 20,
    });
  });

  test("reservedMemory that does not add up, or names a node the host lacks: exit 2 naming the field", () => {
    expect(startError(build(staticConfig([{ memory: "1Gi" }]), fakeSys(2)).run)).toBe(
      'reservedMemory (--reserved-memory): the total amount "1Gi" of type "memory" is not equal to the value "1124Mi" determined by Node Allocatable feature (kubeReserved + systemReserved + evictionHard memory.available; NUMA nodes 0, 1 in /sys/devices/system/node)',
    );
    expect(startError(build(staticConfig([{ memory: "1Gi" }, { memory: "100Mi" }]), fakeSys(1)).run)).toContain(
      "reservedMemory (--reserved-memory): the reserved memory configuration references a NUMA node 1 that does not exist on this machine",
    );
  });

  test("the None policy writes upstream's empty state file, as upstream", () => {
    const { run, rootDir } = build({}, fakeSys(1));
    expect(startError(run)).toBe("started");
    expect(JSON.parse(readFileSync(join(rootDir, "memory_manager_state"), "utf8"))).toEqual({ policyName: "None", machineState: {}, checksum: expect.any(Number) });
  });

  test("max-allowable-numa-nodes: more NUMA nodes than allowed stop a policy other than none; the option raises the limit", () => {
    const nine = fakeSys(9);
    expect(startError(build({ topologyManagerPolicy: "best-effort" }, nine).run)).toBe(
      'topologyManagerPolicy "best-effort": unsupported on machines with more than 8 NUMA Nodes (max-allowable-numa-nodes)',
    );
    expect(startError(build({ topologyManagerPolicy: "none" }, nine).run)).toBe("started");
    expect(startError(build({ topologyManagerPolicy: "best-effort", topologyManagerPolicyOptions: { "max-allowable-numa-nodes": "9" } }, nine).run)).toBe("started");
  });

  test("prefer-closest-numa-nodes needs the kernel's distances", () => {
    const opts = { topologyManagerPolicy: "restricted", topologyManagerPolicyOptions: { "prefer-closest-numa-nodes": "true" } };
    expect(startError(build(opts, fakeSys(2, true)).run)).toContain("prefer-closest-numa-nodes: cannot discover NUMA topology");
    const ok = build(opts, fakeSys(2));
    expect(startError(ok.run)).toBe("started");
    expect(existsSync(join(ok.rootDir, "memory_manager_state"))).toBe(true);
  });
});
