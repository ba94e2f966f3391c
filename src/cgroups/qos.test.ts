import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { podQosClass } from "./qos.ts";

const pod = (...resources: ({ requests?: Record<string, string>; limits?: Record<string, string> } | undefined)[]): Pod => ({
  metadata: { name: "p" },
  spec: { containers: resources.map((r, i) => ({ name: `c${i}`, image: "i", ...(r ? { resources: r } : {}) })) },
});

test.each([
  ["no resources", pod(undefined), "BestEffort"],
  ["only ephemeral-storage", pod({ limits: { "ephemeral-storage": "1Gi" } }), "BestEffort"],
  ["limits for cpu and memory (requests default to them)", pod({ limits: { cpu: "1", memory: "1Gi" } }), "Guaranteed"],
  ["equal requests and limits, different notation", pod({ requests: { cpu: "1000m", memory: "1024Mi" }, limits: { cpu: "1", memory: "1Gi" } }), "Guaranteed"],
  ["requests below limits", pod({ requests: { cpu: "500m", memory: "1Gi" }, limits: { cpu: "1", memory: "1Gi" } }), "Burstable"],
  ["only a cpu limit", pod({ limits: { cpu: "1" } }), "Burstable"],
  ["one guaranteed, one best effort container", pod({ limits: { cpu: "1", memory: "1Gi" } }, undefined), "Burstable"],
  ["only requests", pod({ requests: { memory: "10Mi" } }), "Burstable"],
] as const)("%s → %s", (_name, p, qos) => {
  expect(podQosClass(p)).toBe(qos);
});

describe("pod-level resources decide the class, as upstream ComputePodQOS", () => {
  const withPodLevel = (resources: Record<string, unknown>, containerResources: Record<string, unknown> = {}) =>
    ({ metadata: { name: "p", namespace: "d", uid: "u" }, spec: { resources, containers: [{ name: "c", image: "i", resources: containerResources }] } }) as unknown as Pod;
  test("limits on cpu and memory: Guaranteed, though the containers ask for nothing", () => {
    expect(podQosClass(withPodLevel({ limits: { cpu: "500m", memory: "64Mi" } }))).toBe("Guaranteed");
  });
  test("requests only: Burstable; memory only: Burstable; the containers' own resources do not count", () => {
    expect(podQosClass(withPodLevel({ requests: { cpu: "1" } }, { limits: { cpu: "1", memory: "1Gi" } }))).toBe("Burstable");
    expect(podQosClass(withPodLevel({ limits: { memory: "64Mi" } }))).toBe("Burstable");
  });
});
