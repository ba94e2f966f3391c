import { describe, expect, test } from "bun:test";
import { FakePodObjects } from "../api/objects.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { containerEnv, EnvError, type EnvContext } from "./env.ts";
import { expand, expandCommand } from "../pods/expansion.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");
const allocatable = { cpuMilli: 4000, memoryBytes: 8 * 1024 ** 3, ephemeralStorageBytes: 100 * 1024 ** 3 };

function ctx(objects = new FakePodObjects(), warnings: string[] = []): EnvContext {
  return { values: { podIP: "10.0.0.9" }, objects, allocatable, warn: (reason, message) => void warnings.push(`${reason}: ${message}`) };
}
const podWith = (container: Partial<ContainerSpec>, extra: Partial<Pod["spec"]> = {}): Pod => ({
  metadata: { name: "web", namespace: "ns", uid: "u", labels: { app: "x" } },
  spec: { nodeName: "n1", containers: [{ name: "c", image: "i", ...container }], ...extra },
});
const envOf = async (pod: Pod, c = ctx()) => containerEnv(pod, pod.spec.containers[0]!, c);
const errorOf = async (pod: Pod, c = ctx()) => {
  try {
    await envOf(pod, c);
  } catch (err) {
    return err;
  }
  return undefined;
};

describe("env", () => {
  test("expand follows upstream rules", () => {
    const vars = new Map([
      ["A", "1"],
      ["B", "two"],
    ]);
    const look = (n: string) => vars.get(n);
    expect(expand("$(A)-$(B)", look)).toBe("1-two");
    expect(expand("$$(A)", look)).toBe("$(A)");
    expect(expand("$(MISSING)", look)).toBe("$(MISSING)");
    expect(expand("$A $(A", look)).toBe("$A $(A");
  });

  test("values reference earlier variables and fieldRefs resolve", async () => {
    const pod = podWith({
      env: [
        { name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
        { name: "GREETING", value: "hi $(POD) on $(NODE)" },
        { name: "NODE", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
        { name: "APP", valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
        { name: "IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
      ],
    });
    const env = await envOf(pod);
    expect(env).toEqual([
      { key: "POD", value: "web" },
      { key: "GREETING", value: "hi web on $(NODE)" },
      { key: "NODE", value: "n1" },
      { key: "APP", value: "x" },
      { key: "IP", value: "10.0.0.9" },
    ]);
    expect(expandCommand(["echo", "$(POD)"], env)).toEqual(["echo", "web"]);
  });

  test("configMapKeyRef and secretKeyRef read the pod's namespace; secret data is decoded", async () => {
    const objects = new FakePodObjects();
    objects.configMaps.set("ns/cfg", { data: { mode: "fast" }, binaryData: {} });
    objects.secrets.set("ns/creds", { data: { password: b64("s3cret\n") } });
    const env = await envOf(
      podWith({
        env: [
          { name: "MODE", valueFrom: { configMapKeyRef: { name: "cfg", key: "mode" } } },
          { name: "PW", valueFrom: { secretKeyRef: { name: "creds", key: "password" } } },
          { name: "BOTH", value: "$(MODE)/$(PW)" },
          { name: "OPT", valueFrom: { configMapKeyRef: { name: "cfg", key: "absent", optional: true } } },
          { name: "OPT2", valueFrom: { secretKeyRef: { name: "nothere", key: "k", optional: true } } },
        ],
      }),
      ctx(objects),
    );
    expect(env).toEqual([
      { key: "MODE", value: "fast" },
      { key: "PW", value: "s3cret\n" },
      { key: "BOTH", value: "fast/s3cret\n" },
    ]);
  });

  test("a missing object or key that is not optional fails with upstream's message", async () => {
    const objects = new FakePodObjects();
    objects.configMaps.set("ns/cfg", { data: {}, binaryData: {} });
    objects.secrets.set("ns/creds", { data: {} });
    const cases: [Record<string, unknown>, string][] = [
      [{ configMapKeyRef: { name: "x", key: "k" } }, 'configmap "x" not found'],
      [{ secretKeyRef: { name: "x", key: "k" } }, 'secret "x" not found'],
      [{ configMapKeyRef: { name: "cfg", key: "k" } }, "couldn't find key k in ConfigMap ns/cfg"],
      [{ secretKeyRef: { name: "creds", key: "k" } }, "couldn't find key k in Secret ns/creds"],
    ];
    for (const [valueFrom, message] of cases) {
      const err = await errorOf(podWith({ env: [{ name: "V", valueFrom }] }), ctx(objects));
      expect(err).toBeInstanceOf(EnvError);
      expect((err as Error).message).toBe(message);
    }
    const envFromErr = await errorOf(podWith({ envFrom: [{ secretRef: { name: "gone" } }] }), ctx(objects));
    expect((envFromErr as Error).message).toBe('secret "gone" not found');
  });

  test("envFrom: prefix, optional sources, invalid names skipped with one event, env overrides envFrom", async () => {
    const objects = new FakePodObjects();
    objects.configMaps.set("ns/cfg", { data: { A: "1", "bad key": "x", "1st": "y", B: "2" }, binaryData: {} });
    objects.secrets.set("ns/sec", { data: { TOKEN: b64("t") } });
    const warnings: string[] = [];
    const env = await envOf(
      podWith({
        envFrom: [{ configMapRef: { name: "cfg" } }, { prefix: "S_", secretRef: { name: "sec" } }, { configMapRef: { name: "missing", optional: true } }],
        env: [{ name: "B", value: "override $(A)" }],
      }),
      ctx(objects, warnings),
    );
    expect(env).toEqual([
      { key: "A", value: "1" },
      { key: "B", value: "override 1" },
      { key: "S_TOKEN", value: "t" },
    ]);
    expect(warnings).toEqual([
      "InvalidEnvironmentVariableNames: Keys [1st, bad key] from the EnvFrom configMap ns/cfg were skipped since they are considered invalid environment variable names.",
    ]);
  });

  test("resourceFieldRef: limits and requests with divisors, rounded up; unset limits are the node's allocatable", async () => {
    const pod = podWith(
      {
        resources: { limits: { cpu: "250m", memory: "64Mi" }, requests: { cpu: "100m" } },
        env: [
          { name: "CPU_LIMIT", valueFrom: { resourceFieldRef: { resource: "limits.cpu" } } },
          { name: "CPU_LIMIT_M", valueFrom: { resourceFieldRef: { resource: "limits.cpu", divisor: "1m" } } },
          { name: "CPU_REQ_M", valueFrom: { resourceFieldRef: { resource: "requests.cpu", divisor: "1m" } } },
          { name: "MEM_MI", valueFrom: { resourceFieldRef: { resource: "limits.memory", divisor: "1Mi" } } },
          { name: "MEM_REQ", valueFrom: { resourceFieldRef: { resource: "requests.memory" } } },
          { name: "EPH", valueFrom: { resourceFieldRef: { resource: "limits.ephemeral-storage", divisor: "1Gi" } } },
          { name: "OTHER_CPU", valueFrom: { resourceFieldRef: { containerName: "side", resource: "limits.cpu" } } },
          { name: "EPH_REQ", valueFrom: { resourceFieldRef: { resource: "requests.ephemeral-storage" } } },
        ],
      },
      { initContainers: [{ name: "side", image: "i" }] },
    );
    expect(Object.fromEntries((await envOf(pod)).map((e) => [e.key, e.value]))).toEqual({
      CPU_LIMIT: "1",
      CPU_LIMIT_M: "250",
      CPU_REQ_M: "100",
      MEM_MI: "64",
      MEM_REQ: String(64 * 1024 * 1024), // requests default to limits
      EPH: "100",
      OTHER_CPU: "4",
      EPH_REQ: "0",
    });
    const bad = await errorOf(podWith({ env: [{ name: "X", valueFrom: { resourceFieldRef: { resource: "limits.gpu" } } }] }));
    expect((bad as Error).message).toBe("unsupported container resource : limits.gpu");
  });

  test("resourceFieldRef: huge pages with a divisor; one the container does not set is 0, not the allocatable", async () => {
    const pod = podWith({
      resources: { limits: { "hugepages-2Mi": "6Mi", memory: "64Mi" } },
      env: [
        { name: "HUGE", valueFrom: { resourceFieldRef: { resource: "limits.hugepages-2Mi", divisor: "4Mi" } } },
        { name: "HUGE_REQ", valueFrom: { resourceFieldRef: { resource: "requests.hugepages-2Mi" } } },
        { name: "HUGE_UNSET", valueFrom: { resourceFieldRef: { resource: "limits.hugepages-1Gi" } } },
      ],
    });
    expect(Object.fromEntries((await envOf(pod)).map((e) => [e.key, e.value]))).toEqual({ HUGE: "2", HUGE_REQ: String(6 * 2 ** 20), HUGE_UNSET: "0" });
  });

  test("resourceFieldRef with pod-level limits: a limit the container does not set is the pod's, not the node's (upstream podAllocatable)", async () => {
    const pod = podWith(
      {
        env: [
          { name: "CPU_M", valueFrom: { resourceFieldRef: { resource: "limits.cpu", divisor: "1m" } } },
          { name: "MEM_MI", valueFrom: { resourceFieldRef: { resource: "limits.memory", divisor: "1Mi" } } },
          { name: "EPH", valueFrom: { resourceFieldRef: { resource: "limits.ephemeral-storage", divisor: "1Gi" } } },
        ],
      },
      { resources: { limits: { cpu: "500m", memory: "64Mi" } } },
    );
    expect(Object.fromEntries((await envOf(pod)).map((e) => [e.key, e.value]))).toEqual({ CPU_M: "500", MEM_MI: "64", EPH: "100" });
  });

  test("an empty value with no source is an empty variable; an unknown source is an error naming it", async () => {
    expect(await envOf(podWith({ env: [{ name: "E" }] }))).toEqual([{ key: "E", value: "" }]);
    const err = await errorOf(podWith({ env: [{ name: "S", valueFrom: { somethingElse: {} } }] }));
    expect((err as Error).message).toContain('env "S"');
  });
});
