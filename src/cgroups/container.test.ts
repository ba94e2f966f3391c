import { describe, expect, test } from "bun:test";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { containerLinuxResources, containerMemoryQoS, containerOomScoreAdj, PAGE_SIZE } from "./container.ts";

type Res = { requests?: Record<string, string>; limits?: Record<string, string> };
const c = (name: string, resources?: Res, extra: Partial<ContainerSpec> = {}): ContainerSpec => ({ name, image: "i", ...(resources ? { resources } : {}), ...extra });
const pod = (containers: ContainerSpec[], spec: Record<string, unknown> = {}, annotations?: Record<string, string>): Pod => ({
  metadata: { name: "p", uid: "u", ...(annotations ? { annotations } : {}) },
  spec: { containers, ...spec },
});
const GI = 2 ** 30;
const CAP = 4 * GI; // like upstream's policy_test standardMemoryAmount ballpark

describe("oom_score_adj (pkg/kubelet/qos/policy.go)", () => {
  const guaranteed = pod([c("a", { limits: { cpu: "1", memory: "1Gi" } })]);
  const besteffort = pod([c("a")]);
  const burstable = (memReq: string) => pod([c("a", { requests: { memory: memReq } })]);

  test.each<[string, Pod, number]>([
    ["Guaranteed", guaranteed, -997],
    ["BestEffort", besteffort, 1000],
    ["Burstable requesting 10% of memory: 900", pod([c("a", { requests: { memory: String(CAP / 10) } })]), 900],
    ["Burstable requesting 1Gi of 4Gi: 750", burstable("1Gi"), 750],
    ["Burstable requesting 3Gi of 4Gi: 250", burstable("3Gi"), 250],
    ["Burstable requesting 99.9% of memory: clamped to 3 (above Guaranteed)", burstable(String(Math.floor(CAP * 0.999))), 3],
    ["Burstable requesting more than the machine: clamped to 3", burstable("8Gi"), 3],
    ["Burstable requesting no memory (only cpu): 999, below BestEffort", pod([c("a", { requests: { cpu: "100m" } })]), 999],
    ["Burstable requesting 1 byte: 1000 - 0 → 999", burstable("1"), 999],
    ["Burstable, memory request defaulted from limit", pod([c("a", { limits: { memory: "1Gi" } })]), 750],
  ])("%s", (_n, p, adj) => {
    expect(containerOomScoreAdj(p, p.spec.containers[0]!, CAP)).toBe(adj);
  });

  test("node-critical static pod: -997 even when BestEffort", () => {
    const p = pod([c("a")], { priorityClassName: "system-node-critical" }, { "kubernetes.io/config.source": "file" });
    expect(containerOomScoreAdj(p, p.spec.containers[0]!, CAP)).toBe(-997);
  });

  test("system-node-critical class on an API pod without critical priority: its QoS class decides", () => {
    const p = pod([c("a")], { priorityClassName: "system-node-critical" }, { "kubernetes.io/config.source": "api" });
    expect(containerOomScoreAdj(p, p.spec.containers[0]!, CAP)).toBe(1000);
    const q = pod([c("a")], { priorityClassName: "system-node-critical", priority: 2_000_001_000 });
    expect(containerOomScoreAdj(q, q.spec.containers[0]!, CAP)).toBe(-997);
  });

  test("sidecar: never above the smallest regular container", () => {
    const side = c("side", { requests: { memory: "100Mi" } }, { restartPolicy: "Always" });
    const p = pod([c("a", { requests: { memory: "1Gi" } }), c("b", { requests: { memory: "2Gi" } })], { initContainers: [side] });
    expect(containerOomScoreAdj(p, side, CAP)).toBe(750);
    // A sidecar that requests more than the regular containers keeps its own (lower) score.
    const big = c("side", { requests: { memory: "3Gi" } }, { restartPolicy: "Always" });
    const q = pod([c("a", { requests: { memory: "1Gi" } })], { initContainers: [big] });
    expect(containerOomScoreAdj(q, big, CAP)).toBe(250);
  });

  test("a capacity of 0 is a caller bug", () => {
    expect(() => containerOomScoreAdj(burstable("1Gi"), c("a"), 0)).toThrow(RangeError);
  });
});

describe("containerLinuxResources", () => {
  const opts = { memoryCapacityBytes: CAP, cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, oomGroup: false, hugePageSizes: [] as string[] };
  test.each<[string, Res | undefined, Partial<typeof opts>, Omit<ReturnType<typeof containerLinuxResources>, "hugepageLimits">]>([
    ["no resources", undefined, {}, { cpuShares: 2, cpuQuota: 0, cpuPeriod: 100_000, memoryLimitInBytes: 0, oomScoreAdj: 1000 }],
    [
      "requests and limits",
      { requests: { cpu: "250m", memory: "64Mi" }, limits: { cpu: "500m", memory: "128Mi" } },
      {},
      { cpuShares: 256, cpuQuota: 50_000, cpuPeriod: 100_000, memoryLimitInBytes: 128 * 2 ** 20, oomScoreAdj: 985 },
    ],
    ["cpu limit only: shares from the limit", { limits: { cpu: "100m" } }, {}, { cpuShares: 102, cpuQuota: 10_000, cpuPeriod: 100_000, memoryLimitInBytes: 0, oomScoreAdj: 999 }],
    [
      "explicit zero cpu request with a limit: the request is named, so shares from 0, the minimum (upstream takes the limit only when requests has no cpu)",
      { requests: { cpu: "0" }, limits: { cpu: "2" } },
      {},
      { cpuShares: 2, cpuQuota: 200_000, cpuPeriod: 100_000, memoryLimitInBytes: 0, oomScoreAdj: 999 },
    ],
    [
      "cpuCFSQuota off: no quota, no period",
      { limits: { cpu: "1", memory: "1Gi" } },
      { cpuCFSQuota: false },
      { cpuShares: 1024, cpuQuota: 0, cpuPeriod: 0, memoryLimitInBytes: GI, oomScoreAdj: -997 },
    ],
    [
      "25 ms period",
      { limits: { cpu: "100m", memory: "16Mi" } },
      { cpuCFSQuotaPeriodUs: 25_000 },
      { cpuShares: 102, cpuQuota: 2_500, cpuPeriod: 25_000, memoryLimitInBytes: 16 * 2 ** 20, oomScoreAdj: -997 },
    ],
  ])("%s", (_n, r, over, expected) => {
    const container = c("a", r);
    expect(containerLinuxResources(pod([container]), container, { ...opts, ...over })).toEqual({ ...expected, hugepageLimits: [] });
  });

  test("huge pages (GetHugepageLimitsFromResources): every size of the host, 0 unless the container's limits name it", () => {
    const sizes = ["2MB", "1GB"];
    const none = c("a", { limits: { cpu: "1", memory: "64Mi" } });
    expect(containerLinuxResources(pod([none]), none, { ...opts, hugePageSizes: sizes }).hugepageLimits).toEqual([
      { pageSize: "2MB", limit: 0 },
      { pageSize: "1GB", limit: 0 },
    ]);
    const some = c("a", { limits: { memory: "64Mi", "hugepages-2Mi": "8Mi" }, requests: { memory: "64Mi", "hugepages-2Mi": "8Mi" } });
    expect(containerLinuxResources(pod([some]), some, { ...opts, hugePageSizes: sizes }).hugepageLimits).toEqual([
      { pageSize: "2MB", limit: 8 * 2 ** 20 },
      { pageSize: "1GB", limit: 0 },
    ]);
    // A size the host has no pool of is not sent; a host without pools sends none.
    const gig = c("a", { limits: { memory: "64Mi", "hugepages-1Gi": "1Gi" } });
    expect(containerLinuxResources(pod([gig]), gig, { ...opts, hugePageSizes: ["2MB"] }).hugepageLimits).toEqual([{ pageSize: "2MB", limit: 0 }]);
    expect(containerLinuxResources(pod([gig]), gig, opts).hugepageLimits).toEqual([]);
  });
});

describe("MemoryQoS (generateLinuxContainerResources with the gate on cgroup v2)", () => {
  const MI = 2 ** 20;
  const qos = { throttlingFactor: 0.9, allocatableMemoryBytes: 2 * GI };
  const pageFloor = (bytes: number) => Math.floor(bytes / PAGE_SIZE) * PAGE_SIZE;

  test("Burstable with a limit: memory.min = request, memory.high = request + factor × (limit - request), whole pages", () => {
    const u = containerMemoryQoS(c("a", { requests: { memory: "128Mi" }, limits: { memory: "256Mi" } }), qos);
    // 128 Mi + 0.9 × 128 Mi = 255013683.2 bytes: 62259 pages.
    expect(u).toEqual({ "memory.min": String(128 * MI), "memory.high": String(62259 * PAGE_SIZE) });
    expect(Number(u["memory.high"])).toBe(pageFloor(128 * MI + 0.9 * 128 * MI));
  });

  test("another factor moves memory.high toward the request", () => {
    const u = containerMemoryQoS(c("a", { requests: { memory: "100Mi" }, limits: { memory: "200Mi" } }), { ...qos, throttlingFactor: 0.5 });
    expect(u["memory.high"]).toBe(String(150 * MI));
  });

  test("no limit: node allocatable stands in for it", () => {
    const u = containerMemoryQoS(c("a", { requests: { memory: "64Mi" } }), qos);
    expect(u).toEqual({ "memory.min": String(64 * MI), "memory.high": String(pageFloor(64 * MI + 0.9 * (2 * GI - 64 * MI))) });
  });

  test("request equal to limit (Guaranteed memory): memory.min only, no throttling", () => {
    expect(containerMemoryQoS(c("a", { limits: { cpu: "1", memory: "1Gi" } }), qos)).toEqual({ "memory.min": String(GI) });
  });

  test("no request and no limit (BestEffort): request equals limit (both 0), so nothing", () => {
    expect(containerMemoryQoS(c("a"), qos)).toEqual({});
  });

  test("a request without a limit and no allocatable known: memory.min only", () => {
    expect(containerMemoryQoS(c("a", { requests: { memory: "64Mi" } }), { ...qos, allocatableMemoryBytes: 0 })).toEqual({ "memory.min": String(64 * MI) });
  });

  test("memory.high not above the request is left out", () => {
    // A limit one page over the request with factor 0.1: floor to pages gives the request back.
    const u = containerMemoryQoS(c("a", { requests: { memory: String(PAGE_SIZE * 10) }, limits: { memory: String(PAGE_SIZE * 11) } }), { ...qos, throttlingFactor: 0.1 });
    expect(u).toEqual({ "memory.min": String(PAGE_SIZE * 10) });
  });

  test("containerLinuxResources puts them in unified only with the option", () => {
    const container = c("a", { requests: { memory: "128Mi" }, limits: { memory: "256Mi" } });
    const base = { memoryCapacityBytes: CAP, cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, oomGroup: false, hugePageSizes: [] };
    expect(containerLinuxResources(pod([container]), container, base).unified).toBeUndefined();
    expect(containerLinuxResources(pod([container]), container, { ...base, memoryQoS: qos }).unified).toEqual(containerMemoryQoS(container, qos));
    const be = c("b");
    expect(containerLinuxResources(pod([be]), be, { ...base, memoryQoS: qos }).unified).toBeUndefined();
  });

  test("memory.oom.group = 1 with the option (cgroup v2 unless singleProcessOOMKill), beside MemoryQoS's files", () => {
    const container = c("a", { requests: { memory: "128Mi" }, limits: { memory: "256Mi" } });
    const base = { memoryCapacityBytes: CAP, cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, oomGroup: true, hugePageSizes: [] };
    expect(containerLinuxResources(pod([c("b")]), c("b"), base).unified).toEqual({ "memory.oom.group": "1" });
    expect(containerLinuxResources(pod([container]), container, { ...base, memoryQoS: qos }).unified).toEqual({ "memory.oom.group": "1", ...containerMemoryQoS(container, qos) });
  });
});

describe("pod-level resources (qos/policy_test.go and kuberuntime getCPULimit/getMemoryLimit)", () => {
  const CAP4 = 4_000_000_000;
  const podRes = (memRequest: string) => ({ requests: { cpu: "5m", memory: memRequest }, limits: { cpu: "5m", memory: String(1000 + 2_000_000_000) } });
  const withPod = (resources: Res, containers: ContainerSpec[], initContainers: ContainerSpec[] = []) => pod(containers, { resources, initContainers });
  test.each<[string, Pod, Record<string, number>]>([
    [
      "guaranteed-pod-resources-no-container-resources",
      withPod({ requests: { cpu: "5m", memory: "2000000000" }, limits: { cpu: "5m", memory: "2000000000" } }, [c("a"), c("b")]),
      { a: -997, b: -997 },
    ],
    ["burstable-pod-resources-no-container-resources", withPod(podRes("2000000000"), [c("a"), c("b")]), { a: 750, b: 750 }],
    [
      "burstable-pod-resources-equal-container-requests",
      withPod(podRes("2000000000"), [
        c("a", { requests: { cpu: "5m", memory: "1000000000" }, limits: { cpu: "5m", memory: "1000000000" } }),
        c("b", { requests: { cpu: "5m", memory: "1000000000" }, limits: { cpu: "5m", memory: "1000000000" } }),
      ]),
      { a: 750, b: 750 },
    ],
    [
      "burstable-pod-resources-unequal-container-requests",
      withPod(podRes("2000000000"), [c("a", { requests: { cpu: "3m", memory: "1000000000" }, limits: { cpu: "5m", memory: "1000000000" } }), c("b")]),
      { a: 625, b: 875 },
    ],
    ["burstable-pod-resources-no-container-resources-with-sidecar", withPod(podRes("2000000000"), [c("a")], [c("s", undefined, { restartPolicy: "Always" })]), { a: 750, s: 750 }],
    [
      "burstable-pod-resources-unequal-container-requests-with-sidecar",
      withPod(
        podRes("2000000000"),
        [c("a", { requests: { cpu: "5m", memory: "1000000000" } }), c("b", { requests: { cpu: "5m", memory: "500000000" } })],
        [c("s", { requests: { cpu: "5m", memory: "200000000" } }, { restartPolicy: "Always" })],
      ),
      { a: 725, b: 850, s: 850 },
    ],
  ])("oom_score_adj: %s", (_n, p, want) => {
    const all = [...p.spec.containers, ...(p.spec.initContainers ?? [])];
    expect(Object.fromEntries(all.map((x) => [x.name, containerOomScoreAdj(p, x, CAP4)]))).toEqual(want);
  });

  const opts = { memoryCapacityBytes: CAP, cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, oomGroup: false, hugePageSizes: ["2MB", "1GB"] };
  test("a container without limits is bounded by the pod's limits; its shares come from that cpu limit when it names no request", () => {
    const p = withPod({ limits: { cpu: "500m", memory: "64Mi" } }, [c("a")]);
    expect(containerLinuxResources(p, c("a"), opts)).toEqual({
      cpuShares: 512,
      cpuQuota: 50_000,
      cpuPeriod: 100_000,
      memoryLimitInBytes: 64 * 2 ** 20,
      oomScoreAdj: -997,
      hugepageLimits: [
        { pageSize: "2MB", limit: 0 },
        { pageSize: "1GB", limit: 0 },
      ],
    });
  });
  test("huge pages: the pod's limit per size, the container's own winning for its size (GetHugepageLimitsFromResources)", () => {
    const own = c("a", { limits: { "hugepages-2Mi": "4Mi" } });
    const p = withPod({ limits: { "hugepages-2Mi": "8Mi", "hugepages-1Gi": "1Gi" } }, [own]);
    expect(containerLinuxResources(p, own, opts).hugepageLimits).toEqual([
      { pageSize: "2MB", limit: 4 * 2 ** 20 },
      { pageSize: "1GB", limit: 2 ** 30 },
    ]);
  });
  test("a container's own limit wins over the pod's; a request keeps its shares", () => {
    const own = c("a", { requests: { cpu: "100m", memory: "16Mi" }, limits: { cpu: "200m" } });
    const p = withPod({ limits: { cpu: "500m", memory: "64Mi" } }, [own]);
    expect(containerLinuxResources(p, own, opts)).toMatchObject({ cpuShares: 102, cpuQuota: 20_000, memoryLimitInBytes: 64 * 2 ** 20 });
  });
  test("pod-level requests only: no limits to inherit", () => {
    const p = withPod({ requests: { cpu: "1", memory: "1Gi" } }, [c("a")]);
    expect(containerLinuxResources(p, c("a"), opts)).toMatchObject({ cpuShares: 2, cpuQuota: 0, memoryLimitInBytes: 0 });
  });
});
