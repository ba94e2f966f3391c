import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { admitPodFeatures, podLevelResourcesSet } from "./pod-features.ts";

const pod = (spec: Record<string, unknown> = {}): Pod =>
  ({ metadata: { name: "p", namespace: "default", uid: "u1" }, spec: { containers: [{ name: "c", image: "busybox" }], ...spec } }) as unknown as Pod;
const on = { podLevelResources: true, userNamespacesSupport: true };

describe("pod-level resources", () => {
  test("spec.resources with cpu or memory: rejected with upstream's reason; the message says why for each gate value", () => {
    const p = pod({ resources: { limits: { cpu: "1", memory: "1Gi" } } });
    expect(admitPodFeatures(p, on)).toEqual({
      admit: false,
      reason: "PodLevelResourcesNotSupported",
      message: expect.stringContaining("pod-level resources are not supported on the node"),
    });
    expect(admitPodFeatures(p, { ...on, podLevelResources: false })).toEqual({
      admit: false,
      reason: "PodLevelResourcesNotSupported",
      message: "PodLevelResources feature gate is disabled",
    });
  });
  test("only cpu, memory and hugepages count, as upstream IsPodLevelResourcesSet", () => {
    expect(podLevelResourcesSet(pod({ resources: { requests: { "hugepages-2Mi": "2Mi" } } }))).toBe(true);
    expect(podLevelResourcesSet(pod({ resources: { requests: { "example.com/gpu": "1" } } }))).toBe(false);
    expect(podLevelResourcesSet(pod({ resources: {} }))).toBe(false);
    expect(admitPodFeatures(pod(), on)).toEqual({ admit: true });
  });
});

describe("user namespaces", () => {
  test("hostUsers: false is rejected, never run in the host's user namespace", () => {
    expect(admitPodFeatures(pod({ hostUsers: false }), on)).toEqual({
      admit: false,
      reason: "UserNamespacesNotSupported",
      message: expect.stringContaining("can't set `spec.hostUsers: false`"),
    });
    expect(admitPodFeatures(pod({ hostUsers: false }), { ...on, userNamespacesSupport: false })).toMatchObject({
      message: expect.stringContaining('"UserNamespacesSupport" is disabled'),
    });
  });
  test("hostUsers: true or unset is admitted", () => {
    expect(admitPodFeatures(pod({ hostUsers: true }), on)).toEqual({ admit: true });
  });
});
