import { expect, test } from "bun:test";
import { staleContainerEntries } from "./active.ts";
import type { Pod } from "./schema.ts";

const pod = (uid: string, containers: string[], init: string[] = []): Pod =>
  ({
    metadata: { uid, name: uid },
    spec: { containers: containers.map((name) => ({ name, image: "i" })), initContainers: init.map((name) => ({ name, image: "i" })) },
  }) as Pod;

test("stale entries are those of pods gone and of containers the active pod no longer names; init containers count", () => {
  const entries = { a: { app: 1, init: 2, old: 3 }, gone: { app: 4 } };
  expect(staleContainerEntries(entries, [pod("a", ["app"], ["init"])])).toEqual([
    { uid: "a", container: "old" },
    { uid: "gone", container: "app" },
  ]);
  expect(staleContainerEntries(entries, [pod("a", ["app", "old"], ["init"]), pod("gone", ["app"])])).toEqual([]);
  expect(staleContainerEntries({}, [])).toEqual([]);
});
