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

describe("pod-level resources: upstream's ComputePodQOS table (qos_test.go)", () => {
  type R = { requests?: Record<string, string>; limits?: Record<string, string> };
  const withPod = (podResources: R, ...containers: R[]) =>
    ({
      metadata: { name: "p", uid: "u" },
      spec: { resources: podResources, containers: containers.map((resources, i) => ({ name: `c${i}`, image: "i", resources })) },
    }) as unknown as Pod;
  const rl = (cpu: string, memory: string) => ({ ...(cpu ? { cpu } : {}), ...(memory ? { memory } : {}) });
  test.each<[string, Pod, string]>([
    ["guaranteed-with-pod-level-resources", withPod({ requests: rl("10m", "100Mi"), limits: rl("10m", "100Mi") }, {}), "Guaranteed"],
    [
      "guaranteed-with-pod-and-container-level-resources",
      withPod({ requests: rl("10m", "100Mi"), limits: rl("10m", "100Mi") }, { requests: rl("3m", "10Mi"), limits: rl("5m", "20Mi") }),
      "Guaranteed",
    ],
    ["burstable-with-pod-level-resources", withPod({ requests: rl("10m", "10Mi"), limits: rl("20m", "50Mi") }, {}), "Burstable"],
    [
      "burstable-with-pod-and-container-level-resources",
      withPod({ requests: rl("10m", "10Mi"), limits: rl("20m", "50Mi") }, { requests: rl("5m", "10Mi"), limits: rl("5m", "10Mi") }),
      "Burstable",
    ],
    ["burstable-with-pod-and-container-level-requests", withPod({ requests: rl("10m", "10Mi") }, { requests: rl("5m", "10Mi") }), "Burstable"],
    [
      "burstable-with-pod-and-container-level-resources-2",
      withPod({ requests: rl("10m", "10Mi"), limits: rl("5m", "") }, { requests: rl("5m", "10Mi") }, { requests: rl("5m", "10Mi"), limits: rl("5m", "10Mi") }),
      "Burstable",
    ],
    // Static pods are not defaulted by an API server: the pod's limits with container requests default the pod's requests to those (Burstable).
    ["pod limits, container requests below them (defaulted requests)", withPod({ limits: rl("500m", "64Mi") }, { requests: rl("100m", "32Mi") }), "Burstable"],
    ["spec.resources present but empty: BestEffort whatever the containers ask, as upstream", withPod({}, { limits: rl("1", "1Gi") }), "BestEffort"],
  ])("%s → %s", (_n, p, qos) => {
    expect(podQosClass(p)).toBe(qos as never);
  });
});
