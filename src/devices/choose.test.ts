import { describe, expect, test } from "bun:test";
import { type ChoiceInput, type Placement, planDevices } from "./choose.ts";

/** Devices a0..: aligned with the container's affinity, u0..: on other NUMA nodes, n0..: without topology. */
const place = (id: string): Placement => (id.startsWith("a") ? "aligned" : id.startsWith("u") ? "unaligned" : "none");
const input = (required: number, available: string[], reusable: string[] = []): ChoiceInput => ({
  resource: "example.com/dev",
  required,
  reusable,
  available,
  placement: place,
});

describe("planDevices (upstream devicesToAllocate)", () => {
  test("the pod's reusable devices first: enough of them and the plugin is not asked", () => {
    const plan = planDevices(input(2, ["a0", "a1"], ["n5", "n6", "n7"]));
    expect(plan.question).toBeUndefined();
    expect(plan.choose(undefined)).toEqual({ ok: true, ids: ["n5", "n6"] });
  });

  test("fewer needed than aligned devices: the plugin chooses among the aligned only, reusable ones included and required", () => {
    const plan = planDevices(input(3, ["a0", "a1", "a2", "u0", "n0"], ["n9"]));
    expect(plan.question).toEqual({ available: ["a0", "a1", "a2", "n9"], mustInclude: ["n9"], size: 3 });
    expect(plan.choose(["n9", "a2", "a1"])).toEqual({ ok: true, ids: ["n9", "a2", "a1"] });
    // Not offered (unaligned, unknown) IDs of the answer are ignored; the rest comes from the aligned ones.
    expect(plan.choose(["u0", "bogus", "a2"])).toEqual({ ok: true, ids: ["n9", "a2", "a0"] });
    expect(plan.choose([])).toEqual({ ok: true, ids: ["n9", "a0", "a1"] });
    expect(plan.choose(undefined)).toEqual({ ok: true, ids: ["n9", "a0", "a1"] });
  });

  test("exactly as many aligned as needed: all of them, without asking", () => {
    const plan = planDevices(input(2, ["a0", "a1", "u0", "n0"]));
    expect(plan.question).toBeUndefined();
    expect(plan.choose(undefined)).toEqual({ ok: true, ids: ["a0", "a1"] });
  });

  test("more needed than aligned: every aligned device, then the plugin's among all available, then unaligned before no topology", () => {
    const plan = planDevices(input(3, ["a0", "n0", "n1", "u0", "u1"]));
    expect(plan.question).toEqual({ available: ["n0", "n1", "u0", "u1", "a0"], mustInclude: ["a0"], size: 3 });
    expect(plan.choose(["a0", "n1", "n0"])).toEqual({ ok: true, ids: ["a0", "n1", "n0"] });
    expect(plan.choose(["n1"])).toEqual({ ok: true, ids: ["a0", "n1", "u0"] });
    expect(plan.choose(undefined)).toEqual({ ok: true, ids: ["a0", "u0", "u1"] });
  });

  test("no affinity (every device 'none'): the plugin is offered all available devices", () => {
    const plan = planDevices(input(1, ["n0", "n1", "n2"]));
    expect(plan.question).toEqual({ available: ["n0", "n1", "n2"], mustInclude: [], size: 1 });
    expect(plan.choose(["n2"])).toEqual({ ok: true, ids: ["n2"] });
  });

  test("too few available: upstream's error, and nothing to ask", () => {
    const plan = planDevices(input(4, ["a0", "n0"], ["n9"]));
    expect(plan.question).toBeUndefined();
    expect(plan.choose(undefined)).toEqual({ ok: false, error: "requested number of devices unavailable for example.com/dev. Requested: 3, Available: 2" });
  });
});
