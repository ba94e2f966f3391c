import { describe, expect, test } from "bun:test";
import type { AdmitResult, NodeFacts } from "../node/admission.ts";
import type { Pod } from "../pods/schema.ts";
import { PodAdmission, type AdmissionSources } from "./pod-workers.ts";

const facts: NodeFacts = { name: "n1", labels: {}, taints: [], allocatable: { cpu: 1000, memory: 1024 ** 3, "ephemeral-storage": 1024 ** 3, pods: 10 } };
const pod = (cpu = "100m"): Pod => ({
  metadata: { name: "p", namespace: "default", uid: "u1" },
  spec: { containers: [{ name: "c", image: "i", resources: { requests: { cpu } } }] },
});
const refuse = (reason: string): AdmitResult => ({ admit: false, reason, message: reason });
const admit: AdmitResult = { admit: true };

/** Every check admits and records that it was asked; `over` makes one refuse. */
function setup(over: Partial<Record<"shutdown" | "topology", AdmitResult>> & { evicted?: boolean } = {}, allocated?: (p: Pod) => Pod) {
  const asked: string[] = [];
  const sources: AdmissionSources = {
    facts,
    nodeShutdown: { admit: () => (asked.push("shutdown"), over.shutdown ?? admit) },
    eviction: {
      admitPod: () => (
        asked.push("eviction"), over.evicted ? ({ admit: false, reason: "Evicted", message: "The node had condition: [MemoryPressure]." } as const) : ({ admit: true } as const)
      ),
    },
    topology: { admit: (p) => (asked.push(`topology ${p.spec.containers[0]?.resources?.requests?.["cpu"]}`), over.topology ?? admit) },
    allocation: allocated ? { allocatedPod: allocated } : undefined,
  };
  const admission = new PodAdmission({ allowedUnsafeSysctls: [], featureGates: {} }, sources);
  return { asked, admit: (p: Pod, active: Pod[]) => admission.admit(p, active) };
}

describe("PodAdmission", () => {
  test("upstream's order: node shutdown, eviction, the topology manager (devices, CPUs, NUMA memory), then the resource predicates", () => {
    const s = setup();
    expect(s.admit(pod(), [])).toEqual({ admit: true });
    expect(s.asked).toEqual(["shutdown", "eviction", "topology 100m"]);
    const refused = setup({ topology: { admit: false, reason: "TopologyAffinityError", message: "Resources cannot be allocated with Topology locality" } });
    expect(refused.admit(pod(), [])).toMatchObject({ admit: false, reason: "TopologyAffinityError" });
    expect(setup().admit(pod("2"), [])).toMatchObject({ admit: false, reason: "OutOfcpu" });
  });

  test("the first refusal is the answer; later checks are not asked (a device or CPU is not reserved for a refused pod)", () => {
    const shutdown = setup({ shutdown: refuse("NodeShutdown"), evicted: true });
    expect(shutdown.admit(pod(), [])).toMatchObject({ reason: "NodeShutdown" });
    expect(shutdown.asked).toEqual(["shutdown"]);
    const pressure = setup({ evicted: true });
    expect(pressure.admit(pod(), [])).toMatchObject({ reason: "Evicted" });
    expect(pressure.asked).toEqual(["shutdown", "eviction"]);
    const devices = setup({ topology: refuse("UnexpectedAdmissionError") });
    expect(devices.admit(pod(), [])).toMatchObject({ reason: "UnexpectedAdmissionError" });
    expect(devices.asked).toEqual(["shutdown", "eviction", "topology 100m"]);
  });

  test("a sysctl outside the allowlist is refused before devices are allocated", () => {
    const s = setup();
    const unsafe = { ...pod(), spec: { ...pod().spec, securityContext: { sysctls: [{ name: "kernel.msgmax", value: "1" }] } } } as Pod;
    expect(s.admit(unsafe, [])).toMatchObject({ admit: false, reason: "SysctlForbidden" });
    expect(s.asked).toEqual(["shutdown", "eviction"]);
  });

  test("CPUs and resources count the pod as allocated, not as its pending resize asks", () => {
    const s = setup({}, () => pod("200m"));
    expect(s.admit(pod("5"), [])).toEqual({ admit: true });
    expect(s.asked.at(-1)).toBe("topology 200m");
  });
});
