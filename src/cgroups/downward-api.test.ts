import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { ResourceFieldRefError, resourceFieldRefValue } from "./downward-api.ts";

const node = { cpuMilli: 4000, memoryBytes: 8 * 2 ** 30, ephemeralStorageBytes: 100 * 2 ** 30 };

const pod = {
  metadata: { name: "p", namespace: "ns", uid: "u" },
  spec: {
    containers: [{ name: "app", image: "i", resources: { limits: { cpu: "250m", memory: "100Mi" }, requests: { cpu: "100m" } } }],
    initContainers: [{ name: "init", image: "i", resources: { limits: { cpu: "1500m" } } }],
  },
} as unknown as Pod;
const app = pod.spec.containers[0]!;

const value = (resource: string, divisor?: string | number, containerName?: string) => resourceFieldRefValue(pod, app, { resource, divisor, containerName }, node);

describe("resourceFieldRefValue (upstream ExtractContainerResourceValue)", () => {
  test("cpu is ceil(MilliValue / divisor.MilliValue); no divisor or a zero one is 1 core", () => {
    expect([value("limits.cpu"), value("limits.cpu", "0"), value("limits.cpu", 0), value("limits.cpu", "1m"), value("limits.cpu", "100m")]).toEqual(["1", "1", "1", "250", "3"]);
  });

  test("the others are ceil(Value / divisor.Value); an unset request is 0, an unset limit the allocatable", () => {
    expect([value("limits.memory", "1Mi"), value("limits.memory", "1Gi"), value("requests.memory"), value("requests.memory", "1Mi")]).toEqual(["100", "1", "104857600", "100"]);
    expect([value("limits.ephemeral-storage", "1Gi"), value("requests.ephemeral-storage")]).toEqual(["100", "0"]);
  });

  test("a named container is looked up among the containers, then the init containers; else the own one", () => {
    expect(value("limits.cpu", "1m", "init")).toBe("1500");
    expect(value("requests.cpu", "1m", "app")).toBe("100");
    expect(resourceFieldRefValue(pod, undefined, { resource: "limits.cpu", containerName: "init", divisor: "1m" }, node)).toBe("1500");
  });

  test("errors carry upstream's messages", () => {
    expect(() => value("limits.cpu", undefined, "nope")).toThrow(new ResourceFieldRefError("container nope not found"));
    expect(() => value("limits.gpu")).toThrow(new ResourceFieldRefError("unsupported container resource : limits.gpu"));
    expect(() => value("cpu")).toThrow(new ResourceFieldRefError("unsupported container resource : cpu"));
    expect(() => value("capacity.cpu")).toThrow(new ResourceFieldRefError("unsupported container resource : capacity.cpu"));
  });
});
