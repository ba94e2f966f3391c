import { expect, test } from "bun:test";
import { localStorageViolations } from "./local-storage.ts";
import { podStatsLookup } from "./observations.ts";
import { Mi, pod, podStats, summary } from "./testing.ts";

test("emptyDir over its sizeLimit, pod over its containers' limits, container over its limit (upstream localStorageEviction)", () => {
  const emptyDir = pod({ name: "emptydir", volumes: [{ name: "cache", emptyDir: { sizeLimit: "1Mi" } }] });
  const podLimit = pod({ name: "pod-limit", limits: { "ephemeral-storage": "10Mi" }, containers: [{ name: "b", limits: { "ephemeral-storage": "10Mi" } }] });
  const containerLimit = pod({ name: "container-limit", limits: { "ephemeral-storage": "5Mi" } });
  const fine = pod({ name: "fine", limits: { "ephemeral-storage": "1Gi" }, volumes: [{ name: "cache", emptyDir: { sizeLimit: "1Gi" } }] });
  const stats = podStatsLookup(
    summary({
      pods: [
        podStats(emptyDir, { volumes: [{ name: "cache", usedBytes: 2 * Mi }] }),
        podStats(podLimit, { ephemeralStorage: 21 * Mi, rootfs: 0, logs: 0 }),
        podStats(containerLimit, { rootfs: 4 * Mi, logs: 2 * Mi }),
        podStats(fine, { ephemeralStorage: Mi, rootfs: Mi, logs: 0, volumes: [{ name: "cache", usedBytes: Mi }] }),
      ],
    }),
  );
  expect(localStorageViolations([emptyDir, podLimit, containerLimit, fine], stats, false).map((v) => [v.pod.metadata.name, v.signal, v.message])).toEqual([
    ["emptydir", "emptydirfs.limit", 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". '],
    ["pod-limit", "ephemeralpodfs.limit", "Pod ephemeral local storage usage exceeds the total limit of containers 20Mi. "],
    ["container-limit", "ephemeralcontainerfs.limit", 'Container app exceeded its local ephemeral storage limit "5Mi". '],
  ]);
});

test("with a dedicated image filesystem a container's writable layer does not count against its limit", () => {
  const p = pod({ name: "p", limits: { "ephemeral-storage": "5Mi" } });
  const stats = podStatsLookup(summary({ pods: [podStats(p, { rootfs: 100 * Mi, logs: Mi })] }));
  expect(localStorageViolations([p], stats, true)).toEqual([]);
  expect(localStorageViolations([p], stats, false)).toHaveLength(1);
});

test("pods without stats are skipped", () => {
  expect(localStorageViolations([pod({ name: "p", limits: { "ephemeral-storage": "1" } })], () => undefined, false)).toEqual([]);
});
