import { expect, test } from "bun:test";
import { evictionMessage, nodeConditionMessage } from "./message.ts";
import { podStatsLookup } from "./observations.ts";
import { Gi, Mi, Ki, pod, podStats, summary } from "./testing.ts";
import type { Observations, Threshold } from "./types.ts";

const memThreshold: Threshold = { id: "hard/memory.available", signal: "memory.available", value: { kind: "quantity", value: 100 * Mi, text: "100Mi" }, gracePeriodMs: 0 };
const memObserved: Observations = { "memory.available": { available: 51200 * Ki, capacity: 2 * Gi } };

test("memory: the threshold, what was available, and each container over its request (upstream evictionMessage)", () => {
  const p = pod({
    name: "web",
    containers: [
      { name: "sidecar", requests: { memory: "64Mi" } },
      { name: "quiet", requests: { memory: "1Gi" } },
    ],
  });
  const stats = podStatsLookup(
    summary({
      pods: [
        podStats(p, {
          memory: 200 * Mi,
          containers: [
            { name: "app", startTime: "", memory: { time: "", workingSetBytes: 90 * Mi } },
            { name: "sidecar", startTime: "", memory: { time: "", workingSetBytes: 100 * Mi } },
            { name: "quiet", startTime: "", memory: { time: "", workingSetBytes: 10 * Mi } },
          ],
        }),
      ],
    }),
  );
  expect(evictionMessage("memory", p, stats, [memThreshold], memObserved)).toEqual({
    message:
      "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. " +
      "Container app was using 90Mi, request is 0, has larger consumption of memory. " +
      "Container sidecar was using 100Mi, request is 64Mi, has larger consumption of memory. ",
    annotations: { offending_containers: "app,sidecar", offending_containers_usage: "90Mi,100Mi", starved_resource: "memory" },
  });
});

test("ephemeral-storage: container usage is rootfs + logs; a percentage threshold prints its byte value", () => {
  const p = pod({ name: "writer" });
  const stats = podStatsLookup(summary({ pods: [podStats(p, { rootfs: 3 * Gi, logs: Gi })] }));
  const nodefs: Threshold = { id: "hard/nodefs.available", signal: "nodefs.available", value: { kind: "percentage", fraction: Math.fround(0.1) }, gracePeriodMs: 0 };
  const { message } = evictionMessage("ephemeral-storage", p, stats, [nodefs], { "nodefs.available": { available: 512 * Mi, capacity: 100 * Gi } });
  expect(message).toBe(
    "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 512Mi. " +
      "Container app was using 4Gi, request is 0, has larger consumption of ephemeral-storage. ",
  );
});

test("pids: counts print as DecimalSI, no per-container line", () => {
  const p = pod({ name: "forker" });
  const pid: Threshold = { id: "hard/pid.available", signal: "pid.available", value: { kind: "quantity", value: 1000, text: "1000" }, gracePeriodMs: 0 };
  const stats = podStatsLookup(summary({ pods: [podStats(p, { processes: 5000 })] }));
  expect(evictionMessage("pids", p, stats, [pid], { "pid.available": { available: 500, capacity: 32768 } }).message).toBe(
    "The node was low on resource: pids. Threshold quantity: 1k, available: 500. ",
  );
});

test("without the pod's stats, only the node part and no annotations", () => {
  const p = pod({ name: "gone" });
  expect(evictionMessage("memory", p, () => undefined, [memThreshold], memObserved)).toEqual({
    message: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. ",
    annotations: {},
  });
});

test("admission message lists the conditions as Go prints a slice", () => {
  expect(nodeConditionMessage(["MemoryPressure", "DiskPressure"])).toBe("The node had condition: [MemoryPressure DiskPressure]. ");
});
