import { describe, expect, test } from "bun:test";
import { AsyncQueue, matchesLabels, nsFromMs, wireName } from "./fake-util.ts";
import { normalizeImageRef } from "./image-ref.ts";

describe("normalizeImageRef", () => {
  const table: [string, string][] = [
    ["busybox", "docker.io/library/busybox:latest"],
    ["busybox:1.36", "docker.io/library/busybox:1.36"],
    ["library/busybox", "docker.io/library/busybox:latest"],
    ["user/app:v1", "docker.io/user/app:v1"],
    ["registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"],
    ["localhost/bunlet/busybox:1.0", "localhost/bunlet/busybox:1.0"],
    ["localhost:5000/app", "localhost:5000/app:latest"],
    ["nginx@sha256:abc", "docker.io/library/nginx@sha256:abc"],
    ["sha256:0123abcd", "sha256:0123abcd"],
  ];
  for (const [input, want] of table) test(`${input} -> ${want}`, () => expect(normalizeImageRef(input)).toBe(want));
});

test("label selectors match every given key exactly", () => {
  expect(matchesLabels({ a: "1", b: "2" }, undefined)).toBe(true);
  expect(matchesLabels({ a: "1", b: "2" }, {})).toBe(true);
  expect(matchesLabels({ a: "1", b: "2" }, { a: "1" })).toBe(true);
  expect(matchesLabels({ a: "1" }, { a: "1", b: "2" })).toBe(false);
  expect(matchesLabels({ a: "1" }, { a: "2" })).toBe(false);
});

test("wire names and nanoseconds", () => {
  expect(wireName("runPodSandbox")).toBe("RunPodSandbox");
  expect(wireName("containerEvents")).toBe("GetContainerEvents");
  expect(wireName("imageFsInfo")).toBe("ImageFsInfo");
  expect(nsFromMs(1500.7)).toBe(1_500_000_000n);
});

test("AsyncQueue delivers pushed items in order and ends after draining", async () => {
  const q = new AsyncQueue<number>();
  q.push(1);
  const got: number[] = [];
  const done = (async () => {
    for await (const x of q) got.push(x);
  })();
  q.push(2);
  await Bun.sleep(0);
  q.push(3);
  q.end();
  q.push(4);
  await done;
  expect(got).toEqual([1, 2, 3]);
});
