// The cgroup writer on a fake cgroupfs (fake-fs.ts keeps the kernel's rules):
// one contract for v1 and v2, then what only one layout has.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { memoryLogger } from "../util/log.ts";
import { createPodCgroups, isCgroupError, type PodCgroups } from "./index.ts";
import { fakeCgroupTree, listTree, type FakeCgroupTree } from "./fake-fs.ts";

const MI = 2 ** 20;
const ROOT = "/process_api/abc/bunlet-t1";
type Res = { requests?: Record<string, string>; limits?: Record<string, string> };
const pod = (uid: string, ...res: (Res | undefined)[]): Pod => ({
  metadata: { name: `p-${uid}`, uid },
  spec: { containers: res.map((r, i): ContainerSpec => ({ name: `c${i}`, image: "i", ...(r ? { resources: r } : {}) })) },
});
const guaranteed = pod("g1", { limits: { cpu: "500m", memory: "64Mi" } });
const burstable = pod("b1", { requests: { cpu: "250m", memory: "32Mi" }, limits: { cpu: "1", memory: "128Mi" } });
const besteffort = pod("e1", undefined);

function make(tree: FakeCgroupTree, over: Partial<Parameters<typeof createPodCgroups>[0]> = {}): PodCgroups {
  return createPodCgroups({
    cgroupRoot: ROOT,
    fsRoot: tree.root,
    fs: tree.fs,
    podPidsLimit: 1024,
    cpuCFSQuota: true,
    cpuCFSQuotaPeriodMs: 100,
    logger: memoryLogger().logger,
    ...over,
  });
}

/** Reads a value in the hierarchy that holds `file` (v1) or the unified tree (v2). */
function reader(tree: FakeCgroupTree, version: "v1" | "v2") {
  const v1Hierarchy = (file: string) => (file.startsWith("cpu.") ? "cpu" : file.startsWith("memory.") ? "memory" : file.startsWith("pids.") ? "pids" : "cpuset");
  return (path: string, file: string) => tree.read(path, file, version === "v1" ? v1Hierarchy(file) : undefined);
}

for (const version of ["v1", "v2"] as const) {
  describe(`writer contract on a fake cgroup ${version}`, () => {
    let tree: FakeCgroupTree;
    let cg: PodCgroups;
    let read: (path: string, file: string) => string;
    const limitFile = version === "v1" ? "memory.limit_in_bytes" : "memory.max";
    const unlimited = version === "v1" ? "-1" : "max";

    beforeEach(() => {
      tree = fakeCgroupTree(version);
      cg = make(tree);
      read = reader(tree, version);
    });
    afterEach(() => tree.cleanup());

    test("detects the version", () => {
      expect(cg.version).toBe(version);
    });

    test("podCgroupPath: upstream names, nothing touched", () => {
      expect(cg.podCgroupPath(guaranteed)).toBe(`${ROOT}/kubepods/podg1`);
      expect(cg.podCgroupPath(burstable)).toBe(`${ROOT}/kubepods/burstable/podb1`);
      expect(cg.podCgroupPath(besteffort)).toBe(`${ROOT}/kubepods/besteffort/pode1`);
      expect(listTree(tree.dir("/", "memory")).filter((d) => d.includes("kubepods"))).toEqual([]);
    });

    test("cgroupRoot empty or / puts kubepods at the hierarchy root", () => {
      expect(make(tree, { cgroupRoot: "" }).podCgroupPath(besteffort)).toBe("/kubepods/besteffort/pode1");
      expect(make(tree, { cgroupRoot: "/" }).podCgroupPath(guaranteed)).toBe("/kubepods/podg1");
    });

    test("setupNode: kubepods with node allocatable enforced, QoS cgroups, besteffort minimal", async () => {
      await cg.setupNode({ allocatable: { cpuMilli: 1500, memoryBytes: 512 * MI, pids: 4096 }, enforce: true });
      const kp = `${ROOT}/kubepods`;
      expect(read(kp, limitFile)).toBe(String(512 * MI));
      expect(read(kp, "pids.max")).toBe("4096");
      if (version === "v1") {
        expect(read(kp, "cpu.shares")).toBe("1536");
        expect(read(`${kp}/besteffort`, "cpu.shares")).toBe("2");
        expect(read(`${kp}/burstable`, "cpu.shares")).toBe("1024"); // kernel default until updateQos
      } else {
        expect(read(kp, "cpu.weight")).toBe("59");
        expect(read(`${kp}/besteffort`, "cpu.weight")).toBe("1");
      }
      // Idempotent, and enforce=false lifts memory and pids limits again.
      await cg.setupNode({ allocatable: { cpuMilli: 1500, memoryBytes: 512 * MI, pids: 4096 }, enforce: false });
      expect(read(kp, limitFile)).toBe(unlimited);
      expect(read(kp, "pids.max")).toBe("max");
    });

    test("ensurePod: each QoS class in its place with its limits", async () => {
      await cg.setupNode({ allocatable: { cpuMilli: 2000, memoryBytes: 1024 * MI }, enforce: true });
      const g = await cg.ensurePod(guaranteed);
      const b = await cg.ensurePod(burstable);
      const e = await cg.ensurePod(besteffort);
      expect([g, b, e]).toEqual([cg.podCgroupPath(guaranteed), cg.podCgroupPath(burstable), cg.podCgroupPath(besteffort)]);

      expect(read(g, limitFile)).toBe(String(64 * MI));
      expect(read(b, limitFile)).toBe(String(128 * MI));
      expect(read(e, limitFile)).toBe(version === "v1" ? "9223372036854771712" : "max");
      expect(read(g, "pids.max")).toBe("1024");
      if (version === "v1") {
        expect([read(g, "cpu.shares"), read(g, "cpu.cfs_quota_us"), read(g, "cpu.cfs_period_us")]).toEqual(["512", "50000", "100000"]);
        expect([read(b, "cpu.shares"), read(b, "cpu.cfs_quota_us")]).toEqual(["256", "100000"]);
        expect([read(e, "cpu.shares"), read(e, "cpu.cfs_quota_us")]).toEqual(["2", "-1"]);
      } else {
        expect([read(g, "cpu.weight"), read(g, "cpu.max")]).toEqual(["20", "50000 100000"]);
        expect([read(b, "cpu.weight"), read(b, "cpu.max")]).toEqual(["10", "100000 100000"]);
        expect([read(e, "cpu.weight"), read(e, "cpu.max")]).toEqual(["1", "max 100000"]);
      }
    });

    test("ensurePod without setupNode creates the parents; twice is the same", async () => {
      const p = await cg.ensurePod(burstable);
      expect(await cg.ensurePod(burstable)).toBe(p);
      expect(read(p, limitFile)).toBe(String(128 * MI));
    });

    test("ensurePod updates an existing cgroup (pids limit and period changed in the config)", async () => {
      const p = await cg.ensurePod(guaranteed);
      await make(tree, { podPidsLimit: -1, cpuCFSQuotaPeriodMs: 50 }).ensurePod(guaranteed);
      expect(read(p, "pids.max")).toBe("max");
      if (version === "v1") expect([read(p, "cpu.cfs_quota_us"), read(p, "cpu.cfs_period_us")]).toEqual(["25000", "50000"]);
      else expect(read(p, "cpu.max")).toBe("25000 50000");
    });

    test("cpuCFSQuota off: Guaranteed pods have no quota", async () => {
      const p = await make(tree, { cpuCFSQuota: false }).ensurePod(guaranteed);
      if (version === "v1") expect(read(p, "cpu.cfs_quota_us")).toBe("-1");
      else expect(read(p, "cpu.max")).toBe("max 100000");
    });

    test("updateQos: burstable shares follow the Burstable pods' requests", async () => {
      await cg.setupNode({ allocatable: { cpuMilli: 2000, memoryBytes: 1024 * MI }, enforce: true });
      const b2 = pod("b2", { requests: { cpu: "750m" } });
      await cg.updateQos([guaranteed, burstable, b2, besteffort]);
      const shares = version === "v1" ? read(`${ROOT}/kubepods/burstable`, "cpu.shares") : read(`${ROOT}/kubepods/burstable`, "cpu.weight");
      expect(shares).toBe(version === "v1" ? "1024" : "39");
      await cg.updateQos([]);
      expect(version === "v1" ? read(`${ROOT}/kubepods/burstable`, "cpu.shares") : read(`${ROOT}/kubepods/burstable`, "cpu.weight")).toBe(version === "v1" ? "2" : "1");
    });

    test("listPodUids and removePod: leftovers of runc removed children first; idempotent", async () => {
      for (const p of [guaranteed, burstable, besteffort]) await cg.ensurePod(p);
      expect(await cg.listPodUids()).toEqual(["b1", "e1", "g1"]);
      // An empty container cgroup runc left behind.
      await tree.fs.mkdir(join(tree.dir(cg.podCgroupPath(burstable), "memory"), "0123abcd"));
      await cg.removePod("b1");
      await cg.removePod("b1");
      await cg.removePod("never-existed");
      expect(await cg.listPodUids()).toEqual(["e1", "g1"]);
      const left = listTree(join(tree.root, "sys/fs/cgroup")).filter((d) => d.includes("podb1"));
      expect(left).toEqual([]);
    });

    test("removePod never kills: a cgroup with a process stays, Busy", async () => {
      const p = await cg.ensurePod(besteffort);
      tree.addProcess(p, 4242);
      const err = await cg.removePod("e1").catch((e: unknown) => e);
      expect(isCgroupError(err, "Busy")).toBe(true);
      expect(String(err)).toContain("pode1");
      expect(await cg.listPodUids()).toEqual(["e1"]);
    });

    test("enforceExisting (reserved cgroups): an existing cgroup gets shares, memory limit and pids; a missing one is NotFound and not created", async () => {
      await cg.setupNode({ allocatable: { cpuMilli: 2000, memoryBytes: 2 ** 30 }, enforce: true });
      expect(await cg.enforceExisting(ROOT, { cpuShares: 1024, memoryLimit: 2 ** 29, pidsLimit: 1000 })).toBe(ROOT);
      expect(read(ROOT, limitFile)).toBe(String(2 ** 29));
      expect(read(ROOT, "pids.max")).toBe("1000");
      expect(read(ROOT, version === "v1" ? "cpu.shares" : "cpu.weight")).toBe(version === "v1" ? "1024" : "39");
      const err = await cg.enforceExisting("/system.slice", { cpuShares: 1024 }).catch((e: unknown) => e);
      expect(isCgroupError(err, "NotFound")).toBe(true);
      expect(existsSync(tree.dir("/system.slice", version === "v1" ? "cpu" : undefined))).toBe(false);
    });

    test("a UID that would leave the QoS directory is refused", async () => {
      const bad = pod("../../etc", undefined);
      expect(() => cg.podCgroupPath(bad)).toThrow(/UID/);
      expect(await cg.removePod("a/b").catch((e: unknown) => isCgroupError(e, "Invalid"))).toBe(true);
    });
  });
}

describe("huge pages (hugetlb): pod, QoS and kubepods limits as upstream's maybeSetHugetlb", () => {
  const pools = [
    { pageSizeKiB: 2048, numPages: 16 },
    { pageSizeKiB: 1048576, numPages: 1 },
  ];
  const hugePod = pod("h1", { limits: { cpu: "500m", memory: "64Mi", "hugepages-2Mi": "8Mi" } });
  const V1_HUGETLB = { cpu: ["cpu"], cpuset: ["cpuset"], memory: ["memory"], pids: ["pids"], hugetlb: ["hugetlb"] };
  let tree: FakeCgroupTree | undefined;
  afterEach(() => tree?.cleanup());

  test("v1 with a hugetlb hierarchy: the pod gets its request per size and 0 for the others; QoS unbounded; kubepods its allocatable", async () => {
    tree = fakeCgroupTree("v1", { hierarchies: V1_HUGETLB });
    const cg = make(tree, { hugePagePools: pools });
    await cg.setupNode({ allocatable: { cpuMilli: 1000, memoryBytes: 512 * MI, hugePages: { "hugepages-2Mi": 28 * MI, "hugepages-1Gi": 2 ** 30 } }, enforce: true });
    const kp = `${ROOT}/kubepods`;
    expect(tree.read(kp, "hugetlb.2MB.limit_in_bytes", "hugetlb")).toBe(String(28 * MI));
    expect(tree.read(kp, "hugetlb.1GB.limit_in_bytes", "hugetlb")).toBe(String(2 ** 30));
    for (const qos of ["burstable", "besteffort"]) expect(tree.read(`${kp}/${qos}`, "hugetlb.2MB.limit_in_bytes", "hugetlb")).toBe("4611686018427387904");
    const p = await cg.ensurePod(hugePod);
    expect(tree.read(p, "hugetlb.2MB.limit_in_bytes", "hugetlb")).toBe(String(8 * MI));
    expect(tree.read(p, "hugetlb.1GB.limit_in_bytes", "hugetlb")).toBe("0");
    // A pod that asks for none gets none of any size.
    const e = await cg.ensurePod(besteffort);
    expect([tree.read(e, "hugetlb.2MB.limit_in_bytes", "hugetlb"), tree.read(e, "hugetlb.1GB.limit_in_bytes", "hugetlb")]).toEqual(["0", "0"]);
    // updateQos keeps the QoS levels unbounded.
    await cg.updateQos([hugePod, besteffort]);
    expect(tree.read(`${kp}/burstable`, "hugetlb.1GB.limit_in_bytes", "hugetlb")).toBe("4611686018427387904");
  });

  test("v1 without a hugetlb hierarchy (this project's hosts): nothing written, said once in the log, the pod cgroup still made", async () => {
    tree = fakeCgroupTree("v1");
    const { logger, lines } = memoryLogger();
    const cg = make(tree, { hugePagePools: pools, logger });
    await cg.setupNode({ allocatable: { cpuMilli: 1000, memoryBytes: 512 * MI }, enforce: false });
    const p = await cg.ensurePod(hugePod);
    await cg.ensurePod(besteffort);
    expect(tree.read(p, "memory.limit_in_bytes", "memory")).toBe(String(64 * MI));
    const warnings = lines.filter((l) => l.includes("hugetlb"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("no hugetlb cgroup hierarchy is mounted");
  });

  test("v2 with hugetlb: hugetlb.<size>.max and .rsvd.max on the pod and kubepods, unbounded on the QoS levels", async () => {
    tree = fakeCgroupTree("v2");
    const cg = make(tree, { hugePagePools: pools });
    await cg.setupNode({ allocatable: { cpuMilli: 1000, memoryBytes: 512 * MI, hugePages: { "hugepages-2Mi": 32 * MI, "hugepages-1Gi": 2 ** 30 } }, enforce: false });
    expect(tree.read(`${ROOT}/kubepods`, "hugetlb.2MB.max")).toBe(String(32 * MI));
    expect(tree.read(`${ROOT}/kubepods/besteffort`, "hugetlb.1GB.rsvd.max")).toBe("4611686018427387904");
    const p = await cg.ensurePod(hugePod);
    expect([tree.read(p, "hugetlb.2MB.max"), tree.read(p, "hugetlb.2MB.rsvd.max"), tree.read(p, "hugetlb.1GB.max"), tree.read(p, "hugetlb.1GB.rsvd.max")]).toEqual([
      String(8 * MI),
      String(8 * MI),
      "0",
      "0",
    ]);
  });

  test("v2 without the hugetlb controller: skipped as upstream, said once", async () => {
    tree = fakeCgroupTree("v2", { v2Controllers: ["cpu", "memory", "pids"] });
    const { logger, lines } = memoryLogger();
    const cg = make(tree, { hugePagePools: pools, logger });
    await cg.ensurePod(hugePod);
    await cg.ensurePod(besteffort);
    expect(lines.filter((l) => l.includes("no hugetlb cgroup controller"))).toHaveLength(1);
  });

  test("a host without huge page pools writes no hugetlb file and logs nothing about it", async () => {
    tree = fakeCgroupTree("v1");
    const { logger, lines } = memoryLogger();
    await make(tree, { hugePagePools: [], logger }).ensurePod(hugePod);
    expect(lines.filter((l) => l.includes("hugetlb"))).toEqual([]);
  });
});

describe("cgroup v1 only", () => {
  let tree: FakeCgroupTree;
  beforeEach(() => {
    tree = fakeCgroupTree("v1", { cpus: "0-3", mems: "0" });
  });
  afterEach(() => tree.cleanup());

  test("the pod cgroup exists in every hierarchy runc uses, and the hybrid unified mount", async () => {
    const cg = make(tree);
    const p = await cg.ensurePod(burstable);
    for (const h of ["cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd", "unified"]) {
      expect(tree.fs.existsSync(tree.dir(p, h))).toBe(true);
    }
  });

  test("cpuset: every new level copies cpus and mems from its parent", async () => {
    const p = await make(tree).ensurePod(guaranteed);
    const chain = ["/process_api", "/process_api/abc", ROOT, `${ROOT}/kubepods`, p];
    expect(chain.map((c) => [tree.read(c, "cpuset.cpus", "cpuset"), tree.read(c, "cpuset.mems", "cpuset")])).toEqual(chain.map(() => ["0-3", "0"]));
  });

  test("co-mounted cpu,cpuacct: cpu values land in the shared hierarchy", async () => {
    tree.cleanup();
    tree = fakeCgroupTree("v1", { hierarchies: { "cpu,cpuacct": ["cpu", "cpuacct"], memory: ["memory"], pids: ["pids"], cpuset: ["cpuset"] }, hybrid: false });
    const p = await make(tree).ensurePod(guaranteed);
    expect(tree.read(p, "cpu.cfs_quota_us", "cpu,cpuacct")).toBe("50000");
  });

  test("no pids hierarchy: unlimited is fine, a limit is logged as not applied", async () => {
    tree.cleanup();
    tree = fakeCgroupTree("v1", { hierarchies: { cpu: ["cpu"], memory: ["memory"], cpuset: ["cpuset"] } });
    const { logger, lines } = memoryLogger();
    await make(tree, { logger, podPidsLimit: -1 }).ensurePod(besteffort);
    expect(lines.filter((l) => l.startsWith("W"))).toEqual([]);
    await make(tree, { logger, podPidsLimit: 100 }).ensurePod(besteffort);
    expect(lines.filter((l) => l.startsWith("W")).join("\n")).toContain("controller=pids");
  });

  test("memory QoS is ignored on v1 (no memory.min)", async () => {
    const p = await make(tree, { memoryQoS: true }).ensurePod(burstable);
    expect(tree.fs.existsSync(join(tree.dir(p, "memory"), "memory.min"))).toBe(false);
  });
});

describe("cgroup v2 only", () => {
  let tree: FakeCgroupTree;
  beforeEach(() => {
    tree = fakeCgroupTree("v2");
  });
  afterEach(() => tree.cleanup());

  test("controllers are enabled from the root down to the QoS level; the pod's own subtree is left to runc", async () => {
    const cg = make(tree);
    const p = await cg.ensurePod(burstable);
    for (const c of ["/", "/process_api", "/process_api/abc", ROOT, `${ROOT}/kubepods`, `${ROOT}/kubepods/burstable`]) {
      expect([c, tree.read(c, "cgroup.subtree_control")]).toEqual([c, "cpuset cpu io memory hugetlb pids"]);
    }
    expect(tree.read(p, "cgroup.subtree_control")).toBe("");
    expect(tree.read(p, "cgroup.controllers")).toBe("cpuset cpu io memory hugetlb pids");
  });

  test("io and hugetlb only when the kernel has them", async () => {
    tree.cleanup();
    tree = fakeCgroupTree("v2", { v2Controllers: ["cpu", "memory", "pids"] });
    await make(tree).ensurePod(burstable);
    expect(tree.read(`${ROOT}/kubepods`, "cgroup.subtree_control")).toBe("cpu memory pids");
  });

  test("a required controller missing is Unsupported, naming it", async () => {
    tree.cleanup();
    tree = fakeCgroupTree("v2", { v2Controllers: ["cpu", "memory", "io"] });
    const err = await make(tree)
      .ensurePod(burstable)
      .catch((e: unknown) => e);
    expect(isCgroupError(err, "Unsupported")).toBe(true);
    expect(String(err)).toContain("pids");
  });

  test("a parent with processes cannot enable controllers (no internal processes): the kernel's EBUSY surfaces", async () => {
    await tree.fs.mkdir(tree.dir("/process_api"));
    tree.addProcess("/process_api", 7);
    const err = await make(tree)
      .ensurePod(burstable)
      .catch((e: unknown) => e);
    expect(isCgroupError(err, "Busy")).toBe(true);
  });

  test("memory QoS: memory.min on the pod, on burstable and on kubepods", async () => {
    const cg = make(tree, { memoryQoS: true });
    await cg.setupNode({ allocatable: { cpuMilli: 2000, memoryBytes: 1024 * MI }, enforce: true });
    const p = await cg.ensurePod(burstable);
    await cg.updateQos([burstable, guaranteed]);
    expect(tree.read(p, "memory.min")).toBe(String(32 * MI));
    expect(tree.read(`${ROOT}/kubepods/burstable`, "memory.min")).toBe(String(32 * MI));
    expect(tree.read(`${ROOT}/kubepods`, "memory.min")).toBe(String(96 * MI));
  });

  test("quadratic weight formula on request", async () => {
    const p = await make(tree, { cpuWeightFormula: "quadratic" }).ensurePod(pod("q1", { requests: { cpu: "1000m" } }));
    expect(tree.read(p, "cpu.weight")).toBe("100"); // 1000m is 1024 shares, the v1 default → the v2 default
  });
});
