import { describe, expect, test } from "bun:test";
import type { ApiObject } from "../api/index.ts";
import { FakeCheckpointStore } from "../checkpoint/index.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { PodCheckpoint, POD_CHECKPOINT_KIND } from "./pod-checkpoint.ts";

const apiPod = (uid: string, image = "busybox"): ApiObject =>
  ({ metadata: { name: `p-${uid}`, namespace: "default", uid }, spec: { containers: [{ name: "c", image }] } }) as ApiObject;

describe("PodCheckpoint", () => {
  test("a pass compares only the objects that are new since the last one: the same object is not serialized again", () => {
    const clock = new FakeClock();
    const store = new FakeCheckpointStore(clock);
    let view: ApiObject[] = [apiPod("a"), apiPod("b")];
    const checkpoint = new PodCheckpoint({ store, maxAgeMs: 3_600_000, clock, logger: memoryLogger().logger }, () => view);
    checkpoint.changed();
    clock.advance(500);
    expect(store.keys(POD_CHECKPOINT_KIND).sort()).toEqual(["a", "b"]);

    // Counts reads of a's spec: serializing it reads it.
    let specReads = 0;
    const a = view[0]!;
    const spec = (a as { spec: unknown }).spec;
    Object.defineProperty(a, "spec", { get: () => (specReads++, spec), enumerable: true });
    const writes = store.writes.length;
    view = [a, apiPod("b", "nginx")];
    checkpoint.changed();
    clock.advance(500);
    expect(specReads).toBe(0);
    expect(store.writes.slice(writes)).toEqual([`${POD_CHECKPOINT_KIND}/b`]);

    // A new object for a with the same content: compared, not written.
    view = [apiPod("a"), view[1]!];
    checkpoint.changed();
    clock.advance(500);
    expect(store.writes.slice(writes)).toEqual([`${POD_CHECKPOINT_KIND}/b`]);
  });
});
