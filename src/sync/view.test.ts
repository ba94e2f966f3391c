import { expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { FakePodRuntime } from "../runtime/fake.ts";
import { LocalStatusStore } from "../status/index.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { Requests } from "../util/requests.ts";
import { PodWorkers } from "./podworkers.ts";
import { HostPodSyncer } from "./pod-syncer.ts";
import { PodWorkersView } from "./view.ts";

const pod: Pod = { metadata: { name: "web", namespace: "default", uid: "u1" }, spec: { terminationGracePeriodSeconds: 5, containers: [{ name: "app", image: "busybox" }] } };

test("the view has no pods until the workers serve it, then answers and acts through them", async () => {
  const view = new PodWorkersView();
  expect(view.activePods()).toEqual([]);
  expect(view.has("u1")).toBe(false);
  expect(view.evict("u1", "pressure", 0)).toBe(false);
  const clock = new FakeClock();
  const runtime = new FakePodRuntime(clock);
  const requests = new Requests<string>();
  const workers = new PodWorkers({
    syncer: new HostPodSyncer({ runtime, status: new LocalStatusStore(), clock, logger: memoryLogger().logger }),
    clock,
    logger: memoryLogger().logger,
    resyncIntervalMs: 60_000,
    view,
    requests,
  });
  expect(() => view.serve(workers)).toThrow("already served");
  workers.add(pod);
  await workers.idle();
  expect(view.activePods().map((p) => p.metadata.uid)).toEqual(["u1"]);
  expect(view.activePod("u1")?.metadata.name).toBe("web");
  expect(view.stageOf("u1")).toBe("syncing");
  expect(view.evict("u1", "The node was low on resource: memory.", 0)).toBe(true);
  await workers.idle();
  expect(view.stageOf("u1")).not.toBe("syncing");
  expect(view.activePods()).toEqual([]);
  await workers[Symbol.asyncDispose]();
});
