import { expect, test } from "bun:test";
import { FakePodRuntime } from "../runtime/fake.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { GenericPleg } from "./generic.ts";
import { RuntimePodsView } from "./view.ts";

test("the runtime pods view is empty until a PLEG serves it, then answers what the PLEG last saw; it is served once", async () => {
  const clock = new FakeClock();
  const runtime = new FakePodRuntime(clock);
  runtime.pods.set("u1", { uid: "u1", name: "web", namespace: "default", sandboxes: [{ id: "s1", ready: true, attempt: 0, createdAt: 0, additionalIps: [] }], containers: [] });
  const view = new RuntimePodsView();
  expect(view.runtimePods()).toEqual([]);
  expect(view.heldAtLastRelist("u1")).toBeUndefined();
  const pleg = new GenericPleg({ runtime, clock, logger: memoryLogger().logger, view });
  expect(() => view.serve(pleg)).toThrow("already served");
  // Served, but not relisted yet: still nothing known.
  expect(view.heldAtLastRelist("u1")).toBeUndefined();
  pleg.start(() => {});
  await Bun.sleep(0);
  expect(view.runtimePods().map((p) => p.uid)).toEqual(["u1"]);
  expect([view.heldAtLastRelist("u1"), view.heldAtLastRelist("u2")]).toEqual([true, false]);
  await pleg[Symbol.asyncDispose]();
});
