import { describe, expect, test } from "bun:test";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { nodeResourceConfig, podLimits, podRequests, podResourceConfig, qosResourceConfigs, reservedEnforcements, type ResourceConfig } from "./resources.ts";

type Res = { requests?: Record<string, string>; limits?: Record<string, string> };
const c = (name: string, resources?: Res, extra: Partial<ContainerSpec> = {}): ContainerSpec => ({ name, image: "i", ...(resources ? { resources } : {}), ...extra });
const rl = (cpu?: string, memory?: string) => ({ ...(cpu ? { cpu } : {}), ...(memory ? { memory } : {}) });
const res = (req: [string?, string?], lim: [string?, string?]): Res => ({ requests: rl(...req), limits: rl(...lim) });
const pod = (containers: ContainerSpec[], spec: Record<string, unknown> = {}): Pod => ({ metadata: { name: "p", uid: "u" }, spec: { containers, ...spec } });

const opts = { cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, podPidsLimit: -1 };
const MI = 1024 * 1024;

describe("podResourceConfig (upstream TestResourceConfigForPod)", () => {
  test.each<[string, Pod, Partial<typeof opts> & { memoryQoS?: boolean }, ResourceConfig]>([
    ["besteffort", pod([c("a")]), {}, { cpuShares: 2, pidsLimit: -1 }],
    ["burstable-no-limits", pod([c("a", res(["100m", "100Mi"], []))]), {}, { cpuShares: 102, pidsLimit: -1 }],
    [
      "burstable-with-limits",
      pod([c("a", res(["100m", "100Mi"], ["200m", "200Mi"]))]),
      {},
      { cpuShares: 102, cpuQuota: 20_000, cpuPeriod: 100_000, memoryLimit: 200 * MI, pidsLimit: -1 },
    ],
    [
      "burstable-with-limits-no-cpu-enforcement",
      pod([c("a", res(["100m", "100Mi"], ["200m", "200Mi"]))]),
      { cpuCFSQuota: false },
      { cpuShares: 102, cpuQuota: -1, cpuPeriod: 100_000, memoryLimit: 200 * MI, pidsLimit: -1 },
    ],
    [
      "burstable-partial-limits: one unlimited container makes the pod unlimited",
      pod([c("a", res(["100m", "100Mi"], ["200m", "200Mi"])), c("b", res(["100m", "100Mi"], []))]),
      {},
      { cpuShares: 204, pidsLimit: -1 },
    ],
    [
      "burstable with only memory limits everywhere: memory limit, no quota",
      pod([c("a", res(["100m"], [undefined, "100Mi"])), c("b", res([], [undefined, "50Mi"]))]),
      {},
      { cpuShares: 102, memoryLimit: 150 * MI, pidsLimit: -1 },
    ],
    ["guaranteed", pod([c("a", res(["100m", "100Mi"], ["100m", "100Mi"]))]), {}, { cpuShares: 102, cpuQuota: 10_000, cpuPeriod: 100_000, memoryLimit: 100 * MI, pidsLimit: -1 }],
    [
      "guaranteed (requests defaulted from limits)",
      pod([c("a", { limits: rl("1", "1Gi") }), c("b", { limits: rl("500m", "512Mi") })]),
      {},
      { cpuShares: 1536, cpuQuota: 150_000, cpuPeriod: 100_000, memoryLimit: 1536 * MI, pidsLimit: -1 },
    ],
    [
      "guaranteed-no-cpu-enforcement",
      pod([c("a", res(["100m", "100Mi"], ["100m", "100Mi"]))]),
      { cpuCFSQuota: false },
      { cpuShares: 102, cpuQuota: -1, cpuPeriod: 100_000, memoryLimit: 100 * MI, pidsLimit: -1 },
    ],
    [
      "guaranteed-with-50ms-period",
      pod([c("a", res(["100m", "100Mi"], ["100m", "100Mi"]))]),
      { cpuCFSQuotaPeriodUs: 50_000 },
      { cpuShares: 102, cpuQuota: 5_000, cpuPeriod: 50_000, memoryLimit: 100 * MI, pidsLimit: -1 },
    ],
    [
      "tiny cpu limit: quota at least 1 ms",
      pod([c("a", res(["1m", "10Mi"], ["1m", "10Mi"]))]),
      {},
      { cpuShares: 2, cpuQuota: 1000, cpuPeriod: 100_000, memoryLimit: 10 * MI, pidsLimit: -1 },
    ],
    [
      "init container larger than the app: max'ed",
      pod([c("a", res(["100m", "100Mi"], ["100m", "100Mi"]))], { initContainers: [c("i", res(["1", "1Gi"], ["1", "1Gi"]))] }),
      {},
      { cpuShares: 1024, cpuQuota: 100_000, cpuPeriod: 100_000, memoryLimit: 1024 * MI, pidsLimit: -1 },
    ],
    [
      "burstable-partial-limits-with-init-containers: an init container without limits makes the pod unlimited",
      pod([c("a", res(["100m", "100Mi"], ["200m", "200Mi"]))], { initContainers: [c("i", res(["100m", "100Mi"], []))] }),
      {},
      { cpuShares: 102, pidsLimit: -1 },
    ],
    [
      "sidecar: summed with the app, and counted under each later init container",
      pod([c("a", res(["100m", "100Mi"], ["100m", "100Mi"]))], {
        initContainers: [c("side", res(["200m", "50Mi"], ["200m", "50Mi"]), { restartPolicy: "Always" }), c("init", res(["250m", "10Mi"], ["250m", "10Mi"]))],
      }),
      {},
      // containers+sidecar 300m/150Mi; init peak 200m+250m = 450m / 60Mi → max 450m / 150Mi
      { cpuShares: 460, cpuQuota: 45_000, cpuPeriod: 100_000, memoryLimit: 150 * MI, pidsLimit: -1 },
    ],
    [
      "overhead: added to requests and to non-zero limits",
      pod([c("a", res(["100m", "100Mi"], ["100m", "100Mi"]))], { overhead: { cpu: "250m", memory: "120Mi" } }),
      {},
      { cpuShares: 358, cpuQuota: 35_000, cpuPeriod: 100_000, memoryLimit: 220 * MI, pidsLimit: -1 },
    ],
    [
      "overhead on a burstable pod without limits: only requests",
      pod([c("a", res(["100m", "100Mi"], []))], { overhead: { cpu: "250m", memory: "120Mi" } }),
      {},
      { cpuShares: 358, pidsLimit: -1 },
    ],
    ["podPidsLimit > 0", pod([c("a")]), { podPidsLimit: 1024 }, { cpuShares: 2, pidsLimit: 1024 }],
    ["podPidsLimit 0 means unlimited", pod([c("a")]), { podPidsLimit: 0 }, { cpuShares: 2, pidsLimit: -1 }],
    ["memory QoS: memory.min = memory requests", pod([c("a", res(["100m", "100Mi"], []))]), { memoryQoS: true }, { cpuShares: 102, pidsLimit: -1, memoryMin: 100 * MI }],
    ["memory QoS on a best-effort pod: nothing to protect", pod([c("a")]), { memoryQoS: true }, { cpuShares: 2, pidsLimit: -1 }],
  ])("%s", (_name, p, over, expected) => {
    // No huge pages asked: an empty map, which the writers turn into 0 for every size of the host.
    expect(podResourceConfig(p, { ...opts, ...over })).toEqual({ ...expected, hugePageLimits: new Map() });
  });

  test("huge pages: the pod's hugepages-<size> requests (limits defaulted in) by page size, in every QoS class", () => {
    const hp = (q: string) => ({ limits: { cpu: "1", memory: "64Mi", "hugepages-2Mi": q } });
    const guaranteed = pod([c("a", hp("4Mi")), c("b", hp("6Mi"))]);
    expect(podResourceConfig(guaranteed, opts).hugePageLimits).toEqual(new Map([[2 * MI, 10 * MI]]));
    const burstable = pod([c("a", { requests: { "hugepages-1Gi": "1Gi" }, limits: { "hugepages-1Gi": "1Gi" } })]);
    expect(podResourceConfig(burstable, opts).hugePageLimits).toEqual(new Map([[2 ** 30, 2 ** 30]]));
  });
});

test("podRequests and podLimits: sum, init max, declared flags", () => {
  const p = pod([c("a", res(["100m", "64Mi"], ["1", "128Mi"])), c("b", res(["50m"], ["500m"]))], { initContainers: [c("i", res(["2"], ["2", "1Mi"]))] });
  expect(podRequests(p)).toEqual({ cpu: 2000, memory: 64 * MI });
  expect(podLimits(p)).toEqual({ limits: { cpu: 2000, memory: 128 * MI }, cpuDeclared: true, memoryDeclared: false });
});

describe("qosResourceConfigs (UpdateCgroups)", () => {
  const burstable = (cpu: string, mem = "100Mi") => pod([c("a", res([cpu, mem], []))]);
  const guaranteed = pod([c("a", { limits: rl("1", "1Gi") })]);
  const besteffort = pod([c("a")]);

  test("no pods: burstable and besteffort get the minimum shares", () => {
    expect(qosResourceConfigs([])).toEqual({ guaranteed: {}, burstable: { cpuShares: 2 }, besteffort: { cpuShares: 2 } });
  });

  test("burstable shares = sum of Burstable pods' CPU requests only", () => {
    const c = qosResourceConfigs([burstable("100m"), burstable("400m"), guaranteed, besteffort]);
    expect(c.burstable).toEqual({ cpuShares: 512 });
    expect(c.besteffort).toEqual({ cpuShares: 2 });
  });

  test("memory QoS: memory.min of burstable and of kubepods (Guaranteed + Burstable)", () => {
    const c = qosResourceConfigs([burstable("100m", "100Mi"), guaranteed], { memoryQoS: true });
    expect(c.burstable.memoryMin).toBe(100 * MI);
    expect(c.guaranteed.memoryMin).toBe(1124 * MI);
  });

  test("qosReserved memory=50%: limits keep half of higher classes' requests free", () => {
    const c = qosResourceConfigs([burstable("100m", "200Mi"), guaranteed], { qosReservedMemoryPercent: 50, allocatableMemoryBytes: 4096 * MI });
    expect(c.burstable.memoryLimit).toBe(4096 * MI - 512 * MI);
    expect(c.besteffort.memoryLimit).toBe(4096 * MI - 512 * MI - 100 * MI);
  });

  test("qosReserved without allocatable memory: no limits (upstream: standalone mode)", () => {
    const c = qosResourceConfigs([guaranteed], { qosReservedMemoryPercent: 50 });
    expect(c.burstable.memoryLimit).toBeUndefined();
  });
});

test.each([
  ["enforced, with pids", { cpuMilli: 2000, memoryBytes: 1024 * MI, pids: 4096 }, true, { cpuShares: 2048, memoryLimit: 1024 * MI, pidsLimit: 4096 }],
  ["enforced, no pids", { cpuMilli: 2000, memoryBytes: 1024 * MI }, true, { cpuShares: 2048, memoryLimit: 1024 * MI, pidsLimit: -1 }],
  ["not enforced: shares only", { cpuMilli: 2000, memoryBytes: 1024 * MI, pids: 4096 }, false, { cpuShares: 2048, memoryLimit: -1, pidsLimit: -1 }],
  ["huge cpu: shares clamped", { cpuMilli: 500_000, memoryBytes: 1 }, true, { cpuShares: 262144, memoryLimit: 1, pidsLimit: -1 }],
] as const)("nodeResourceConfig: %s", (_name, alloc, enforce, expected) => {
  expect(nodeResourceConfig(alloc, enforce)).toEqual({ ...expected, hugePageLimits: new Map() });
});

test("nodeResourceConfig: kubepods gets the huge pages it is given (pools, or pools − reserved), by page size", () => {
  const c = nodeResourceConfig({ cpuMilli: 1000, memoryBytes: MI, hugePages: { "hugepages-2Mi": 32 * MI, "hugepages-1Gi": 0 } }, true);
  expect(c.hugePageLimits).toEqual(
    new Map([
      [2 * MI, 32 * MI],
      [2 ** 30, 0],
    ]),
  );
});

describe("reserved cgroups (enforceNodeAllocatable system-reserved / kube-reserved, getCgroupConfig)", () => {
  const base = {
    systemReserved: { cpu: "1", memory: "512Mi", pid: "1000" },
    kubeReserved: { cpu: "100m", memory: "128Mi" },
    systemReservedCgroup: "/system.slice",
    kubeReservedCgroup: "/kube.slice",
  };
  test("full levels: cpu shares, memory limit, pids; compressible: cpu only; MemoryQoS adds memory.min", () => {
    expect(reservedEnforcements({ ...base, enforceNodeAllocatable: ["pods", "system-reserved", "kube-reserved-compressible"] }, false)).toEqual([
      {
        level: "system-reserved",
        field: "systemReservedCgroup",
        cgroup: "/system.slice",
        config: { cpuShares: 1024, memoryLimit: 512 * 2 ** 20, pidsLimit: 1000, hugePageLimits: new Map() },
      },
      { level: "kube-reserved-compressible", field: "kubeReservedCgroup", cgroup: "/kube.slice", config: { cpuShares: 102, hugePageLimits: new Map() } },
    ]);
    expect(reservedEnforcements({ ...base, enforceNodeAllocatable: ["kube-reserved"] }, true)).toEqual([
      {
        level: "kube-reserved",
        field: "kubeReservedCgroup",
        cgroup: "/kube.slice",
        config: { cpuShares: 102, memoryLimit: 128 * 2 ** 20, memoryMin: 128 * 2 ** 20, hugePageLimits: new Map() },
      },
    ]);
  });

  test("nothing for pods or none; an empty reserved list or a missing cgroup name is an error naming the field", () => {
    expect(reservedEnforcements({ ...base, enforceNodeAllocatable: ["pods"] }, false)).toEqual([]);
    expect(() => reservedEnforcements({ ...base, kubeReserved: {}, enforceNodeAllocatable: ["kube-reserved"] }, false)).toThrow(
      'kubeReservedCgroup "/kube.slice" is not configured properly: kubeReserved is empty',
    );
    expect(() => reservedEnforcements({ ...base, systemReservedCgroup: "", enforceNodeAllocatable: ["system-reserved"] }, false)).toThrow("systemReservedCgroup must be specified");
  });
});
