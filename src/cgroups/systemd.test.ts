// The systemd cgroup driver: upstream's names (ToSystemd / ExpandSlice), the
// unit properties libcontainer sets, and the pod tree made through a fake
// systemd that realizes slices in a fake cgroup v2 tree.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { memoryLogger } from "../util/log.ts";
import { createPodCgroups, isCgroupError, type PodCgroups } from "./index.ts";
import { fakeCgroupTree, listTree, type FakeCgroupTree } from "./fake-fs.ts";
import { FakeSystemdUnits } from "./systemd-fake.ts";
import { expandSlice, parseSystemdName, resourceProperties, systemdCgroupPath } from "./systemd.ts";
import { busctlSystemdUnits, propertyArgs, UINT64_MAX } from "./systemd-units.ts";

const MI = 2 ** 20;
type Res = { requests?: Record<string, string>; limits?: Record<string, string> };
const pod = (uid: string, ...res: (Res | undefined)[]): Pod => ({
  metadata: { name: `p-${uid}`, uid },
  spec: { containers: res.map((r, i): ContainerSpec => ({ name: `c${i}`, image: "i", ...(r ? { resources: r } : {}) })) },
});
const G_UID = "1a2b3c4d-0000-4000-8000-00000000000a";
const guaranteed = pod(G_UID, { limits: { cpu: "500m", memory: "64Mi" } });
const burstable = pod("b1b1b1b1-1111-4111-8111-111111111111", { requests: { cpu: "250m", memory: "32Mi" }, limits: { cpu: "1", memory: "128Mi" } });
const besteffort = pod("e1e1e1e1-2222-4222-8222-222222222222", undefined);

describe("systemd names (upstream's ToSystemd, ExpandSlice, ParseSystemdToCgroupName)", () => {
  test("components joined by -, each - in a component escaped to _, expanded into the cgroupfs path", () => {
    expect(systemdCgroupPath([])).toBe("/");
    expect(systemdCgroupPath(["kubepods"])).toBe("/kubepods.slice");
    expect(systemdCgroupPath(["kubepods", "burstable", "pod1234-abcd-5678-efgh"])).toBe("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice");
    expect(systemdCgroupPath(["kubepods", "pod1-2"])).toBe("/kubepods.slice/kubepods-pod1_2.slice");
  });

  test("ExpandSlice: the root slice, and malformed names refused", () => {
    expect(expandSlice("-.slice")).toBe("/");
    expect(expandSlice("a-b-c.slice")).toBe("/a.slice/a-b.slice/a-b-c.slice");
    for (const bad of [".slice", "a", "a--b.slice", "a/b.slice"]) expect(() => expandSlice(bad)).toThrow(/slice/);
  });

  test("parse: a slice name or path back into components", () => {
    expect(parseSystemdName("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podx_y.slice")).toEqual(["kubepods", "besteffort", "podx-y"]);
    expect(parseSystemdName("-.slice")).toEqual([]);
  });
});

describe("unit properties (libcontainer's systemd manager)", () => {
  const byName = (c: Parameters<typeof resourceProperties>[0], v: "v1" | "v2" = "v2") => Object.fromEntries(resourceProperties(c, v, "linear").map((p) => [p.name, p.value]));

  test("v2: CPUWeight from shares, MemoryMax, TasksMax, quota per second rounded up to 10 ms, the period", () => {
    expect(byName({ cpuShares: 512, cpuQuota: 50_000, cpuPeriod: 100_000, memoryLimit: 64 * MI, pidsLimit: 1024 })).toEqual({
      CPUWeight: 20n, // linear: 1 + (510 * 9999) / 262142
      CPUQuotaPeriodUSec: 100_000n,
      CPUQuotaPerSecUSec: 500_000n,
      MemoryMax: BigInt(64 * MI),
      TasksMax: 1024n,
    });
    // 1001 µs per 100 ms = 10010 µs per second: systemd keeps whole percents, so 20000.
    expect(byName({ cpuQuota: 1001, cpuPeriod: 100_000 }).CPUQuotaPerSecUSec).toBe(20_000n);
  });

  test("unlimited is infinity (uint64 max); absent fields are not set", () => {
    expect(byName({ cpuQuota: -1, cpuPeriod: 100_000, memoryLimit: -1, pidsLimit: -1 })).toEqual({
      CPUQuotaPeriodUSec: 100_000n,
      CPUQuotaPerSecUSec: UINT64_MAX,
      MemoryMax: UINT64_MAX,
      TasksMax: UINT64_MAX,
    });
    expect(byName({})).toEqual({});
  });

  test("memory.min as MemoryMin on v2; v1 uses CPUShares and MemoryLimit", () => {
    expect(byName({ memoryMin: 32 * MI }).MemoryMin).toBe(BigInt(32 * MI));
    expect(byName({ cpuShares: 256, memoryLimit: MI, memoryMin: MI }, "v1")).toEqual({ CPUShares: 256n, MemoryLimit: BigInt(MI) });
  });

  test("busctl's a(sv) words", () => {
    expect(
      propertyArgs([
        { name: "Wants", type: "as", value: ["kubepods.slice"] },
        { name: "DefaultDependencies", type: "b", value: false },
        { name: "TasksMax", type: "t", value: UINT64_MAX },
      ]),
    ).toEqual(["3", "Wants", "as", "1", "kubepods.slice", "DefaultDependencies", "b", "false", "TasksMax", "t", "18446744073709551615"]);
  });
});

describe("pod cgroups with cgroupDriver systemd on a fake cgroup v2", () => {
  let tree: FakeCgroupTree;
  let units: FakeSystemdUnits;
  let cg: PodCgroups;
  const read = (path: string, file: string) => tree.read(path, file);

  beforeEach(() => {
    tree = fakeCgroupTree("v2");
    // systemd: a started slice gets its cgroup, with the controllers enabled in its parent (accounting is on).
    units = new FakeSystemdUnits({
      async onStart(unit) {
        const path = expandSlice(unit);
        const parent = join(tree.dir(path), "..");
        await tree.fs.writeFile(join(parent, "cgroup.subtree_control"), "+cpu +memory +pids");
        await tree.fs.mkdir(tree.dir(path));
      },
      async onStop(unit) {
        await tree.fs.rmdir(tree.dir(expandSlice(unit)));
      },
    });
    cg = createPodCgroups({
      cgroupRoot: "/",
      fsRoot: tree.root,
      fs: tree.fs,
      podPidsLimit: 1024,
      cpuCFSQuota: true,
      cpuCFSQuotaPeriodMs: 100,
      logger: memoryLogger().logger,
      driver: "systemd",
      systemd: units,
    });
  });
  afterEach(() => tree.cleanup());

  test("huge pages: systemd does not enable hugetlb, so it is enabled down to the pod's parent before the limits are written (libcontainer's CreateCgroupPath)", async () => {
    const withPools = createPodCgroups({
      cgroupRoot: "/",
      fsRoot: tree.root,
      fs: tree.fs,
      podPidsLimit: 1024,
      cpuCFSQuota: true,
      cpuCFSQuotaPeriodMs: 100,
      logger: memoryLogger().logger,
      driver: "systemd",
      systemd: units,
      hugePagePools: [{ pageSizeKiB: 2048, numPages: 4 }],
    });
    await withPools.setupNode({ allocatable: { cpuMilli: 2000, memoryBytes: 1024 * MI, hugePages: { "hugepages-2Mi": 8 * MI } }, enforce: true });
    const hugeBurstable = { ...burstable, spec: { containers: [{ name: "c", image: "i", resources: { limits: { memory: "64Mi", "hugepages-2Mi": "4Mi" } } }] } };
    const p = await withPools.ensurePod(hugeBurstable);
    expect(read("/kubepods.slice", "hugetlb.2MB.max")).toBe(String(8 * MI));
    expect(read("/kubepods.slice/kubepods-burstable.slice", "hugetlb.2MB.max")).toBe("4611686018427387904");
    expect(read(p, "hugetlb.2MB.max")).toBe(String(4 * MI));
  });

  test("the slices of each QoS class, Guaranteed directly under kubepods.slice; the CRI gets the expanded path", async () => {
    await cg.setupNode({ allocatable: { cpuMilli: 2000, memoryBytes: 1024 * MI }, enforce: true });
    expect(await cg.ensurePod(guaranteed)).toBe(`/kubepods.slice/kubepods-pod${G_UID.replaceAll("-", "_")}.slice`);
    expect(await cg.ensurePod(burstable)).toBe("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb1b1b1b1_1111_4111_8111_111111111111.slice");
    expect(await cg.ensurePod(besteffort)).toBe("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pode1e1e1e1_2222_4222_8222_222222222222.slice");
    expect(listTree(tree.dir("/"))).toEqual([
      "kubepods.slice",
      "kubepods.slice/kubepods-besteffort.slice",
      "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pode1e1e1e1_2222_4222_8222_222222222222.slice",
      "kubepods.slice/kubepods-burstable.slice",
      "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb1b1b1b1_1111_4111_8111_111111111111.slice",
      `kubepods.slice/kubepods-pod${G_UID.replaceAll("-", "_")}.slice`,
    ]);
    expect(cg.podCgroupPath(burstable)).toBe("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb1b1b1b1_1111_4111_8111_111111111111.slice");
  });

  test("every slice is a transient unit with its parent in Wants=, accounting on, no default dependencies, not delegated", async () => {
    await cg.ensurePod(burstable);
    const starts = units.calls.filter((c) => c.method === "StartTransientUnit");
    expect(starts.map((c) => [c.unit, units.property(c.unit, "Wants")])).toEqual([
      ["kubepods.slice", "-.slice"],
      ["kubepods-burstable.slice", "kubepods.slice"],
      ["kubepods-burstable-podb1b1b1b1_1111_4111_8111_111111111111.slice", "kubepods-burstable.slice"],
    ]);
    for (const c of starts) {
      expect(units.property(c.unit, "DefaultDependencies")).toBe("false");
      for (const a of ["MemoryAccounting", "CPUAccounting", "IOAccounting", "TasksAccounting"]) expect(units.property(c.unit, a)).toBe("true");
      expect(units.property(c.unit, "Delegate")).toBeUndefined();
    }
  });

  test("limits as unit properties and in the cgroup files", async () => {
    const path = await cg.ensurePod(guaranteed);
    const unit = path.split("/").at(-1)!;
    expect(units.property(unit, "CPUWeight")).toBe("20");
    expect(units.property(unit, "CPUQuotaPerSecUSec")).toBe("500000");
    expect(units.property(unit, "CPUQuotaPeriodUSec")).toBe("100000");
    expect(units.property(unit, "MemoryMax")).toBe(String(64 * MI));
    expect(units.property(unit, "TasksMax")).toBe("1024");
    expect(read(path, "cpu.weight")).toBe("20");
    expect(read(path, "cpu.max")).toBe("50000 100000");
    expect(read(path, "memory.max")).toBe(String(64 * MI));
    expect(read(path, "pids.max")).toBe("1024");
  });

  test("an existing slice (agent restarted) is not started again, only updated", async () => {
    await cg.ensurePod(burstable);
    const again = createPodCgroups({
      cgroupRoot: "/",
      fsRoot: tree.root,
      fs: tree.fs,
      podPidsLimit: 512,
      cpuCFSQuota: true,
      cpuCFSQuotaPeriodMs: 100,
      logger: memoryLogger().logger,
      driver: "systemd",
      systemd: units,
    });
    const before = units.calls.length;
    const path = await again.ensurePod(burstable);
    expect(units.calls.slice(before).map((c) => c.method)).toEqual(["SetUnitProperties"]);
    expect(read(path, "pids.max")).toBe("512");
  });

  test("listPodUids gives UIDs back with their dashes; removePod stops the slice", async () => {
    for (const p of [guaranteed, burstable, besteffort]) await cg.ensurePod(p);
    expect(await cg.listPodUids()).toEqual([G_UID, burstable.metadata.uid!, besteffort.metadata.uid!].sort());
    await cg.removePod(burstable.metadata.uid!);
    expect(units.calls.at(-1)).toMatchObject({ method: "StopUnit", unit: "kubepods-burstable-podb1b1b1b1_1111_4111_8111_111111111111.slice" });
    expect(await cg.listPodUids()).toEqual([G_UID, besteffort.metadata.uid!].sort());
    await cg.removePod(burstable.metadata.uid!); // idempotent: nothing left to stop
  });

  test("removePod never kills: a slice with a process is not stopped (Busy)", async () => {
    const path = await cg.ensurePod(besteffort);
    tree.addProcess(path, 4242);
    const err = await cg.removePod(besteffort.metadata.uid!).catch((e: unknown) => e);
    expect(isCgroupError(err, "Busy")).toBe(true);
    expect(units.calls.some((c) => c.method === "StopUnit")).toBe(false);
    expect(units.loaded.has(path.split("/").at(-1)!)).toBe(true);
  });

  test("a slice whose cgroup never appears is an error naming it", async () => {
    const lazy = new FakeSystemdUnits();
    const cg2 = createPodCgroups({
      cgroupRoot: "/",
      fsRoot: tree.root,
      fs: tree.fs,
      podPidsLimit: -1,
      cpuCFSQuota: true,
      cpuCFSQuotaPeriodMs: 100,
      logger: memoryLogger().logger,
      driver: "systemd",
      systemd: lazy,
    });
    const err = await Promise.race([cg2.setupNode({ allocatable: { cpuMilli: 1000, memoryBytes: MI }, enforce: false }).catch((e: unknown) => e), Bun.sleep(8000)]);
    expect(String(err)).toContain("kubepods.slice");
  }, 10_000);

  test("enforceExisting: systemReservedCgroup as a slice (with or without a slash) gets its unit properties and files; a missing one is NotFound, never created", async () => {
    // system.slice exists (systemd made it at boot): loaded, with its cgroup and controllers.
    units.loaded.set("system.slice", []);
    await units.setUnitProperties("system.slice", []);
    await tree.fs.writeFile(join(tree.dir("/"), "cgroup.subtree_control"), "+cpu +memory +pids");
    await tree.fs.mkdir(tree.dir("/system.slice"));
    for (const name of ["/system.slice", "system.slice"]) {
      expect(await cg.enforceExisting(name, { cpuShares: 1024, memoryLimit: 512 * MI, pidsLimit: 1000 })).toBe("/system.slice");
    }
    expect(units.property("system.slice", "CPUWeight")).toBe("39");
    expect(units.property("system.slice", "MemoryMax")).toBe(String(512 * MI));
    expect(units.property("system.slice", "TasksMax")).toBe("1000");
    expect(read("/system.slice", "cpu.weight")).toBe("39");
    expect(read("/system.slice", "memory.max")).toBe(String(512 * MI));
    expect(read("/system.slice", "pids.max")).toBe("1000");
    // A nested slice name expands as upstream's systemd CgroupName: runtime-kube.slice lives in runtime.slice.
    const err = await cg.enforceExisting("/runtime-kube.slice", { cpuShares: 512 }).catch((e: unknown) => e);
    expect(isCgroupError(err) && err.kind).toBe("NotFound");
    expect(String(err)).toContain("/runtime.slice/runtime-kube.slice");
    expect(units.calls.some((c) => c.method === "StartTransientUnit" && c.unit.startsWith("runtime"))).toBe(false);
  });
});

describe("busctl", () => {
  test("an argument that starts with - (the root slice -.slice) is not read as an option", async () => {
    const units = busctlSystemdUnits({ address: "unix:path=/nonexistent/bunlet-test-bus" });
    const err = String(await units.startUnit("kubepods.slice", [{ name: "Wants", type: "as", value: ["-.slice"] }]).catch((e: unknown) => e));
    expect(err).not.toContain("invalid option");
    expect(err).toContain("StartTransientUnit");
  });
});
