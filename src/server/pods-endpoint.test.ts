import { expect, test } from "bun:test";
import { Hono } from "hono";
import type { Pod } from "../pods/schema.ts";
import { readOnlyApp } from "./readonly.ts";
import { FakeClock } from "../util/clock.ts";
import { LocalStatusStore, type PodStatusView } from "../status/index.ts";

const pod: Pod = {
  metadata: { name: "static-web", namespace: "kube-system", uid: "u1" },
  spec: { nodeName: "n1", containers: [{ name: "app", image: "busybox" }] },
};
const view = (ready: boolean): PodStatusView => ({
  phase: "Running",
  sandboxReady: true,
  podIP: "10.1.0.4",
  podIPs: [{ ip: "10.1.0.4" }],
  startTime: "2026-01-01T00:00:00Z",
  containerStatuses: [
    {
      name: "app",
      state: { running: { startedAt: "2026-01-01T00:00:01Z" } },
      lastState: {},
      ready,
      started: true,
      restartCount: 0,
      image: "busybox",
      imageID: "sha256:1",
    },
  ],
});

test("/pods serves v1 statuses: conditions, hostIP and qosClass, transition times kept across updates", async () => {
  const clock = new FakeClock(Date.parse("2026-01-01T00:00:10Z"));
  const store = new LocalStatusStore({ hostIPs: ["192.0.2.1"], clock });
  const app = readOnlyApp({ statuses: store, health: new Hono() });
  const served = async () => ((await (await app.request("/pods")).json()) as { items: { status: Record<string, any> }[] }).items[0]!.status;
  store.set(pod, view(false));
  await served();
  clock.advance(5_000);
  store.set(pod, view(false));
  clock.advance(5_000);
  const status = await served();
  expect(status).toMatchObject({ phase: "Running", hostIP: "192.0.2.1", hostIPs: [{ ip: "192.0.2.1" }], podIP: "10.1.0.4", qosClass: "BestEffort" });
  // Internal view fields stay internal.
  expect(status.sandboxReady).toBeUndefined();
  const ready = status.conditions.find((c: { type: string }) => c.type === "Ready");
  expect(ready).toMatchObject({ status: "False", reason: "ContainersNotReady", lastTransitionTime: "2026-01-01T00:00:10Z" });
  // The view stays what the agent decides on.
  expect(store.get("u1")?.sandboxReady).toBe(true);
});
