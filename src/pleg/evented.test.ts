import { afterEach, describe, expect, test } from "bun:test";
import { PodHost } from "../sync/pod-host.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeCri } from "../cri/fake.ts";
import { podLabels } from "../runtime/labels.ts";
import { CriPodRuntime } from "../runtime/manager.ts";
import { testRuntimeOptions, testNode } from "../runtime/testing.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import type { PlegEvent } from "./diff.ts";
import { CACHE_TIME_MARGIN_MS, CACHE_TIME_PERIOD_MS, EVENTED_RELIST_PERIOD_MS, EventedPleg, RELIST_PERIOD_MS, type EventedPlegOptions } from "./evented.ts";

const BUSYBOX = "localhost/bunlet/busybox:1.0";
const logs = mkdtempSync(join(tmpdir(), "evented-pleg-"));
afterEach(() => rmSync(logs, { recursive: true, force: true }));

/** A FakeCri behind the real CRI pod runtime (whose relist the PLEG uses), and the PLEG under test. */
function setup(cache?: EventedPlegOptions["cache"], clock = new FakeClock()) {
  const cri = new FakeCri({ clock, images: [BUSYBOX] });
  const { logger } = memoryLogger();
  const node = testNode({ podLogsDir: logs, podsCgroupParent: "/test" });
  const runtime = new CriPodRuntime(
    testRuntimeOptions({
      cri,
      clock,
      logger,
      node,
      host: PodHost.forNode(node),
    }),
  );
  const pleg = new EventedPleg({ runtime, cri, clock, logger, ...(cache ? { cache } : {}) });
  const seen: PlegEvent[] = [];
  const relists = () => cri.callsOf("listPodSandbox").length;
  return { clock, cri, pleg, seen, relists, start: () => pleg.start((events) => seen.push(...events)) };
}

const identity = { uid: "uid-1", name: "web", namespace: "default" };
const sandboxConfig = { metadata: { name: "web", namespace: "default", uid: "uid-1", attempt: 0 }, labels: podLabels(identity) };

async function runPod(cri: FakeCri) {
  const sb = await cri.runPodSandbox(sandboxConfig);
  const c = await cri.createContainer(
    sb,
    { metadata: { name: "app" }, image: { image: BUSYBOX }, labels: { ...podLabels(identity), "io.kubernetes.container.name": "app" } },
    sandboxConfig,
  );
  await cri.startContainer(c);
  return { sb, c };
}

/** Lets the stream, the relist and the handlers run (the fake's calls resolve on microtasks). */
const settle = async () => {
  for (let i = 0; i < 20; i++) await Bun.sleep(0);
};

/**
 * `setup` with a status cache that records, for each time it is moved to, how far behind the clock that is
 * (a relist sets its own start: 0 behind here). `prepare` sees the clock before anything uses it.
 */
function withRecordingCache(prepare?: (clock: FakeClock) => void) {
  const clock = new FakeClock();
  prepare?.(clock);
  const behind: number[] = [];
  const cache = { get: () => undefined, delete: () => {}, updateTime: (at: number) => void behind.push(clock.now() - at) };
  return { ...setup(cache, clock), behind };
}

describe("EventedPleg", () => {
  test("a container's exit reaches the sync loop from the event, with no relist; the relist waits 300 s", async () => {
    const { clock, cri, pleg, seen, relists, start } = setup();
    await using _ = pleg;
    start();
    await settle();
    expect(pleg.streamState().kind).toBe("streaming");
    expect(pleg.hasRelisted()).toBe(true);
    const after = relists();
    const { sb, c } = await runPod(cri);
    await settle();
    // Each carries the runtime's stamp of the change (ms), for the pod worker's newer-than-its-last-read check.
    const at = clock.now();
    expect(seen).toContainEqual({ uid: "uid-1", type: "ContainerStarted", id: sb, state: "running", at });
    expect(seen).toContainEqual({ uid: "uid-1", type: "ContainerStarted", id: c, state: "running", at });
    seen.length = 0;
    clock.advance(7);
    cri.exitContainer(c, 1, "Error");
    await settle();
    expect(seen).toEqual([{ uid: "uid-1", type: "ContainerDied", id: c, state: "exited", at: at + 7 }]);
    expect(relists()).toBe(after);
    // What the sync loop's housekeeping reads is up to date too.
    expect(pleg.runtimePods()[0]?.entities.get(c)).toBe("exited");
    // The safety net: a relist at the evented period, not every second.
    clock.advance(EVENTED_RELIST_PERIOD_MS - 8);
    await settle();
    expect(relists()).toBe(after);
    clock.advance(1);
    await settle();
    expect(relists()).toBe(after + 1);
    // That relist agreed with the events: nothing more to report.
    expect(seen).toEqual([{ uid: "uid-1", type: "ContainerDied", id: c, state: "exited", at: at + 7 }]);
  });

  test("removal: the container's and then the sandbox's DELETED event (which has no sandbox status) report Removed", async () => {
    const { clock, cri, pleg, seen, start } = setup();
    await using _ = pleg;
    start();
    await settle();
    const { sb, c } = await runPod(cri);
    await settle();
    seen.length = 0;
    await cri.stopPodSandbox(sb);
    await cri.removePodSandbox(sb);
    await settle();
    const at = clock.now();
    expect(seen).toEqual([
      { uid: "uid-1", type: "ContainerDied", id: c, state: "exited", at },
      { uid: "uid-1", type: "ContainerDied", id: sb, state: "exited", at },
      { uid: "uid-1", type: "ContainerRemoved", id: c, state: "nonexistent", at },
      { uid: "uid-1", type: "ContainerRemoved", id: sb, state: "nonexistent", at },
    ]);
    expect(pleg.runtimePods()).toEqual([]);
  });

  test("a runtime without GetContainerEvents (Unimplemented, as containerd 1.6) is relisted every second", async () => {
    const { clock, cri, pleg, seen, relists, start } = setup();
    await using _ = pleg;
    cri.failNext("containerEvents", "Unimplemented", "unknown method GetContainerEvents");
    start();
    await settle();
    expect(pleg.streamState()).toMatchObject({ kind: "unsupported", error: { kind: "Unimplemented" } });
    const { c } = await runPod(cri);
    clock.advance(RELIST_PERIOD_MS);
    await settle();
    expect(seen.map((e) => e.type)).toEqual(["ContainerStarted", "ContainerStarted"]);
    seen.length = 0;
    const before = relists();
    cri.exitContainer(c, 1);
    await settle();
    expect(seen).toEqual([]); // no stream: only a relist can notice
    clock.advance(RELIST_PERIOD_MS);
    await settle();
    expect(relists()).toBe(before + 1);
    expect(seen).toEqual([{ uid: "uid-1", type: "ContainerDied", id: c, state: "exited" }]);
    clock.advance(RELIST_PERIOD_MS);
    await settle();
    expect(relists()).toBe(before + 2);
    expect(cri.callsOf("containerEvents")).toHaveLength(1); // never asked again
  });

  test("a broken stream: relist at once and every second, reconnect with backoff, then back to the long period", async () => {
    const { clock, cri, pleg, seen, relists, start } = setup();
    await using _ = pleg;
    start();
    await settle();
    const { c } = await runPod(cri);
    await settle();
    seen.length = 0;
    const before = relists();
    cri.failNext("containerEvents", "Unavailable", "connection refused"); // the first reconnection fails too
    cri.breakEventStreams("Unavailable", "containerd restarted");
    await settle();
    expect(pleg.streamState()).toMatchObject({ kind: "reconnecting", attempt: 1, retryInMs: 1000, error: { kind: "Unavailable" } });
    expect(relists()).toBe(before + 1);
    // While no stream is open, an exit is noticed by the one-second relist.
    cri.exitContainer(c, 2);
    clock.advance(1000);
    await settle();
    expect(seen).toEqual([{ uid: "uid-1", type: "ContainerDied", id: c, state: "exited" }]);
    expect(pleg.streamState()).toMatchObject({ kind: "reconnecting", attempt: 2, retryInMs: 2000 });
    clock.advance(2000);
    await settle();
    expect(pleg.streamState().kind).toBe("streaming");
    expect(cri.eventSubscribers()).toBe(1);
    expect(cri.callsOf("containerEvents")).toHaveLength(3);
    // Reconnected: one relist for the gap, then the evented period again.
    const reconnected = relists();
    clock.advance(RELIST_PERIOD_MS * 5);
    await settle();
    expect(relists()).toBe(reconnected);
    expect(pleg.healthy().ok).toBe(true);
  });

  test("while the stream is open the status cache's time moves on every 5 s, 1 s behind the clock; not while it is broken, nor before the relist after a reconnection", async () => {
    const { clock, behind, cri, pleg, start } = withRecordingCache();
    await using _ = pleg;
    start();
    await settle();
    expect(behind).toEqual([0]); // the first relist
    clock.advance(CACHE_TIME_PERIOD_MS - 1);
    await settle();
    expect(behind).toEqual([0]);
    clock.advance(1);
    await settle();
    expect(behind).toEqual([0, CACHE_TIME_MARGIN_MS]);
    // Broken: only the one-second relists move it (to their start), until the stream is back.
    for (let i = 0; i < 3; i++) cri.failNext("containerEvents", "Unavailable", "connection refused"); // tried at 1, 3 and 7 s; back at 15 s
    cri.breakEventStreams("Unavailable", "containerd restarted");
    await settle();
    behind.length = 0;
    for (let i = 0; i < 2 * CACHE_TIME_PERIOD_MS; i += RELIST_PERIOD_MS) {
      clock.advance(RELIST_PERIOD_MS);
      await settle();
    }
    expect(pleg.streamState().kind).toBe("reconnecting");
    expect(behind.length).toBeGreaterThan(0);
    expect(behind.every((b) => b === 0)).toBe(true);
    // Back: the reconnection's relist first, then the 5 s steps again.
    for (let i = 0; i < 8 && pleg.streamState().kind !== "streaming"; i++) {
      clock.advance(RELIST_PERIOD_MS);
      await settle();
    }
    expect(pleg.streamState().kind).toBe("streaming");
    behind.length = 0;
    clock.advance(CACHE_TIME_PERIOD_MS);
    await settle();
    expect(behind).toContain(CACHE_TIME_MARGIN_MS);
  });

  test("at start the stream is asked for before the first relist begins, so that relist counts for moving the cache's time", async () => {
    const { clock, behind, cri, pleg, start } = withRecordingCache();
    await using _ = pleg;
    // The runtime's answer takes a millisecond: a stream asked for after the relist began would have opened after it.
    const list = cri.listPodSandbox.bind(cri);
    cri.listPodSandbox = (filter) => {
      clock.advance(1);
      return list(filter);
    };
    start();
    await settle();
    clock.advance(CACHE_TIME_PERIOD_MS);
    await settle();
    expect(behind).toContain(CACHE_TIME_MARGIN_MS);
  });

  test("a runtime without the stream: the 5 s cache step stops after its first turn (the one-second relist confirms the cache)", async () => {
    const cacheSteps: number[] = [];
    const { clock, behind, cri, pleg, start } = withRecordingCache((clock) => {
      const setTimer = clock.setTimer.bind(clock);
      clock.setTimer = (ms, fn) => {
        if (ms === CACHE_TIME_PERIOD_MS) cacheSteps.push(clock.now());
        return setTimer(ms, fn);
      };
    });
    await using _ = pleg;
    cri.failNext("containerEvents", "Unimplemented", "unknown method GetContainerEvents");
    start();
    await settle();
    for (let i = 0; i < 4 * CACHE_TIME_PERIOD_MS; i += RELIST_PERIOD_MS) {
      clock.advance(RELIST_PERIOD_MS);
      await settle();
    }
    expect(cacheSteps).toHaveLength(1);
    expect(behind.every((b) => b === 0)).toBe(true); // only the relists moved it
  });

  test("the stream open but no relist since it opened: the cache's time stays", async () => {
    const { clock, behind, cri, pleg, start } = withRecordingCache();
    await using _ = pleg;
    cri.failNext("listPodSandbox", "Unavailable", "not yet"); // the first relist fails
    start();
    await settle();
    expect(pleg.streamState().kind).toBe("streaming");
    clock.advance(CACHE_TIME_PERIOD_MS);
    await settle();
    expect(behind).toEqual([]);
  });

  test("a relist in flight does not undo what a newer event said", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: [BUSYBOX] });
    const { sb, c } = await runPod(cri);
    const record = (state: "running" | "exited") => ({
      ...identity,
      entities: new Map([
        [sb, "running" as const],
        [c, state],
      ]),
      sandboxIds: new Set([sb]),
    });
    // A runtime whose relists answer when the test says, with the view of when they began.
    const pending: ((r: ReturnType<typeof record>[]) => void)[] = [];
    const runtime = { relist: () => new Promise<ReturnType<typeof record>[]>((resolve) => pending.push(resolve)) };
    const pleg = new EventedPleg({ runtime, cri, clock, logger: memoryLogger().logger });
    await using _ = pleg;
    const seen: PlegEvent[] = [];
    pleg.start((events) => seen.push(...events));
    await settle();
    pending.shift()?.([record("running")]);
    await settle();
    expect(seen).toEqual([
      { uid: "uid-1", type: "ContainerStarted", id: sb, state: "running" },
      { uid: "uid-1", type: "ContainerStarted", id: c, state: "running" },
    ]);
    seen.length = 0;
    clock.advance(EVENTED_RELIST_PERIOD_MS); // the safety-net relist begins, seeing the container running ...
    await settle();
    expect(pending).toHaveLength(1);
    cri.exitContainer(c, 1); // ... the exit event arrives while it is in flight ...
    await settle();
    const died: PlegEvent = { uid: "uid-1", type: "ContainerDied", id: c, state: "exited", at: clock.now() };
    expect(seen).toEqual([died]);
    pending.shift()?.([record("running")]); // ... and it answers with its older view
    await settle();
    expect(seen).toEqual([died]);
    expect(pleg.runtimePods()[0]?.entities.get(c)).toBe("exited");
    // The next relist is believed again.
    clock.advance(EVENTED_RELIST_PERIOD_MS);
    await settle();
    pending.shift()?.([record("exited")]);
    await settle();
    expect(seen).toHaveLength(1);
  });

  test("stopping closes the stream and cancels the relist timer", async () => {
    const { clock, cri, pleg, relists, start } = setup();
    start();
    await settle();
    expect(cri.eventSubscribers()).toBe(1);
    await pleg[Symbol.asyncDispose]();
    expect(cri.eventSubscribers()).toBe(0);
    expect(pleg.streamState().kind).toBe("stopped");
    const n = relists();
    clock.advance(EVENTED_RELIST_PERIOD_MS * 2);
    await settle();
    expect(relists()).toBe(n);
  });
});
