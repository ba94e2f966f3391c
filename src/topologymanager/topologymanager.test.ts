import { describe, expect, test } from "bun:test";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { memoryLogger } from "../util/log.ts";
import { type HintProvider, TopologyManager } from "./manager.ts";
import { maskOf, mergePolicy, type NumaInfo, parsePolicyOptions, type PolicyOptions, type ProviderHints, type TopologyHint } from "./policy.ts";

const opts: PolicyOptions = { preferClosestNuma: false, maxAllowableNumaNodes: 8 };
const two: NumaInfo = { nodes: [0, 1], distances: new Map() };
const h = (nodes: number[] | undefined, preferred: boolean): TopologyHint => ({ affinity: nodes ? maskOf(nodes) : undefined, preferred });

describe("policy options", () => {
  test("prefer-closest-numa-nodes and max-allowable-numa-nodes as upstream; anything else is refused naming it", () => {
    expect(parsePolicyOptions({}, true)).toEqual({ preferClosestNuma: false, maxAllowableNumaNodes: 8 });
    expect(parsePolicyOptions({ "prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "16" }, true)).toEqual({ preferClosestNuma: true, maxAllowableNumaNodes: 16 });
    expect(() => parsePolicyOptions({ "align-by-socket": "true" }, true)).toThrow('unknown Topology Manager Policy option: "align-by-socket"');
    expect(() => parsePolicyOptions({ "max-allowable-numa-nodes": "10" }, false)).toThrow(
      'topology manager policy beta-level options not enabled, but option "max-allowable-numa-nodes" provided',
    );
    expect(() => parsePolicyOptions({ "max-allowable-numa-nodes": "4" }, true)).toThrow('the minimum value of "max-allowable-numa-nodes" should not be less than 8');
    expect(() => parsePolicyOptions({ "max-allowable-numa-nodes": "x" }, true)).toThrow('unable to convert policy option to integer "max-allowable-numa-nodes"');
    expect(() => parsePolicyOptions({ "prefer-closest-numa-nodes": "yes" }, true)).toThrow('bad value for option "prefer-closest-numa-nodes"');
  });
});

describe("merging hints (upstream policy tests' cases)", () => {
  test("no provider preference: the default affinity, preferred", () => {
    expect(mergePolicy("best-effort", two, opts, [undefined, {}])).toEqual({ hint: h([0, 1], true), admit: true });
  });
  test("two providers agreeing on node 0 and 1: the narrowest common node wins", () => {
    const a: ProviderHints = { cpu: [h([0], true), h([1], true), h([0, 1], false)] };
    const b: ProviderHints = { memory: [h([1], true), h([0, 1], false)] };
    expect(mergePolicy("restricted", two, opts, [a, b])).toEqual({ hint: h([1], true), admit: true });
  });
  test("no common preferred node: best-effort admits the widest, restricted and single-numa-node refuse", () => {
    const a: ProviderHints = { cpu: [h([0], true)] };
    const b: ProviderHints = { memory: [h([1], true)] };
    expect(mergePolicy("best-effort", two, opts, [a, b]).admit).toBe(true);
    expect(mergePolicy("restricted", two, opts, [a, b])).toEqual({ hint: h([0, 1], false), admit: false });
    expect(mergePolicy("single-numa-node", two, opts, [a, b]).admit).toBe(false);
  });
  test("a resource that fits nowhere ([]): not preferred, refused by restricted", () => {
    expect(mergePolicy("restricted", two, opts, [{ memory: [] }])).toEqual({ hint: h([0, 1], false), admit: false });
  });
  test("single-numa-node: a hint of two nodes is dropped; a single node on a one-node host is no preference", () => {
    expect(mergePolicy("single-numa-node", two, opts, [{ memory: [h([0, 1], true)] }]).admit).toBe(false);
    expect(mergePolicy("single-numa-node", { nodes: [0], distances: new Map() }, opts, [{ memory: [h([0], true)] }])).toEqual({ hint: h(undefined, true), admit: true });
  });
  test("prefer-closest-numa-nodes: among equally wide hints the closer pair wins over the lower-numbered", () => {
    const four: NumaInfo = {
      nodes: [0, 1, 2, 3],
      distances: new Map([
        [0, [10, 32, 11, 32]],
        [1, [32, 10, 32, 11]],
        [2, [11, 32, 10, 32]],
        [3, [32, 11, 32, 10]],
      ]),
    };
    const hints: ProviderHints = { memory: [h([0, 1], true), h([0, 2], true)] };
    expect(mergePolicy("best-effort", four, opts, [hints]).hint).toEqual(h([0, 1], true));
    expect(mergePolicy("best-effort", four, { ...opts, preferClosestNuma: true }, [hints]).hint).toEqual(h([0, 2], true));
  });
});

describe("scopes", () => {
  const pod = { metadata: { name: "p", uid: "u" }, spec: { containers: [{ name: "a" }, { name: "b" }] } } as unknown as Pod;
  const recorder = (hints: ProviderHints) => {
    const calls: string[] = [];
    const p: HintProvider = {
      containerHints: (_p: Pod, c: ContainerSpec) => (calls.push(`hints ${c.name}`), hints),
      podHints: () => (calls.push("pod hints"), hints),
      allocate: (_p: Pod, c: ContainerSpec, hint: TopologyHint | undefined) => (calls.push(`allocate ${c.name} ${hint ? hint.preferred : "none"}`), undefined),
    };
    return { p, calls };
  };
  const tm = (policy: "none" | "restricted", scope: "container" | "pod", p: HintProvider) =>
    new TopologyManager({ policy, scope, options: opts, numa: two, providers: [p], logger: memoryLogger().logger });
  test("container scope asks per container, pod scope once; none asks nothing", () => {
    const c = recorder({ memory: [h([0], true)] });
    expect(tm("restricted", "container", c.p).admit(pod)).toEqual({ admit: true });
    expect(c.calls).toEqual(["hints a", "allocate a true", "hints b", "allocate b true"]);
    const p = recorder({ memory: [h([0], true)] });
    expect(tm("restricted", "pod", p.p).admit(pod)).toEqual({ admit: true });
    expect(p.calls).toEqual(["pod hints", "allocate a true", "allocate b true"]);
    const n = recorder({ memory: [] });
    expect(tm("none", "pod", n.p).admit(pod)).toEqual({ admit: true });
    expect(n.calls).toEqual(["allocate a none", "allocate b none"]);
  });
  test("a refused merge is upstream's TopologyAffinityError and allocates nothing", () => {
    const c = recorder({ memory: [] });
    expect(tm("restricted", "pod", c.p).admit(pod)).toEqual({ admit: false, reason: "TopologyAffinityError", message: "Resources cannot be allocated with Topology locality" });
    expect(c.calls).toEqual(["pod hints"]);
  });
});
