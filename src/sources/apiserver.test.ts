import { describe, expect, test } from "bun:test";
import { ApiError } from "../api/errors.ts";
import { FakeKubeApi } from "../api/fake.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { ApiServerSource } from "./apiserver.ts";
import type { SourceSnapshot } from "./types.ts";

const pod = (name: string, nodeName = "n1", image = "busybox") => ({
  metadata: { name, namespace: "default" },
  spec: { nodeName, containers: [{ name: "c", image }] },
});

const settle = async () => {
  for (let i = 0; i < 10; i++) await Bun.sleep(0);
};

function setup() {
  const api = new FakeKubeApi();
  const clock = new FakeClock();
  const snapshots: SourceSnapshot[] = [];
  const source = new ApiServerSource({ api, nodeName: "n1", clock, logger: memoryLogger().logger });
  const names = () => snapshots.at(-1)?.pods.map((p) => p.metadata.name).sort();
  return { api, clock, source, snapshots, names, start: () => source.start((s) => snapshots.push(s)) };
}

describe("ApiServerSource", () => {
  test("lists this node's pods, then follows the watch", async () => {
    const { api, source, names, start } = setup();
    api.putPod(pod("a"));
    api.putPod(pod("other", "n2"));
    start();
    await settle();
    expect(names()).toEqual(["a"]);
    api.putPod(pod("b"));
    await settle();
    expect(names()).toEqual(["a", "b"]);
    api.removePod("default", "a");
    await settle();
    expect(names()).toEqual(["b"]);
    await source[Symbol.asyncDispose]();
  });

  test("a closed watch resumes from the last resourceVersion without listing again", async () => {
    const { api, source, start, names } = setup();
    api.putPod(pod("a"));
    start();
    await settle();
    api.bookmark();
    await settle();
    const rv = source.lastResourceVersion();
    api.closeWatches();
    await settle();
    api.putPod(pod("b"));
    await settle();
    expect(names()).toEqual(["a", "b"]);
    const watches = api.calls.filter((c) => c.method === "watchPods").map((c) => c.args[1]);
    expect(watches.at(-1)).toBe(rv);
    expect(api.calls.filter((c) => c.method === "listPods")).toHaveLength(1);
    await source[Symbol.asyncDispose]();
  });

  test("410 Gone makes it list again; other errors back off and retry", async () => {
    const { api, clock, source, start, names } = setup();
    api.putPod(pod("a"));
    api.failNext("watchPods", new ApiError("Expired", 410, "WATCH", "/api/v1/pods", "too old resource version"));
    start();
    await settle();
    expect(api.calls.filter((c) => c.method === "listPods")).toHaveLength(2);
    // A 410 ERROR event in the stream, and the relist fails once: back off, then list.
    api.failNext("listPods", new ApiError("Unreachable", 0, "GET", "/api/v1/pods", "connection refused"));
    api.expireWatches();
    await settle();
    expect(api.calls.filter((c) => c.method === "listPods")).toHaveLength(3);
    api.putPod(pod("b"));
    clock.advance(1000);
    await settle();
    expect(names()).toEqual(["a", "b"]);
    await source[Symbol.asyncDispose]();
  });
});
