import { expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { LivenessRestarts, ProbeVerdicts } from "./verdicts.ts";

const pod = { metadata: { uid: "u1", name: "p" }, spec: { containers: [] } } as unknown as Pod;

/** The prober's side: what it was given and removed, readiness answered from a set. */
function fakeManager() {
  const calls: string[] = [];
  const ready = new Set<string>();
  return {
    calls,
    ready,
    addPod: (p: Pod, running: { containerName: string }[]) => void calls.push(`add ${p.metadata.uid} ${running.map((c) => c.containerName).join(",")}`),
    removePod: (uid: string) => void calls.push(`remove ${uid}`),
    stopLivenessAndStartup: (uid: string) => void calls.push(`stop liveness and startup ${uid}`),
    watchReadiness: () => () => {},
    awaitReports: async () => {},
    isReady: (uid: string, name: string) => ready.has(`${uid}/${name}`),
    isStarted: (uid: string, name: string) => ready.has(`${uid}/${name}`),
  };
}

test("a liveness failure marks the container ID that was probed, and only it", () => {
  const woken: string[] = [];
  const restarts = new LivenessRestarts({ request: (uid) => void woken.push(uid) });
  const manager = fakeManager();
  const v = new ProbeVerdicts(manager, restarts);
  v.addPod(pod, [{ containerName: "app", containerId: "c1", startedAt: 0 }], "10.0.0.1");
  restarts.livenessFailed("u1", "app", "liveness");
  restarts.livenessFailed("u1", "unknown", "liveness");
  expect([...restarts.unhealthy("u1")]).toEqual([["c1", { probe: "liveness" }]]);
  // The probe's own grace period travels with the verdict.
  restarts.livenessFailed("u1", "app", "startup", 5);
  expect(restarts.unhealthy("u1").get("c1")).toEqual({ probe: "startup", gracePeriodSeconds: 5 });
  expect(woken).toEqual(["u1", "u1"]);
  // The restarted container has a new ID: the old verdict does not apply to it.
  v.addPod(pod, [{ containerName: "app", containerId: "c2", startedAt: 1 }], "10.0.0.1");
  expect(restarts.unhealthy("u1").has("c2")).toBe(false);
  v.removePod("u1");
  expect(restarts.unhealthy("u1").size).toBe(0);
  expect(manager.calls).toEqual(["add u1 app", "add u1 app", "remove u1"]);
});

test("readiness and startup are the prober's", () => {
  const manager = fakeManager();
  const v = new ProbeVerdicts(manager, new LivenessRestarts({ request: () => {} }));
  expect(v.isReady("u1", "app")).toBe(false);
  manager.ready.add("u1/app");
  expect(v.isReady("u1", "app")).toBe(true);
  expect(v.isStarted("u1", "app")).toBe(true);
});
