// Huge pages on a real kernel, containerd and control plane: the test raises
// the default pool (/proc/sys/vm/nr_hugepages, 2 MiB pages here) to 16 pages
// before the agent starts and puts the old value back in afterAll. The Node
// reports the pool as hugepages-2Mi and takes it off allocatable memory; a pod
// asking for huge pages runs with a hugetlbfs emptyDir and really takes pages
// from the pool; a pod asking for more than is left is rejected with
// upstream's OutOfhugepages-2Mi; a HugePages-1Gi volume without a 1Gi request
// fails its mount with upstream's message. This host has no hugetlb cgroup
// hierarchy, so no hugetlb limit can be read back here (the unit tests and
// the cgroup v2 VM cover those files).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { eventually, explainFailure, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "hugepages-node";
const PAGES = 16;
const MI = 2 ** 20;
const NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages";
const POOL = "/sys/kernel/mm/hugepages/hugepages-2048kB";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let savedPages: string | undefined;

const { getJson, tryJson, apply } = adminKubectl(() => cp);
const freePages = () => Number(readFileSync(`${POOL}/free_hugepages`, "utf8").trim());

beforeAll(async () => {
  requireRoot();
  if (readFileSync("/proc/meminfo", "utf8").match(/^Hugepagesize:\s+(\d+) kB/m)?.[1] !== "2048")
    throw new Error("this test needs 2 MiB default huge pages (Hugepagesize in /proc/meminfo)");
  savedPages = readFileSync(NR_HUGEPAGES, "utf8").trim();
  writeFileSync(NR_HUGEPAGES, String(PAGES));
  const got = Number(readFileSync(NR_HUGEPAGES, "utf8").trim());
  if (got !== PAGES) throw new Error(`the kernel allocated ${got} of ${PAGES} huge pages of 2 MiB (${NR_HUGEPAGES}; memory too fragmented?): cannot test huge pages`);
  [ctd, cp] = await startTogether([startContainerd({ name: "hugepages" }), startControlPlane({ name: "hugepages" })]);
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, "--node-ip=127.0.0.1"],
    extraConfig: {
      systemReserved: { "hugepages-2Mi": "4Mi" },
      // kubectl exec through the API server, which authenticates with its client certificate.
      port: await freePort(),
      authentication: { x509: { clientCAFile: cp.caFile }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
    },
  });
}, 600_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
  // Whatever happened above: the host gets its pool back (pages still held by a container are freed once it is gone).
  if (savedPages !== undefined) writeFileSync(NR_HUGEPAGES, savedPages);
}, 120_000);

const hugePagePod = (name: string, spec: { amount: string; medium?: string; nodeName?: string; command?: string }) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: {
    terminationGracePeriodSeconds: 1,
    ...(spec.nodeName ? { nodeName: spec.nodeName } : {}),
    containers: [
      {
        name: "main",
        image: ctd.busyboxImage,
        imagePullPolicy: "IfNotPresent",
        command: ["sh", "-c", spec.command ?? "sleep 3600"],
        resources: { limits: { cpu: "100m", memory: "64Mi", "hugepages-2Mi": spec.amount } },
        volumeMounts: [{ name: "hp", mountPath: "/hugepages" }],
      },
    ],
    volumes: [{ name: "hp", emptyDir: { medium: spec.medium ?? "HugePages" } }],
  },
});

describe("huge pages on a real kernel", () => {
  test(
    "the Node reports the pool as hugepages-2Mi (less systemReserved in allocatable), the empty 1Gi pool as 0, and memory allocatable without the pool",
    explainFailure(
      async () => {
        const node = await eventually("node with hugepages-2Mi", async () => {
          const n = await tryJson("node", NODE);
          return n?.status?.capacity?.["hugepages-2Mi"] !== undefined ? n : undefined;
        });
        const { capacity, allocatable } = node.status as { capacity: Record<string, string>; allocatable: Record<string, string> };
        expect(capacity["hugepages-2Mi"]).toBe(`${PAGES * 2}Mi`);
        expect(allocatable["hugepages-2Mi"]).toBe(`${PAGES * 2 - 4}Mi`);
        expect(capacity["hugepages-1Gi"]).toBe("0");
        const ki = (q: string) => Number(q.replace(/Ki$/, ""));
        // Memory capacity is MemTotal; allocatable = that − evictionHard memory.available (100Mi) − the pool's 32Mi.
        expect(ki(capacity.memory!) - ki(allocatable.memory!)).toBe((100 * MI + PAGES * 2 * MI) / 1024);
      },
      () => agent,
    ),
    120_000,
  );

  test(
    "a pod asking 8Mi of hugepages-2Mi runs with a hugetlbfs emptyDir of 2 MiB pages and takes its pages from the host's pool",
    explainFailure(
      async () => {
        const before = freePages();
        await apply(hugePagePod("hp-ok", { amount: "8Mi", command: "fallocate -l 4194304 /hugepages/f && sleep 3600" }));
        const pod = await eventually(
          "pod hp-ok Running",
          async () => {
            const p = await tryJson("pod", "hp-ok");
            return p?.status?.phase === "Running" ? p : undefined;
          },
          90_000,
        );
        expect(pod.spec.nodeName).toBe(NODE);
        const mounts = await cp.kubectl(["exec", "hp-ok", "--", "cat", "/proc/mounts"]);
        expect(mounts.stdout).toMatch(/^\S+ \/hugepages hugetlbfs \S*pagesize=2M/m);
        // fallocate of 4 MiB on the hugetlbfs holds two pages of the pool while the pod runs.
        await eventually("two pages taken", () => freePages() === before - 2, 30_000);
      },
      () => agent,
    ),
    150_000,
  );

  test(
    "a pod bound to the node asking more than is left is rejected with OutOfhugepages-2Mi and upstream's message, with an event, and never runs",
    explainFailure(
      async () => {
        await apply(hugePagePod("hp-big", { amount: "24Mi", nodeName: NODE }));
        const pod = await eventually(
          "pod hp-big Failed",
          async () => {
            const p = await tryJson("pod", "hp-big");
            return p?.status?.phase === "Failed" ? p : undefined;
          },
          60_000,
        );
        expect(pod.status.reason).toBe("OutOfhugepages-2Mi");
        expect(pod.status.message).toBe(`Node didn't have enough resource: hugepages-2Mi, requested: ${24 * MI}, used: ${8 * MI}, capacity: ${28 * MI}`);
        const events = await eventually("OutOfhugepages-2Mi event", async () => {
          const list = await getJson("events", "--field-selector", "involvedObject.name=hp-big");
          return (list.items as { reason: string }[]).find((e) => e.reason === "OutOfhugepages-2Mi");
        });
        expect(events.reason).toBe("OutOfhugepages-2Mi");
      },
      () => agent,
    ),
    90_000,
  );

  test(
    "an emptyDir HugePages-1Gi in a pod that asks only hugepages-2Mi fails its mount with upstream's message",
    explainFailure(
      async () => {
        await apply(hugePagePod("hp-1gi", { amount: "2Mi", medium: "HugePages-1Gi", nodeName: NODE }));
        const event = await eventually(
          "FailedMount event",
          async () => {
            const list = await getJson("events", "--field-selector", "involvedObject.name=hp-1gi");
            return (list.items as { reason: string; message: string }[]).find((e) => e.reason === "FailedMount");
          },
          60_000,
        );
        expect(event.message).toBe('MountVolume.SetUp failed for volume "hp" : medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages');
        expect((await getJson("pod", "hp-1gi")).status.phase).toBe("Pending");
      },
      () => agent,
    ),
    90_000,
  );
});
