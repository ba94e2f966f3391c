import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { admitPodFeatures, appArmorEnabled, appArmorRequired, podLevelResourcesSet } from "./pod-features.ts";

const pod = (spec: Record<string, unknown> = {}): Pod =>
  ({ metadata: { name: "p", namespace: "default", uid: "u1" }, spec: { containers: [{ name: "c", image: "busybox" }], ...spec } }) as unknown as Pod;
const on = { podLevelResources: true, userNamespacesSupport: true };

describe("pod-level resources", () => {
  test("spec.resources with cpu or memory: admitted with the gate on (acted on), rejected with upstream's reason and message with it off", () => {
    const p = pod({ resources: { limits: { cpu: "1", memory: "1Gi" } } });
    expect(admitPodFeatures(p, on)).toEqual({ admit: true });
    expect(admitPodFeatures(pod({ resources: { limits: { "example.com/gpu": "1" } } }), { ...on, podLevelResources: false })).toEqual({ admit: true });
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
  test("hostUsers: false is admitted with the gate on (the runtime step gives the user namespace or refuses it), rejected with it off", () => {
    expect(admitPodFeatures(pod({ hostUsers: false }), on)).toEqual({ admit: true });
    expect(admitPodFeatures(pod({ hostUsers: false }), { ...on, userNamespacesSupport: false })).toEqual({
      admit: false,
      reason: "UserNamespacesNotSupported",
      message: 'the feature gate "UserNamespacesSupport" is disabled: can\'t set spec.HostUsers',
    });
  });
  test("hostUsers: true or unset is admitted", () => {
    expect(admitPodFeatures(pod({ hostUsers: true }), on)).toEqual({ admit: true });
  });
});

describe("what else a pod asks for that this node cannot give", () => {
  const withContainer = (extra: Record<string, unknown>) => pod({ containers: [{ name: "c", image: "busybox", ...extra }] });
  test("AppArmor profiles other than Unconfined: upstream's reason and message on a host without AppArmor; refused too where it is enabled", () => {
    const profile = { securityContext: { appArmorProfile: { type: "RuntimeDefault" } } };
    expect(admitPodFeatures(pod(profile), on)).toEqual({ admit: false, reason: "AppArmor", message: "Cannot enforce AppArmor: AppArmor is not enabled on the host" });
    expect(admitPodFeatures(withContainer(profile), { ...on, appArmorEnabled: true })).toEqual({
      admit: false,
      reason: "AppArmor",
      message: "Cannot enforce AppArmor: this agent does not pass AppArmor profiles to the runtime",
    });
    expect(appArmorRequired(pod({ securityContext: { appArmorProfile: { type: "Unconfined" } } }))).toBe(false);
    const annotated = (value: string) =>
      ({ ...pod(), metadata: { name: "p", uid: "u1", annotations: { "container.apparmor.security.beta.kubernetes.io/c": value } } }) as unknown as Pod;
    expect(appArmorRequired(annotated("runtime/default"))).toBe(true);
    expect(appArmorRequired(annotated("unconfined"))).toBe(false);
    expect(appArmorEnabled("/nonexistent")).toBe(false);
    expect(appArmorEnabled("/sys", () => "Y\n")).toBe(true);
  });
  test("supplementalGroupsPolicy Strict, resourceClaims and volumeDevices are rejected, never run without", () => {
    expect(admitPodFeatures(pod({ securityContext: { supplementalGroupsPolicy: "Strict" } }), on)).toEqual({
      admit: false,
      reason: "SupplementalGroupsPolicyNotSupported",
      message: "SupplementalGroupsPolicy=Strict is not supported in this node",
    });
    expect(admitPodFeatures(pod({ securityContext: { supplementalGroupsPolicy: "Merge" } }), on)).toEqual({ admit: true });
    expect(admitPodFeatures(pod({ resourceClaims: [{ name: "gpu", resourceClaimName: "gpu-claim" }] }), on)).toMatchObject({
      admit: false,
      reason: "DynamicResourceAllocationNotSupported",
    });
    expect(admitPodFeatures(withContainer({ volumeDevices: [{ name: "blk", devicePath: "/dev/xvda" }] }), on)).toEqual({
      admit: false,
      reason: "BlockVolumeNotSupported",
      message: 'container "c": volumeDevices (raw block volumes) are not supported by this agent',
    });
  });
});
