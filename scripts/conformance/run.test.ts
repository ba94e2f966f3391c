import { expect, test } from "bun:test";
import { differences, specStates, summarize } from "./run.ts";

const spec = (name: string, State: string, message?: string, NumAttempts = 1) => ({
  ContainerHierarchyTexts: ["[sig-node] Pods"],
  LeafNodeText: name,
  LeafNodeType: "It",
  State,
  NumAttempts,
  RunTime: 1e9,
  ...(message ? { Failure: { Message: `\n${message}\nmore` } } : {}),
});

const upstream = [
  {
    RunTime: 125e9,
    SpecReports: [
      { LeafNodeText: "", LeafNodeType: "SynchronizedBeforeSuite", State: "passed", NumAttempts: 1, RunTime: 1 },
      spec("a", "passed"),
      spec("b", "failed", "dummy: Operation not supported"),
      spec("c", "passed"),
      spec("filtered out", "skipped", undefined, 0),
      spec("e", "passed"),
    ],
  },
];
const bunlet = [
  { RunTime: 99e9, SpecReports: [spec("a", "passed"), spec("b", "failed", "dummy: Operation not supported"), spec("c", "timedout", "timed out"), spec("d", "passed")] },
];

test("each spec that ran, by full name, with its failure's first line", () => {
  const states = specStates(upstream);
  expect([...states.keys()]).toEqual(["[sig-node] Pods a", "[sig-node] Pods b", "[sig-node] Pods c", "[sig-node] Pods e"]);
  expect(states.get("[sig-node] Pods b")).toEqual({ state: "failed", message: "dummy: Operation not supported" });
  expect(states.get("[sig-node] Pods a")).toEqual({ state: "passed", message: "" });
  expect(summarize(upstream)).toMatchObject({ passed: 3, skipped: 0, wallSeconds: 125 });
});

test("the specs whose result differs between two runs, one only one of them ran included", () => {
  const d = differences(specStates(bunlet), specStates(upstream));
  expect(d.map((x) => x.name)).toEqual(["[sig-node] Pods c", "[sig-node] Pods d", "[sig-node] Pods e"]);
  expect(d[0]).toEqual({ name: "[sig-node] Pods c", a: { state: "timedout", message: "timed out" }, b: { state: "passed", message: "" } });
  expect(d[1]?.b).toBeUndefined();
  expect(d[2]?.a).toBeUndefined();
  expect(differences(specStates(upstream), specStates(upstream))).toEqual([]);
});
