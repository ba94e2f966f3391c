import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { admitOs, admitPod, podHugePageRequests, podRequests, type NodeFacts } from "./admission.ts";

const node: NodeFacts = {
  name: "n1",
  labels: { "kubernetes.io/hostname": "n1", zone: "a", cores: "2" },
  taints: [],
  allocatable: { cpu: 2000, memory: 4 * 1024 ** 3, "ephemeral-storage": 10 * 1024 ** 3, pods: 3 },
};
const pod = (name: string, spec: Partial<Pod["spec"]> & Record<string, unknown> = {}, requests: Record<string, string> = {}): Pod => ({
  metadata: { name, namespace: "default", uid: name },
  spec: { nodeName: "n1", containers: [{ name: "c", image: "i", resources: { requests } }], ...spec },
});

describe("admitPod", () => {
  test("admits a pod that fits", () => {
    expect(admitPod(pod("a", {}, { cpu: "1", memory: "1Gi" }), [], node)).toEqual({ admit: true });
  });

  test("OutOfcpu with upstream's message, counting pods already admitted", () => {
    expect(admitPod(pod("b", {}, { cpu: "1500m" }), [pod("a", {}, { cpu: "1" })], node)).toEqual({
      admit: false,
      reason: "OutOfcpu",
      message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000",
    });
    expect(admitPod(pod("c", {}, { memory: "5Gi" }), [], node)).toMatchObject({ reason: "OutOfmemory" });
  });

  test("pod-level resources: the pod's own requests are fitted, for the new pod and the admitted ones (scheduler's PodRequests)", () => {
    const podLevel = (name: string, resources: Record<string, unknown>, requests: Record<string, string> = {}) => pod(name, { resources } as Partial<Pod["spec"]>, requests);
    // The containers ask for 100m; the pod for 1500m: 1500m is what counts.
    expect(admitPod(podLevel("b", { requests: { cpu: "1500m" } }, { cpu: "100m" }), [pod("a", {}, { cpu: "1" })], node)).toEqual({
      admit: false,
      reason: "OutOfcpu",
      message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000",
    });
    // An admitted pod counts with its pod-level request (limits only: the request defaults to the limit).
    expect(admitPod(pod("b", {}, { memory: "2Gi" }), [podLevel("a", { limits: { cpu: "1", memory: "3Gi" } })], node)).toEqual({
      admit: false,
      reason: "OutOfmemory",
      message: `Node didn't have enough resource: memory, requested: ${2 * 1024 ** 3}, used: ${3 * 1024 ** 3}, capacity: ${4 * 1024 ** 3}`,
    });
    expect(podRequests(podLevel("x", { requests: { memory: "1Gi" } }, { cpu: "250m", memory: "10Mi" }))).toEqual({ cpu: 250, memory: 1024 ** 3, "ephemeral-storage": 0 });
  });

  test("spec.os.name or the kubernetes.io/os label naming another OS: rejected with upstream's reasons, before resources", () => {
    expect(admitPod(pod("w", { os: { name: "windows" } }), [], node)).toEqual({
      admit: false,
      reason: "PodOSNotSupported",
      message: "Failed to admit pod as the OS field doesn't match node OS",
    });
    expect(admitOs(pod("l", { os: { name: "linux" } }), "linux")).toEqual({ admit: true });
    const labelled = { ...pod("x"), metadata: { name: "x", labels: { "kubernetes.io/os": "windows" } } };
    expect(admitOs(labelled, "linux")).toMatchObject({ admit: false, reason: "PodOSSelectorNodeLabelDoesNotMatch" });
    expect(admitPod(pod("big", { os: { name: "windows" } }, { cpu: "64" }), [], node)).toMatchObject({ reason: "PodOSNotSupported" });
  });

  test("OutOfpods at maxPods", () => {
    expect(admitPod(pod("d"), [pod("a"), pod("b"), pod("c")], node)).toMatchObject({ admit: false, reason: "OutOfpods" });
  });

  test("node selector and required node affinity", () => {
    expect(admitPod(pod("a", { nodeSelector: { zone: "b" } }), [], node)).toMatchObject({ reason: "NodeAffinity" });
    expect(admitPod(pod("a", { nodeSelector: { zone: "a" } }), [], node)).toEqual({ admit: true });
    const affinity = (operator: string, values: string[]) => ({
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: "cores", operator, values }] }] } } },
    });
    expect(admitPod(pod("a", affinity("Gt", ["1"])), [], node)).toEqual({ admit: true });
    expect(admitPod(pod("a", affinity("In", ["4", "8"])), [], node)).toMatchObject({ reason: "NodeAffinity" });
  });

  test("only NoExecute taints are checked on the node", () => {
    const tainted = {
      ...node,
      taints: [
        { key: "dedicated", value: "db", effect: "NoExecute" },
        { key: "other", effect: "NoSchedule" },
      ],
    };
    expect(admitPod(pod("a"), [], tainted)).toMatchObject({ reason: "TaintToleration" });
    expect(admitPod(pod("a", { tolerations: [{ key: "dedicated", operator: "Equal", value: "db", effect: "NoExecute" }] }), [], tainted)).toEqual({ admit: true });
    expect(admitPod(pod("a", { tolerations: [{ operator: "Exists" }] }), [], tainted)).toEqual({ admit: true });
  });

  test("host port conflicts", () => {
    const withPort = (name: string) => ({ ...pod(name), spec: { nodeName: "n1", containers: [{ name: "c", image: "i", ports: [{ containerPort: 80, hostPort: 8080 }] }] } });
    expect(admitPod(withPort("b"), [withPort("a")], node)).toMatchObject({ reason: "NodePorts" });
  });

  test("effective requests take the larger of app containers and any init container", () => {
    const p: Pod = {
      metadata: { name: "p" },
      spec: {
        initContainers: [{ name: "i", image: "i", resources: { requests: { cpu: "2" } } }],
        containers: [
          { name: "a", image: "i", resources: { requests: { cpu: "500m" } } },
          { name: "b", image: "i", resources: { limits: { cpu: "1" } } },
        ],
      },
    };
    expect(podRequests(p).cpu).toBe(2000);
  });
});

describe("huge pages", () => {
  const MI = 2 ** 20;
  const withPools: NodeFacts = { ...node, allocatable: { ...node.allocatable, pods: 10, hugePages: { "hugepages-2Mi": 32 * MI, "hugepages-1Gi": 0 } } };
  const hp = (name: string, size: string, amount: string): Pod => ({
    metadata: { name, namespace: "default", uid: name },
    spec: { nodeName: "n1", containers: [{ name: "c", image: "i", resources: { limits: { memory: "64Mi", [size]: amount } } }] },
  });

  test("a pod fits while its hugepages-<size> requests (limits count as requests) stay within what the pods already admitted left", () => {
    expect(admitPod(hp("a", "hugepages-2Mi", "16Mi"), [], withPools)).toEqual({ admit: true });
    expect(admitPod(hp("b", "hugepages-2Mi", "16Mi"), [hp("a", "hugepages-2Mi", "16Mi")], withPools)).toEqual({ admit: true });
  });

  test("OutOfhugepages-2Mi with upstream's message when the pool is used up", () => {
    expect(admitPod(hp("c", "hugepages-2Mi", "20Mi"), [hp("a", "hugepages-2Mi", "16Mi")], withPools)).toEqual({
      admit: false,
      reason: "OutOfhugepages-2Mi",
      message: `Node didn't have enough resource: hugepages-2Mi, requested: ${20 * MI}, used: ${16 * MI}, capacity: ${32 * MI}`,
    });
  });

  test("requests aggregate as upstream's PodRequests: a sidecar adds to the app, a plain init container counts at its peak", () => {
    const lim = (q: string) => ({ resources: { limits: { memory: "64Mi", "hugepages-2Mi": q } } });
    const p: Pod = {
      metadata: { name: "s", namespace: "default", uid: "s" },
      spec: {
        nodeName: "n1",
        containers: [{ name: "c", image: "i", ...lim("8Mi") }],
        initContainers: [
          { name: "side", image: "i", restartPolicy: "Always", ...lim("4Mi") },
          { name: "init", image: "i", ...lim("10Mi") },
        ],
      },
    };
    expect(podHugePageRequests(p)).toEqual({ "hugepages-2Mi": 14 * MI });
  });

  test("a size with an empty pool, or none on this node, has capacity 0", () => {
    expect(admitPod(hp("g", "hugepages-1Gi", "1Gi"), [], withPools)).toMatchObject({ admit: false, reason: "OutOfhugepages-1Gi" });
    expect(admitPod(hp("k", "hugepages-64Ki", "64Ki"), [], withPools)).toMatchObject({
      reason: "OutOfhugepages-64Ki",
      message: `Node didn't have enough resource: hugepages-64Ki, requested: 65536, used: 0, capacity: 0`,
    });
    expect(admitPod(hp("n", "hugepages-2Mi", "2Mi"), [], node)).toMatchObject({ reason: "OutOfhugepages-2Mi" });
  });
});
