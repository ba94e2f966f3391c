import { describe, expect, test } from "bun:test";
import type { ContainerState, RuntimePodRecord } from "../runtime/types.ts";
import { diffRelists } from "./diff.ts";

const rec = (uid: string, entities: Record<string, ContainerState>): [string, RuntimePodRecord] => [
  uid,
  { uid, name: uid, namespace: "default", entities: new Map(Object.entries(entities)) },
];

describe("diffRelists", () => {
  test("start, death, removal and unchanged", () => {
    const before = new Map([rec("a", { c1: "running", c2: "exited", c3: "running" }), rec("b", { c4: "running" })]);
    const after = new Map([rec("a", { c1: "exited", c3: "running", c5: "running" }), rec("b", { c4: "running" })]);
    expect(diffRelists(before, after)).toEqual([
      { uid: "a", type: "ContainerDied", id: "c1", state: "exited" },
      { uid: "a", type: "ContainerRemoved", id: "c2", state: "nonexistent" },
      { uid: "a", type: "ContainerStarted", id: "c5", state: "running" },
    ]);
  });

  test("a running container that vanished is reported died then removed", () => {
    expect(diffRelists(new Map([rec("a", { c1: "running" })]), new Map())).toEqual([
      { uid: "a", type: "ContainerDied", id: "c1", state: "nonexistent" },
      { uid: "a", type: "ContainerRemoved", id: "c1", state: "nonexistent" },
    ]);
  });

  test("first relist reports everything that runs", () => {
    expect(diffRelists(new Map(), new Map([rec("a", { c1: "running", c2: "created" })]))).toEqual([
      { uid: "a", type: "ContainerStarted", id: "c1", state: "running" },
      { uid: "a", type: "ContainerChanged", id: "c2", state: "created" },
    ]);
  });
});
