import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { PodConfig } from "./podconfig.ts";

const pod = (uid: string, image = "busybox"): Pod => ({
  metadata: { name: `p-${uid}`, namespace: "default", uid },
  spec: { containers: [{ name: "c", image }] },
});

describe("PodConfig", () => {
  test("turns snapshots into adds, updates and removes", () => {
    const config = new PodConfig(["file"]);
    expect(config.allSourcesReady()).toBe(false);
    expect(config.apply({ source: "file", pods: [pod("a"), pod("b")] })).toEqual([{ op: "add", source: "file", pods: [pod("a"), pod("b")] }]);
    expect(config.allSourcesReady()).toBe(true);
    expect(config.apply({ source: "file", pods: [pod("a"), pod("b")] })).toEqual([]);
    expect(config.apply({ source: "file", pods: [pod("a", "nginx"), pod("c")] })).toEqual([
      { op: "remove", source: "file", pods: [pod("b")] },
      { op: "add", source: "file", pods: [pod("c")] },
      { op: "update", source: "file", pods: [pod("a", "nginx")] },
    ]);
    expect(config.desiredPods().map((p) => p.metadata.uid)).toEqual(["a", "c"]);
  });

  test("waits for every configured source before reporting ready", () => {
    const config = new PodConfig(["file", "api"]);
    config.apply({ source: "file", pods: [] });
    expect(config.allSourcesReady()).toBe(false);
    config.apply({ source: "api", pods: [] });
    expect(config.allSourcesReady()).toBe(true);
  });

  test("a provisional view (the offline checkpoint) runs its pods but is not ready; the real view replaces it by UID", () => {
    const config = new PodConfig(["api"]);
    expect(config.apply({ source: "api", pods: [pod("a"), pod("b")], provisional: true })).toEqual([{ op: "add", source: "api", pods: [pod("a"), pod("b")] }]);
    expect(config.allSourcesReady()).toBe(false);
    // The API answers: "a" is unchanged (no update, so no restart), "b" was deleted meanwhile, "c" is new.
    expect(config.apply({ source: "api", pods: [pod("a"), pod("c")] })).toEqual([
      { op: "remove", source: "api", pods: [pod("b")] },
      { op: "add", source: "api", pods: [pod("c")] },
    ]);
    expect(config.allSourcesReady()).toBe(true);
  });

  test("key order does not make an update", () => {
    const config = new PodConfig(["file"]);
    config.apply({ source: "file", pods: [pod("a")] });
    const reordered: Pod = { spec: { containers: [{ image: "busybox", name: "c" }] }, metadata: { uid: "a", namespace: "default", name: "p-a" } };
    expect(config.apply({ source: "file", pods: [reordered] })).toEqual([]);
  });

  test("only spec, labels, annotations and deletion make an update; a status change is a reconcile with the newer object; bookkeeping is neither", () => {
    const config = new PodConfig(["api"]);
    const base: Pod = { ...pod("a"), metadata: { ...pod("a").metadata, resourceVersion: "1", labels: { app: "x" } } };
    config.apply({ source: "api", pods: [base] });
    const statusOnly: Pod = { ...base, metadata: { ...base.metadata, resourceVersion: "2" }, status: { phase: "Running" } };
    expect(config.apply({ source: "api", pods: [statusOnly] })).toEqual([{ op: "reconcile", source: "api", pods: [statusOnly] }]);
    expect(config.desiredPods()).toEqual([statusOnly]);
    const bookkeeping: Pod = { ...statusOnly, metadata: { ...statusOnly.metadata, resourceVersion: "3" } };
    expect(config.apply({ source: "api", pods: [bookkeeping] })).toEqual([]);
    expect(config.desiredPods()[0]).toBe(bookkeeping);
    const changes: Pod[] = [
      { ...statusOnly, metadata: { ...statusOnly.metadata, labels: { app: "y" } } },
      { ...statusOnly, metadata: { ...statusOnly.metadata, labels: { app: "y" }, annotations: { note: "1" } } },
      {
        ...statusOnly,
        metadata: { ...statusOnly.metadata, labels: { app: "y" }, annotations: { note: "1" }, deletionTimestamp: "2026-11-22T00:00:00Z", deletionGracePeriodSeconds: 30 },
      },
      {
        ...statusOnly,
        metadata: { ...statusOnly.metadata, labels: { app: "y" }, annotations: { note: "1" }, deletionTimestamp: "2026-11-22T00:00:00Z", deletionGracePeriodSeconds: 0 },
      },
    ];
    for (const changed of changes) expect(config.apply({ source: "api", pods: [changed] })).toEqual([{ op: "update", source: "api", pods: [changed] }]);
  });

  test("the same object again is unchanged without being serialized again", () => {
    const config = new PodConfig(["api"]);
    const a = pod("a");
    config.apply({ source: "api", pods: [a] });
    let reads = 0;
    const spec = a.spec;
    // A getter counts how often the spec is read: serializing reads it.
    Object.defineProperty(a, "spec", { get: () => (reads++, spec), enumerable: true });
    expect(config.apply({ source: "api", pods: [a, pod("b")] })).toEqual([{ op: "add", source: "api", pods: [pod("b")] }]);
    expect(reads).toBe(0);
  });
});
