import { describe, expect, test } from "bun:test";
import { ApiError } from "../api/errors.ts";
import { FakeKubeApi } from "../api/fake.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { FakeCheckpointStore } from "../checkpoint/index.ts";
import { ApiServerSource } from "./apiserver.ts";
import { checkpointForm, POD_CHECKPOINT_KIND } from "./pod-checkpoint.ts";
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
  const names = () =>
    snapshots
      .at(-1)
      ?.pods.map((p) => p.metadata.name)
      .sort();
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

describe("ApiServerSource offline autonomy (checkpoint)", () => {
  const HOUR = 3_600_000;
  function offlineSetup(opts: { store?: FakeCheckpointStore; clock?: FakeClock; api?: FakeKubeApi } = {}) {
    const api = opts.api ?? new FakeKubeApi();
    const clock = opts.clock ?? new FakeClock();
    const store = opts.store ?? new FakeCheckpointStore(clock);
    const log = memoryLogger();
    const snapshots: SourceSnapshot[] = [];
    const source = new ApiServerSource({ api, nodeName: "n1", clock, logger: log.logger, checkpoint: { store, maxAgeMs: 24 * HOUR, debounceMs: 500 } });
    return { api, clock, store, log, snapshots, source, start: () => source.start((s) => snapshots.push(s)) };
  }
  const writePhase = async (clock: FakeClock) => {
    await settle();
    clock.advance(500);
    await settle();
  };

  test("checkpoints the node's pods (debounced, without volatile fields) and removes the files of deleted pods", async () => {
    const t = offlineSetup();
    const a = t.api.putPod(pod("a"));
    t.api.putPod(pod("other", "n2"));
    t.start();
    await settle();
    expect(t.store.writes).toEqual([]); // debounced
    await writePhase(t.clock);
    expect(t.store.keys(POD_CHECKPOINT_KIND)).toEqual([a.metadata!.uid!]);
    const saved = t.store.read<Record<string, any>>(POD_CHECKPOINT_KIND, a.metadata!.uid!);
    expect(saved.ok && saved.data.metadata.resourceVersion).toBe(undefined);
    // A status update changes nothing in the checkpoint form: no write.
    t.api.putPod({ ...a, status: { phase: "Running", podIP: "10.0.0.5", startTime: "2026-01-01T00:00:00Z" } });
    await writePhase(t.clock);
    const writesAfterRunning = t.store.writes.length;
    t.api.putPod({ ...a, status: { phase: "Running", podIP: "10.0.0.5", startTime: "2026-01-01T00:00:00Z", conditions: [] } });
    await writePhase(t.clock);
    expect(t.store.writes.length).toBe(writesAfterRunning);
    const b = t.api.putPod(pod("b"));
    t.api.removePod("default", "a");
    await writePhase(t.clock);
    expect(t.store.keys(POD_CHECKPOINT_KIND)).toEqual([b.metadata!.uid!]);
    await t.source[Symbol.asyncDispose]();
  });

  test("the first list failing reports the checkpoint as a provisional view; the API's list then replaces it by UID", async () => {
    const clock = new FakeClock();
    const store = new FakeCheckpointStore(clock);
    const api = new FakeKubeApi();
    const a = api.putPod(pod("a"));
    const b = api.putPod(pod("b"));
    // An earlier run wrote the checkpoint.
    const first = offlineSetup({ api, clock, store });
    first.start();
    await settle();
    await writePhase(clock);
    await first.source[Symbol.asyncDispose]();
    expect(store.keys(POD_CHECKPOINT_KIND)).toHaveLength(2);

    // An online restart rewrites nothing that did not change.
    const writesBefore = store.writes.filter((w) => w.startsWith(`${POD_CHECKPOINT_KIND}/`)).length;
    const again = offlineSetup({ api, clock, store });
    again.start();
    await writePhase(clock);
    await again.source[Symbol.asyncDispose]();
    expect(store.writes.filter((w) => w.startsWith(`${POD_CHECKPOINT_KIND}/`)).length).toBe(writesBefore);

    // Reboot while offline; b is deleted in the API meanwhile.
    clock.advance(2 * HOUR);
    api.setReachable(false);
    const t = offlineSetup({ api, clock, store });
    t.start();
    await settle();
    expect(t.snapshots).toHaveLength(1);
    expect(t.snapshots[0]!.provisional).toBe(true);
    expect(t.snapshots[0]!.pods.map((p) => p.metadata.uid).sort()).toEqual([a.metadata!.uid!, b.metadata!.uid!].sort());
    expect(t.log.lines.some((l) => l.includes("running the pods of the local checkpoint"))).toBe(true);
    // Retries while offline do not report the checkpoint again, nor touch it.
    clock.advance(1000);
    await settle();
    clock.advance(2000);
    await settle();
    expect(t.snapshots).toHaveLength(1);
    api.removePod("default", "b");
    api.setReachable(true);
    clock.advance(4000);
    await settle();
    const last = t.snapshots.at(-1)!;
    expect(last.provisional).toBeUndefined();
    expect(last.pods.map((p) => p.metadata.uid)).toEqual([a.metadata!.uid!]);
    await writePhase(clock);
    expect(store.keys(POD_CHECKPOINT_KIND)).toEqual([a.metadata!.uid!]);
    await t.source[Symbol.asyncDispose]();
  });

  test("a checkpoint older than maxAge and a corrupt file are not run", async () => {
    const clock = new FakeClock();
    const store = new FakeCheckpointStore(clock);
    store.write(POD_CHECKPOINT_KIND, "old", checkpointForm({ ...pod("old"), metadata: { name: "old", namespace: "default", uid: "old" } }));
    clock.advance(25 * HOUR);
    store.write(POD_CHECKPOINT_KIND, "fresh", checkpointForm({ ...pod("fresh"), metadata: { name: "fresh", namespace: "default", uid: "fresh" } }));
    store.write(POD_CHECKPOINT_KIND, "broken", {});
    store.corrupt(POD_CHECKPOINT_KIND, "broken");
    store.write(POD_CHECKPOINT_KIND, "mismatch", checkpointForm({ ...pod("m"), metadata: { name: "m", namespace: "default", uid: "other" } }));
    const api = new FakeKubeApi();
    api.setReachable(false);
    const t = offlineSetup({ api, clock, store });
    t.start();
    await settle();
    expect(t.snapshots.map((s) => s.pods.map((p) => p.metadata.uid))).toEqual([["fresh"]]);
    expect(t.log.lines.some((l) => l.includes("olderThanMaxAge=1"))).toBe(true);
    expect(t.log.lines.some((l) => l.includes("ignoring checkpointed pod") && l.includes("uid=mismatch"))).toBe(true);
    await t.source[Symbol.asyncDispose]();
  });

  test("maxAge counts from the API's last confirmation of the view (bookmarks), not from the pod's last change", async () => {
    const clock = new FakeClock();
    const store = new FakeCheckpointStore(clock);
    const api = new FakeKubeApi();
    const a = api.putPod(pod("a"));
    const online = offlineSetup({ api, clock, store });
    online.start();
    await writePhase(clock);
    // The pod does not change for 20 hours; the watch's bookmarks keep confirming the view.
    for (let h = 0; h < 20; h++) {
      clock.advance(HOUR);
      api.bookmark();
      await writePhase(clock);
    }
    await online.source[Symbol.asyncDispose]();
    const podWrites = store.writes.filter((w) => w.startsWith(`${POD_CHECKPOINT_KIND}/`));
    expect(podWrites).toEqual([`${POD_CHECKPOINT_KIND}/${a.metadata!.uid}`]); // confirmations do not rewrite pods

    // Offline 10 hours later: 30 hours after the pod's file, 10 after the last confirmation.
    clock.advance(10 * HOUR);
    api.setReachable(false);
    const rebooted = offlineSetup({ api, clock, store });
    rebooted.start();
    await settle();
    expect(rebooted.snapshots.map((s) => s.pods.map((p) => p.metadata.uid))).toEqual([[a.metadata!.uid!]]);
    await rebooted.source[Symbol.asyncDispose]();

    // 25 hours after the last confirmation: too old.
    clock.advance(15 * HOUR);
    const late = offlineSetup({ api, clock, store });
    late.start();
    await settle();
    expect(late.snapshots).toEqual([]);
    await late.source[Symbol.asyncDispose]();
  });

  test("without a checkpoint an unreachable API server leaves the source not ready (no view at all)", async () => {
    const api = new FakeKubeApi();
    api.setReachable(false);
    const t = offlineSetup({ api });
    t.start();
    await settle();
    expect(t.snapshots).toEqual([]);
    await t.source[Symbol.asyncDispose]();
  });

  test("a failing disk is logged and retried on the next change; dispose flushes a pending write", async () => {
    const t = offlineSetup();
    t.store.failWrites = new Error("ENOSPC");
    const a = t.api.putPod(pod("a"));
    t.start();
    await settle();
    await writePhase(t.clock);
    expect(t.log.lines.some((l) => l.includes("could not write the pod checkpoint") && l.includes("ENOSPC"))).toBe(true);
    t.store.failWrites = undefined;
    const b = t.api.putPod(pod("b"));
    await settle();
    await t.source[Symbol.asyncDispose]();
    expect(t.store.keys(POD_CHECKPOINT_KIND)).toEqual([a.metadata!.uid!, b.metadata!.uid!].sort());
  });

  test("checkpointForm keeps spec, metadata, a terminal phase and the start time only", () => {
    expect(
      checkpointForm({
        metadata: { name: "p", uid: "u", resourceVersion: "9", managedFields: [{}], labels: { a: "b" } },
        spec: { containers: [] },
        status: { phase: "Succeeded", startTime: "t", podIP: "1.2.3.4", conditions: [] },
      }),
    ).toEqual({ metadata: { name: "p", uid: "u", labels: { a: "b" } }, spec: { containers: [] }, status: { phase: "Succeeded", startTime: "t" } });
  });
});
