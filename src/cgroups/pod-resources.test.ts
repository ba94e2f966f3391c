import { describe, expect, test } from "bun:test";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { podLevelLimitsSet, podLevelResources, podLevelResourcesSet, podLimits, podRequests } from "./pod-resources.ts";
import { podResourceConfig } from "./resources.ts";

type List = Record<string, string>;
type Res = { requests?: List; limits?: List };
const MI = 2 ** 20;
const GI = 2 ** 30;
const c = (name: string, resources?: Res, extra: Partial<ContainerSpec> = {}): ContainerSpec => ({ name, image: "i", ...(resources ? { resources } : {}), ...extra });
const pod = (resources: Res | undefined, containers: ContainerSpec[] = [c("c")], extra: Record<string, unknown> = {}): Pod =>
  ({ metadata: { name: "p", uid: "u" }, spec: { containers, ...(resources ? { resources } : {}), ...extra } }) as Pod;
const sidecar = (name: string, resources: Res) => c(name, resources, { restartPolicy: "Always" });

describe("podRequests with pod-level resources (component-helpers TestPodLevelResourceRequests)", () => {
  test.each<[string, Pod, Record<string, number>]>([
    ["nil", pod(undefined), {}],
    ["pod-level memory", pod({ requests: { memory: "2Mi" } }), { memory: 2 * MI }],
    ["pod-level memory and container-level cpu", pod({ requests: { memory: "2Mi" } }, [c("c", { requests: { cpu: "2m" } })]), { memory: 2 * MI, cpu: 2 }],
    ["unsupported at both levels: the containers'", pod({ requests: { storage: "2Mi" } }, [c("c", { requests: { storage: "3Mi" } })]), { storage: 3 * MI }],
    ["unsupported at pod level only", pod({ requests: { storage: "2Mi" } }, [c("c", { requests: { memory: "3Mi" } })]), { memory: 3 * MI }],
    ["both levels: the pod's", pod({ requests: { memory: "6Mi", cpu: "8m" } }, [c("c", { requests: { memory: "3Mi", cpu: "2m" } })]), { memory: 6 * MI, cpu: 8 }],
    [
      "container, sidecar and init container: sum and peak",
      pod(undefined, [c("c", { requests: { memory: "3Mi", cpu: "2m" } })], {
        initContainers: [sidecar("s", { requests: { memory: "5Mi", cpu: "4m" } }), c("i", { requests: { memory: "6Mi", cpu: "8m" } })],
      }),
      { memory: 11 * MI, cpu: 12 },
    ],
    [
      "pod-level over container, sidecar and init container",
      pod({ requests: { memory: "15Mi", cpu: "18m" } }, [c("c", { requests: { memory: "3Mi", cpu: "2m" } })], {
        initContainers: [sidecar("s", { requests: { memory: "5Mi", cpu: "4m" } }), c("i", { requests: { memory: "6Mi", cpu: "8m" } })],
      }),
      { memory: 15 * MI, cpu: 18 },
    ],
    ["hugepages, one page size", pod({ limits: { "hugepages-2Mi": "2Mi" }, requests: { memory: "10Mi", "hugepages-2Mi": "2Mi" } }), { memory: 10 * MI, "hugepages-2Mi": 2 * MI }],
    [
      "hugepages at both levels, different page sizes",
      pod({ limits: { "hugepages-2Mi": "10Mi" }, requests: { cpu: "1", "hugepages-2Mi": "10Mi" } }, [
        c("c", { limits: { "hugepages-1Gi": "1Gi" }, requests: { memory: "4Mi", "hugepages-1Gi": "1Gi" } }),
      ]),
      { cpu: 1000, memory: 4 * MI, "hugepages-2Mi": 10 * MI, "hugepages-1Gi": GI },
    ],
    ["overhead added after the pod's own", pod({ requests: { memory: "10Mi" } }, [c("c")], { overhead: { memory: "1Mi" } }), { memory: 11 * MI }],
  ])("%s", (_n, p, want) => {
    expect(podRequests(p)).toEqual(want);
  });
});

describe("pod-level defaulting as the API server stores the pod (SetDefaults_Pod)", () => {
  test("limits only, containers without requests: requests default to the limits", () => {
    expect(podLevelResources(pod({ limits: { cpu: "500m", memory: "64Mi" } }))).toEqual({ requests: { cpu: 500, memory: 64 * MI }, limits: { cpu: 500, memory: 64 * MI } });
  });
  test("limits, containers with requests: a request the pod lacks is the containers' aggregate", () => {
    const p = pod({ limits: { cpu: "500m", memory: "64Mi" } }, [c("a", { requests: { cpu: "100m" } }), c("b", { requests: { cpu: "50m", memory: "16Mi" } })]);
    expect(podLevelResources(p)?.requests).toEqual({ cpu: 150, memory: 16 * MI });
  });
  test("requests only: nothing defaulted; hugepages limits default to the containers' unless the pod requests that size", () => {
    expect(podLevelResources(pod({ requests: { cpu: "1" } }))).toEqual({ requests: { cpu: 1000 }, limits: {} });
    const hp = pod({ requests: { cpu: "1" } }, [c("c", { limits: { "hugepages-2Mi": "4Mi" } })]);
    expect(podLevelResources(hp)?.limits).toEqual({ "hugepages-2Mi": 4 * MI });
    expect(podLevelResources(hp)?.requests).toEqual({ cpu: 1000, "hugepages-2Mi": 4 * MI });
  });
  test("IsPodLevelResourcesSet / IsPodLevelLimitsSet: only supported names count", () => {
    expect(podLevelResourcesSet(pod({ requests: { storage: "1Gi" } }))).toBe(false);
    expect(podLevelResourcesSet(pod({}))).toBe(false);
    expect(podLevelResourcesSet(pod({ limits: { "hugepages-1Gi": "1Gi" } }))).toBe(true);
    expect(podLevelLimitsSet(pod({ requests: { cpu: "1" } }))).toBe(false);
    expect(podLevelLimitsSet(pod({ limits: { memory: "1Gi" } }))).toBe(true);
  });
});

describe("podLimits with pod-level resources", () => {
  test("the pod's limit replaces the containers' aggregate and counts as declared", () => {
    const p = pod({ limits: { cpu: "200m", memory: "200Mi" } }, [c("a"), c("b", { limits: { cpu: "50m" } })]);
    expect(podLimits(p)).toEqual({ limits: { cpu: 200, memory: 200 * MI }, cpuDeclared: true, memoryDeclared: true });
  });
  test("a resource the pod does not limit stays the containers' (undeclared when one container lacks it)", () => {
    const p = pod({ limits: { memory: "200Mi" } }, [c("a"), c("b", { limits: { cpu: "50m" } })]);
    expect(podLimits(p)).toEqual({ limits: { cpu: 50, memory: 200 * MI }, cpuDeclared: false, memoryDeclared: true });
  });
});

describe("podResourceConfig with pod-level resources (cm TestResourceConfigForPod, pod-level cases)", () => {
  const opts = { cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, podPidsLimit: -1 };
  test.each<[string, Pod, Record<string, number>]>([
    ["burstable, pod-level requests", pod({ requests: { cpu: "100m", memory: "100Mi" } }), { cpuShares: 102, pidsLimit: -1 }],
    [
      "burstable, pod and container requests",
      pod({ requests: { cpu: "100m", memory: "100Mi" } }, [c("c", { requests: { cpu: "10m", memory: "50Mi" } })]),
      { cpuShares: 102, pidsLimit: -1 },
    ],
    [
      "burstable, pod-level requests and limits",
      pod({ requests: { cpu: "100m", memory: "100Mi" }, limits: { cpu: "200m", memory: "200Mi" } }),
      { cpuShares: 102, cpuQuota: 20_000, cpuPeriod: 100_000, memoryLimit: 200 * MI, pidsLimit: -1 },
    ],
    [
      "burstable, pod and container requests and limits",
      pod({ requests: { cpu: "100m", memory: "100Mi" }, limits: { cpu: "200m", memory: "200Mi" } }, [
        c("c", { requests: { cpu: "10m", memory: "50Mi" }, limits: { cpu: "50m", memory: "100Mi" } }),
      ]),
      { cpuShares: 102, cpuQuota: 20_000, cpuPeriod: 100_000, memoryLimit: 200 * MI, pidsLimit: -1 },
    ],
    [
      "guaranteed, pod-level",
      pod({ requests: { cpu: "100m", memory: "100Mi" }, limits: { cpu: "100m", memory: "100Mi" } }),
      { cpuShares: 102, cpuQuota: 10_000, cpuPeriod: 100_000, memoryLimit: 100 * MI, pidsLimit: -1 },
    ],
    [
      "guaranteed, pod and container level",
      pod({ requests: { cpu: "100m", memory: "100Mi" }, limits: { cpu: "100m", memory: "100Mi" } }, [
        c("c", { requests: { cpu: "10m", memory: "50Mi" }, limits: { cpu: "50m", memory: "100Mi" } }),
      ]),
      { cpuShares: 102, cpuQuota: 10_000, cpuPeriod: 100_000, memoryLimit: 100 * MI, pidsLimit: -1 },
    ],
    [
      "pod limits only, containers without resources (defaulted: Guaranteed)",
      pod({ limits: { cpu: "500m", memory: "64Mi" } }, [c("a"), c("b")]),
      { cpuShares: 512, cpuQuota: 50_000, cpuPeriod: 100_000, memoryLimit: 64 * MI, pidsLimit: -1 },
    ],
  ])("%s", (_n, p, want) => {
    expect(podResourceConfig(p, opts)).toEqual({ ...want, hugePageLimits: new Map() });
  });
  test("huge pages the pod requests itself go to its hugetlb limits (HugePageLimits of PodRequests)", () => {
    const p = pod({ requests: { "hugepages-2Mi": "4Mi" }, limits: { "hugepages-2Mi": "4Mi" } }, [c("c", { requests: { cpu: "100m" } })]);
    expect(podResourceConfig(p, opts).hugePageLimits).toEqual(new Map([[2 * MI, 4 * MI]]));
  });
});
