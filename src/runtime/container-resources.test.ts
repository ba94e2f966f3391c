import { describe, expect, test } from "bun:test";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { changedResources, mixResources, podResourcesOf, resizeAction, resourcesOf, samePodResources, withPodResources } from "./container-resources.ts";
import { podResizeSteps } from "./resize-steps.ts";

const container = (resources: ContainerSpec["resources"], extra: Partial<ContainerSpec> = {}): ContainerSpec => ({ name: "app", image: "busybox", resources, ...extra });

describe("resize resources", () => {
  test("only cpu and memory count, by value, with requests defaulting to limits", () => {
    expect(resourcesOf(container({ requests: { cpu: "100m", "ephemeral-storage": "1Gi" }, limits: { memory: "64Mi" } }))).toEqual({
      requests: { cpu: "100m" },
      limits: { memory: "64Mi" },
    });
    expect(changedResources({ limits: { cpu: "0.5" } }, { requests: { cpu: "500m" }, limits: { cpu: "500m" } })).toEqual([]);
    expect(changedResources({ limits: { cpu: "1", memory: "1Gi" } }, { limits: { cpu: "1", memory: "1025Mi" } })).toEqual(["memory"]);
    expect(samePodResources({ a: { limits: { cpu: "1" } } }, { a: { limits: { cpu: "1000m" } } })).toBe(true);
    expect(samePodResources({ a: {} }, { b: {} })).toBe(false);
  });

  test("resizePolicy decides in place or restart, per changed resource (NotRequired by default)", () => {
    const from = { requests: { cpu: "100m", memory: "32Mi" }, limits: { cpu: "200m", memory: "64Mi" } };
    const memoryRestarts = { resizePolicy: [{ resourceName: "memory", restartPolicy: "RestartContainer" as const }] };
    expect(resizeAction(container(from), from)).toBe("none");
    expect(resizeAction(container({ ...from, limits: { cpu: "300m", memory: "64Mi" } }), from)).toBe("inPlace");
    expect(resizeAction(container({ ...from, limits: { cpu: "300m", memory: "64Mi" } }, memoryRestarts), from)).toBe("inPlace");
    expect(resizeAction(container({ ...from, limits: { cpu: "200m", memory: "96Mi" } }, memoryRestarts), from)).toBe("restart");
  });

  test("sidecars are part of a pod's resizable resources; regular init containers are not", () => {
    const p: Pod = {
      metadata: { uid: "u" },
      spec: {
        initContainers: [
          { ...container({ limits: { cpu: "1" } }), name: "setup" },
          { ...container({ limits: { cpu: "2" } }), name: "proxy", restartPolicy: "Always" },
        ],
        containers: [container({ limits: { cpu: "3" } })],
      },
    };
    expect(Object.keys(podResourcesOf(p)).sort()).toEqual(["app", "proxy"]);
    const out = withPodResources(p, () => ({ limits: { cpu: "5" } }));
    expect(out.spec.initContainers!.map((c) => c.resources?.limits?.cpu)).toEqual(["1", "5"]);
  });

  test("withPodResources replaces cpu and memory and keeps other resources", () => {
    const pod: Pod = { metadata: { uid: "u" }, spec: { containers: [container({ requests: { cpu: "1", "ephemeral-storage": "1Gi" }, limits: { cpu: "2" } })] } };
    const out = withPodResources(pod, () => ({ requests: { cpu: "500m" }, limits: { memory: "1Gi" } }));
    expect(out.spec.containers[0]!.resources).toEqual({ requests: { "ephemeral-storage": "1Gi", cpu: "500m" }, limits: { memory: "1Gi" } });
    expect(pod.spec.containers[0]!.resources?.requests?.cpu).toBe("1");
  });

  test("mixResources takes each resource from one side", () => {
    const from = { requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "2", memory: "2Gi" } };
    const to = { requests: { cpu: "3", memory: "512Mi" }, limits: { cpu: "4", memory: "1Gi" } };
    expect(mixResources(from, to, { cpu: true, memory: false })).toEqual({ requests: { cpu: "3", memory: "1Gi" }, limits: { cpu: "4", memory: "2Gi" } });
  });
});

describe("podResizeSteps (upstream order: grow the pod first, shrink it last)", () => {
  const pod = (limits: { cpu: string; memory: string }): Pod => ({
    metadata: { uid: "u" },
    spec: { containers: [container({ requests: { cpu: "100m", memory: "32Mi" }, limits })] },
  });
  const applied = { requests: { cpu: "100m", memory: "32Mi" }, limits: { cpu: "200m", memory: "64Mi" } };

  test("cpu grows and memory shrinks: the pod cgroup first gets the new cpu and keeps the old memory", () => {
    const steps = podResizeSteps(pod({ cpu: "300m", memory: "48Mi" }), () => applied);
    expect(steps.podFirst.spec.containers[0]!.resources?.limits).toEqual({ cpu: "300m", memory: "64Mi" });
    expect(steps.memoryShrinks("app")).toBe(true);
  });

  test("both grow: the pod cgroup gets everything new at once; nothing shrinks", () => {
    const steps = podResizeSteps(pod({ cpu: "300m", memory: "96Mi" }), () => applied);
    expect(steps.podFirst.spec.containers[0]!.resources?.limits).toEqual({ cpu: "300m", memory: "96Mi" });
    expect(steps.memoryShrinks("app")).toBe(false);
  });

  test("both shrink: the pod cgroup keeps the old values until the containers are done", () => {
    const steps = podResizeSteps(pod({ cpu: "150m", memory: "48Mi" }), () => applied);
    expect(steps.podFirst.spec.containers[0]!.resources?.limits).toEqual({ cpu: "200m", memory: "64Mi" });
  });
});
