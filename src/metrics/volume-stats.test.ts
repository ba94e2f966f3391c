import { expect, test } from "bun:test";
import type { Summary } from "../stats/types.ts";
import { renderVolumeStatsMetrics } from "./volume-stats.ts";

test("kubelet_volume_stats_* report each claim once, by namespace and claim; other volumes are left out", () => {
  const fs = { time: "2026-01-01T00:00:00Z", capacityBytes: 1000, availableBytes: 600, usedBytes: 400, inodes: 50, inodesFree: 40, inodesUsed: 10 };
  const pod = (uid: string) => ({
    podRef: { name: uid, namespace: "ns", uid },
    startTime: fs.time,
    containers: [],
    volume: [
      { ...fs, name: "data", pvcRef: { name: "c", namespace: "ns" } },
      { ...fs, name: "scratch" },
    ],
  });
  const summary = { node: { nodeName: "n1", startTime: fs.time }, pods: [pod("a"), pod("b")] } as unknown as Summary;
  const out = renderVolumeStatsMetrics(summary);
  expect(out).toContain('kubelet_volume_stats_capacity_bytes{namespace="ns",persistentvolumeclaim="c"} 1000\n');
  expect(out).toContain('kubelet_volume_stats_available_bytes{namespace="ns",persistentvolumeclaim="c"} 600\n');
  expect(out).toContain('kubelet_volume_stats_used_bytes{namespace="ns",persistentvolumeclaim="c"} 400\n');
  expect(out).toContain('kubelet_volume_stats_inodes{namespace="ns",persistentvolumeclaim="c"} 50\n');
  expect(out).toContain('kubelet_volume_stats_inodes_free{namespace="ns",persistentvolumeclaim="c"} 40\n');
  expect(out).toContain('kubelet_volume_stats_inodes_used{namespace="ns",persistentvolumeclaim="c"} 10\n');
  expect(out.match(/^kubelet_volume_stats_used_bytes/gm)?.length).toBe(1);
  expect(out).not.toContain("scratch");
  expect(renderVolumeStatsMetrics(undefined)).toBe("");
});
