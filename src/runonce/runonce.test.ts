import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import type { PodSource, SourceSnapshot } from "../sources/types.ts";
import type { PodStatusView } from "../status/index.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { recordFirstSnapshots, runOnce } from "./index.ts";

const pod = (name: string): Pod => ({ metadata: { name, namespace: "kube-system", uid: `uid-${name}` }, spec: { containers: [{ name: "c", image: "i" }] } });
const running: PodStatusView = {
  phase: "Running",
  sandboxReady: true,
  podIPs: [],
  containerStatuses: [{ name: "c", state: { running: { startedAt: "t" } }, lastState: {}, ready: true, started: true, restartCount: 0, image: "i", imageID: "" }],
};
const pending: PodStatusView = {
  phase: "Pending",
  sandboxReady: false,
  podIPs: [],
  containerStatuses: [{ name: "c", state: { waiting: { reason: "ContainerCreating" } }, lastState: {}, ready: false, started: false, restartCount: 0, image: "i", imageID: "" }],
};
const failed: PodStatusView = {
  phase: "Failed",
  sandboxReady: true,
  podIPs: [],
  containerStatuses: [
    { name: "c", state: { terminated: { exitCode: 3, reason: "Error", containerID: "x" } }, lastState: {}, ready: false, started: false, restartCount: 0, image: "i", imageID: "" },
  ],
};
const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("run-once", () => {
  test("a running pod succeeds, a failed one fails at once, and the report names it as upstream's error does", async () => {
    const clock = new FakeClock();
    const statuses = new Map<string, PodStatusView>([
      ["uid-good", pending],
      ["uid-bad", failed],
    ]);
    const done = runOnce({ pods: [pod("good"), pod("bad")], statuses, clock, logger: memoryLogger().logger });
    await flush();
    statuses.set("uid-good", running);
    clock.advance(1000);
    await flush();
    clock.advance(2000); // seen running twice, a retry delay apart
    const report = await done;
    expect(report.results).toEqual([
      { pod: "good_kube-system(uid-good)", ok: true, detail: "Running" },
      { pod: "bad_kube-system(uid-bad)", ok: false, detail: 'container "c" failed: Error (exit code 3)' },
    ]);
    expect(report.error).toBe("error running pods: [bad_kube-system(uid-bad)]");
  });

  test("a pod never running fails after upstream's retries: 1 s, doubling, 10 times", async () => {
    const clock = new FakeClock();
    const started = clock.now();
    let finished = 0;
    const done = runOnce({ pods: [pod("slow")], statuses: { get: () => pending }, clock, logger: memoryLogger().logger }).then((r) => ((finished = clock.now()), r));
    for (let i = 0; i < 10; i++) {
      await flush();
      clock.advance(1000 * 2 ** i);
    }
    const report = await done;
    expect(finished - started).toBe(1023_000);
    expect(report.results[0]).toEqual({
      pod: "slow_kube-system(uid-slow)",
      ok: false,
      detail: 'timeout error: pod "slow_kube-system(uid-slow)" containers not running after 10 retries',
    });
  });

  test("a container seen running once and then exited is not started; a restart between two checks is not stable", async () => {
    const clock = new FakeClock();
    let current: PodStatusView = running;
    const done = runOnce({ pods: [pod("flaky")], statuses: { get: () => current }, clock, logger: memoryLogger().logger });
    await flush();
    current = failed;
    clock.advance(1000);
    expect((await done).results[0]).toMatchObject({ ok: false, detail: 'container "c" failed: Error (exit code 3)' });

    let restarts = 0;
    const crashy = runOnce({
      pods: [pod("crashy")],
      statuses: { get: () => ({ ...running, containerStatuses: [{ ...running.containerStatuses[0]!, restartCount: restarts }] }) },
      clock,
      logger: memoryLogger().logger,
    });
    await flush();
    restarts = 1;
    clock.advance(1000);
    await flush();
    clock.advance(2000);
    expect((await crashy).results[0]).toMatchObject({ ok: true, detail: "Running" }); // counts 1 then 1: stable from the second check on
  });

  test("an admission rejection fails with its reason; Succeeded counts as done", async () => {
    const clock = new FakeClock();
    const report = await runOnce({
      pods: [pod("big"), pod("job")],
      statuses: {
        get: (uid) =>
          uid === "uid-big"
            ? { phase: "Failed", sandboxReady: false, podIPs: [], containerStatuses: [], reason: "OutOfmemory", message: "Node didn't have enough resource" }
            : { ...pending, phase: "Succeeded" },
      },
      clock,
      logger: memoryLogger().logger,
    });
    expect(report.results.map((r) => [r.ok, r.detail])).toEqual([
      [false, "OutOfmemory: Node didn't have enough resource"],
      [true, "Succeeded"],
    ]);
  });

  test("the first snapshot of every source is what runs; none within a second is upstream's error", async () => {
    const clock = new FakeClock();
    let emit: (s: SourceSnapshot) => void = () => {};
    const source: PodSource = { name: "file", start: (e) => void (emit = e), [Symbol.asyncDispose]: async () => {} };
    const seen: SourceSnapshot[] = [];
    const once = recordFirstSnapshots([source], { clock });
    once.sources[0]!.start((s) => void seen.push(s));
    const first = once.firstPods();
    emit({ source: "file", pods: [pod("a")] });
    emit({ source: "file", pods: [pod("a"), pod("b")] });
    expect((await first).map((p) => p.metadata.name)).toEqual(["a"]);
    expect(seen).toHaveLength(2); // the sync loop still gets every snapshot

    const silent = recordFirstSnapshots([{ ...source, start: () => {} }], { clock });
    const waiting = silent.firstPods().catch((err: Error) => err.message);
    await flush();
    clock.advance(1000);
    expect(await waiting).toBe("no pod manifest update after 1s");
    expect(
      await recordFirstSnapshots([], { clock })
        .firstPods()
        .catch((err: Error) => err.message),
    ).toBe("no pod sources: run-once needs staticPodPath or staticPodURL");
  });
});
