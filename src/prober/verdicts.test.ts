import { expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { ProbeVerdicts } from "./verdicts.ts";

test("a liveness failure marks the container ID that was probed, and only it", () => {
  const woken: string[] = [];
  const v = new ProbeVerdicts((uid) => woken.push(uid));
  const pod = { metadata: { uid: "u1", name: "p" }, spec: { containers: [] } } as unknown as Pod;
  v.addPod(pod, [{ containerName: "app", containerId: "c1", startedAt: 0 }], "10.0.0.1");
  v.livenessFailed("u1", "app", "Container app failed liveness probe, will be restarted");
  v.livenessFailed("u1", "unknown", "ignored");
  expect([...v.unhealthy("u1")]).toEqual([["c1", "Container app failed liveness probe, will be restarted"]]);
  expect(woken).toEqual(["u1"]);
  // The restarted container has a new ID: the old verdict does not apply to it.
  v.addPod(pod, [{ containerName: "app", containerId: "c2", startedAt: 1 }], "10.0.0.1");
  expect(v.unhealthy("u1").has("c2")).toBe(false);
  v.removePod("u1");
  expect(v.unhealthy("u1").size).toBe(0);
  expect(v.isReady("u1", "app")).toBe(true); // no prober attached: running means ready
});
