import { expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { localVolumeNames, podDiskUsage, podLimit, podRequest } from "./pods.ts";
import { Mi, pod, podStats } from "./testing.ts";

const withInit = (p: Pod, init: Record<string, string>): Pod => ({
  ...p,
  spec: { ...p.spec, initContainers: [{ name: "init", image: "busybox", resources: { requests: init } }] },
});

test.each([
  ["sum of containers", pod({ name: "p", requests: { memory: "10Mi" }, containers: [{ name: "b", requests: { memory: "20Mi" } }] }), 30 * Mi],
  ["a limit stands in for a missing request", pod({ name: "p", limits: { memory: "10Mi" } }), 10 * Mi],
  ["a bigger init container wins", withInit(pod({ name: "p", requests: { memory: "10Mi" } }), { memory: "50Mi" }), 50 * Mi],
  ["a smaller init container does not", withInit(pod({ name: "p", requests: { memory: "10Mi" } }), { memory: "5Mi" }), 10 * Mi],
  ["nothing requested", pod({ name: "p" }), 0],
] as const)("podRequest: %s", (_name, p, want) => {
  expect(podRequest(p, "memory")).toBe(want);
});

test("overhead counts only when something is requested (upstream GetResourceRequestQuantity)", () => {
  const overhead = (p: Pod): Pod => ({ ...p, spec: { ...p.spec, overhead: { memory: "1Mi" } } as Pod["spec"] });
  expect(podRequest(overhead(pod({ name: "p", requests: { memory: "10Mi" } })), "memory")).toBe(11 * Mi);
  expect(podRequest(overhead(pod({ name: "p" })), "memory")).toBe(0);
});

test("podLimit is undefined unless some container sets the limit", () => {
  expect(podLimit(pod({ name: "p" }), "ephemeral-storage")).toBeUndefined();
  expect(podLimit(pod({ name: "p", limits: { "ephemeral-storage": "1Mi" }, containers: [{ name: "b" }] }), "ephemeral-storage")).toBe(Mi);
});

test("local volumes are hostPath, disk-backed emptyDir, gitRepo and configMap (upstream localVolumeNames)", () => {
  const p = pod({
    name: "p",
    volumes: [
      { name: "host", hostPath: { path: "/x" } },
      { name: "scratch", emptyDir: {} },
      { name: "ram", emptyDir: { medium: "Memory" } },
      { name: "cfg", configMap: { name: "c" } },
      { name: "secret", secret: { secretName: "s" } },
    ],
  });
  expect(localVolumeNames(p)).toEqual(["host", "scratch", "cfg"]);
});

test("podDiskUsage sums what the signal weighs", () => {
  const p = pod({ name: "p", volumes: [{ name: "scratch", emptyDir: {} }] });
  const s = podStats(p, { rootfs: 1, rootfsInodes: 10, logs: 2, logsInodes: 20, volumes: [{ name: "scratch", usedBytes: 4, inodesUsed: 40 }] });
  expect(podDiskUsage(s, p, ["root", "logs", "localVolumeSource"])).toEqual({ bytes: 7, inodes: 70 });
  expect(podDiskUsage(s, p, ["logs", "localVolumeSource"])).toEqual({ bytes: 6, inodes: 60 });
  expect(podDiskUsage(s, p, ["root"])).toEqual({ bytes: 1, inodes: 10 });
});

test("pod-level resources: only the pod's own requests count, the containers' are skipped (upstream GetResourceRequestQuantity)", () => {
  const withPodLevel = (p: Pod, resources: Record<string, Record<string, string>>): Pod => ({ ...p, spec: { ...p.spec, resources } });
  const p = pod({ name: "p", requests: { memory: "10Mi", "ephemeral-storage": "1Gi" } });
  expect(podRequest(withPodLevel(p, { requests: { memory: "64Mi" } }), "memory")).toBe(64 * Mi);
  expect(podRequest(withPodLevel(p, { requests: { cpu: "1" } }), "memory")).toBe(0);
  expect(podRequest(withPodLevel(p, { requests: { memory: "64Mi" } }), "ephemeral-storage")).toBe(0);
  // Pod limits only: its memory request defaults to the containers' aggregate (10Mi), as the API server stores the pod.
  expect(podRequest(withPodLevel(p, { limits: { cpu: "1", memory: "32Mi" } }), "memory")).toBe(10 * Mi);
});
