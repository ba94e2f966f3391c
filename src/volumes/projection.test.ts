import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import type { Payload } from "./atomic-writer.ts";
import { configMapBytes, configMapMissingKey, formatMap, projectDownwardAPI, projectKeys, ProjectionError, secretBytes } from "./projection.ts";

const text = (p: Payload) => Object.fromEntries([...p].map(([k, v]) => [k, { text: new TextDecoder().decode(v.content), mode: v.mode.toString(8) }]));
const node = { cpuMilli: 4000, memoryBytes: 8 * 2 ** 30, ephemeralStorageBytes: 100 * 2 ** 30 };
const pod: Pod = {
  metadata: { name: "p", namespace: "ns", uid: "u", labels: { b: "2", a: 'say "hi"' }, annotations: { note: "x" } },
  spec: { containers: [{ name: "c", image: "i", resources: { limits: { cpu: "1500m", memory: "64Mi" }, requests: { cpu: "250m" } } }] },
};

describe("projectKeys", () => {
  const keys = configMapBytes({ data: { a: "1", b: "2" }, binaryData: { bin: Buffer.from([0, 1]).toString("base64") } });

  test("without items every key is a file of its name with the default mode, binaryData decoded", () => {
    const p: Payload = new Map();
    projectKeys(p, keys, undefined, 0o644, false, configMapMissingKey);
    expect(text(p)).toMatchObject({ a: { text: "1", mode: "644" }, b: { text: "2", mode: "644" } });
    expect([...p.get("bin")!.content]).toEqual([0, 1]);
  });

  test("items pick keys, place them at their paths, and take their own mode", () => {
    const p: Payload = new Map();
    projectKeys(
      p,
      keys,
      [
        { key: "a", path: "dir/first" },
        { key: "b", path: "second", mode: 0o400 },
      ],
      0o640,
      false,
      configMapMissingKey,
    );
    expect(text(p)).toEqual({ "dir/first": { text: "1", mode: "640" }, second: { text: "2", mode: "400" } });
  });

  test("a missing key fails a required source with upstream's message and is skipped by an optional one", () => {
    expect(() => projectKeys(new Map(), keys, [{ key: "nope", path: "x" }], 0o644, false, configMapMissingKey)).toThrow("configmap references non-existent config key: nope");
    const p: Payload = new Map();
    projectKeys(p, keys, [{ key: "nope", path: "x" }], 0o644, true, configMapMissingKey);
    expect(p.size).toBe(0);
  });

  test("secret values are base64 as the API sends them", () => {
    expect(new TextDecoder().decode(secretBytes({ data: { k: Buffer.from("s3cret").toString("base64") } }).get("k"))).toBe("s3cret");
  });
});

describe("projectDownwardAPI", () => {
  test('metadata fields, label and annotation maps in upstream\'s key="value" format', () => {
    const p: Payload = new Map();
    projectDownwardAPI(
      p,
      pod,
      [
        { path: "name", fieldRef: { fieldPath: "metadata.name" } },
        { path: "ns", fieldRef: { fieldPath: "metadata.namespace" } },
        { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
        { path: "one", fieldRef: { fieldPath: "metadata.annotations['note']" }, mode: 0o600 },
      ],
      0o644,
      node,
    );
    expect(text(p)).toEqual({
      name: { text: "p", mode: "644" },
      ns: { text: "ns", mode: "644" },
      labels: { text: 'a="say \\"hi\\""\nb="2"', mode: "644" },
      one: { text: "x", mode: "600" },
    });
  });

  test("container resources with divisors; unset limits are the node's allocatable", () => {
    const p: Payload = new Map();
    projectDownwardAPI(
      p,
      pod,
      [
        { path: "cpu", resourceFieldRef: { containerName: "c", resource: "limits.cpu" } },
        { path: "cpu-m", resourceFieldRef: { containerName: "c", resource: "limits.cpu", divisor: "1m" } },
        { path: "mem-mi", resourceFieldRef: { containerName: "c", resource: "limits.memory", divisor: "1Mi" } },
        { path: "req-cpu-m", resourceFieldRef: { containerName: "c", resource: "requests.cpu", divisor: "1m" } },
        { path: "storage", resourceFieldRef: { containerName: "c", resource: "limits.ephemeral-storage", divisor: "1Gi" } },
      ],
      0o644,
      node,
    );
    expect(Object.fromEntries([...p].map(([k, v]) => [k, new TextDecoder().decode(v.content)]))).toEqual({
      cpu: "2",
      "cpu-m": "1500",
      "mem-mi": "64",
      "req-cpu-m": "250",
      storage: "100",
    });
  });

  test("huge pages: the container's amount with a divisor; one it does not set is 0, not the allocatable", () => {
    const p: Payload = new Map();
    const huge: Pod = { ...pod, spec: { containers: [{ name: "c", image: "i", resources: { limits: { "hugepages-2Mi": "6Mi", memory: "64Mi" } } }] } };
    projectDownwardAPI(
      p,
      huge,
      [
        { path: "limit", resourceFieldRef: { containerName: "c", resource: "limits.hugepages-2Mi", divisor: "4Mi" } },
        { path: "request", resourceFieldRef: { containerName: "c", resource: "requests.hugepages-2Mi" } },
        { path: "unset", resourceFieldRef: { containerName: "c", resource: "limits.hugepages-1Gi" } },
      ],
      0o644,
      node,
    );
    expect(Object.fromEntries([...p].map(([k, v]) => [k, new TextDecoder().decode(v.content)]))).toEqual({ limit: "2", request: String(6 * 2 ** 20), unset: "0" });
  });

  test("pod-level limits stand in for the limits a container does not set (upstream podAllocatable)", () => {
    const p: Payload = new Map();
    const podLevel: Pod = { ...pod, spec: { resources: { limits: { cpu: "2" } }, containers: [{ name: "c", image: "i" }] } };
    projectDownwardAPI(
      p,
      podLevel,
      [
        { path: "cpu-m", resourceFieldRef: { containerName: "c", resource: "limits.cpu", divisor: "1m" } },
        { path: "mem-gi", resourceFieldRef: { containerName: "c", resource: "limits.memory", divisor: "1Gi" } },
      ],
      0o644,
      node,
    );
    expect(Object.fromEntries([...p].map(([k, v]) => [k, new TextDecoder().decode(v.content)]))).toEqual({ "cpu-m": "2000", "mem-gi": "8" });
  });

  test("unsupported field paths fail with upstream's message", () => {
    expect(() => projectDownwardAPI(new Map(), pod, [{ path: "x", fieldRef: { fieldPath: "status.podIP" } }], 0o644, node)).toThrow(
      new ProjectionError("unsupported fieldPath: status.podIP"),
    );
  });

  test("formatMap sorts keys", () => {
    expect(formatMap({ z: "1", a: "2" })).toBe('a="2"\nz="1"');
  });
});
