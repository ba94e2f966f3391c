// The cgroup v2 writer on a real cgroup v2 kernel: Debian's cloud kernel in
// qemu boots an initramfs with the probe (test/vm/probe.ts, compiled with
// Bun), which runs src/cgroups for real and prints what the kernel shows.
// Missing qemu or kernel FAILS this test (scripts/setup.sh installs qemu and unpacks the kernel into the cache);
// it never skips. About 10 s warm (build cached in .cache/vm), 15 s cold.
import { beforeAll, describe, expect, test } from "bun:test";
import { podResourceConfig, sharesToCpuWeight } from "../../src/cgroups/index.ts";
import { buildInitramfs } from "../../scripts/vm/initramfs.ts";
import { requireVm, runVm } from "../../scripts/vm/run.ts";
import { VM_ALLOCATABLE, VM_OPTIONS, VM_PODS } from "../vm/checks/cgroups.ts";
import { parseProbeOutput, type ProbeResult } from "../vm/protocol.ts";

const MI = 2 ** 20;
let result: ProbeResult;
let timing = "";

beforeAll(async () => {
  const { kernel } = requireVm();
  const initramfs = await buildInitramfs();
  const run = await runVm({ initramfs: initramfs.path, kernel, timeoutMs: 90_000 });
  timing = `initramfs ${initramfs.built ? "built" : "cached"} in ${initramfs.ms} ms, VM ${run.ms} ms`;
  if (run.timedOut) throw new Error(`the VM did not power off within 90 s (${timing}); output:\n${run.output.slice(-4000)}`);
  result = parseProbeOutput(run.output);
  console.error(`cgroup v2 VM: ${timing}, kernel ${result.kernel}, probe ${result.ms} ms`);
}, 150_000);

/** A check's value; a failed check fails with the probe's stack trace. */
function value<T>(name: string): T {
  const r = result.checks[name];
  if (!r) throw new Error(`the probe did not run check ${name}`);
  if (!r.ok) throw new Error(`check ${name} failed in the VM:\n${r.error}`);
  return r.value as T;
}

type Files = Record<string, Record<string, string>>;
const ALL = "cpuset cpu io memory hugetlb pids";

describe("cgroup v2 writer on a real kernel (qemu)", () => {
  test("the kernel is cgroup v2 with every controller", () => {
    expect(result.kernel).toMatch(/cloud-amd64$/);
    expect(value<{ rootControllers: string }>("cgroup2-mount").rootControllers.split(" ")).toEqual(expect.arrayContaining(["cpu", "memory", "pids", "io", "cpuset", "hugetlb"]));
  });

  test("setupNode / ensurePod / updateQos: upstream names, controllers enabled from the root down, values as computed", () => {
    const w = value<{ version: string; paths: Record<string, string>; listed: string[]; files: Files }>("cgroup-v2-writer");
    expect(w.version).toBe("v2");
    expect(w.paths).toEqual({
      burstable: "/kubepods/burstable/podburstable-1",
      guaranteed: "/kubepods/podguaranteed-1",
      besteffort: "/kubepods/besteffort/podbesteffort-1",
    });
    expect(w.listed).toEqual(["besteffort-1", "burstable-1", "guaranteed-1"]);
    const f = w.files;
    for (const p of ["/", "/kubepods", "/kubepods/burstable", "/kubepods/besteffort"]) expect([p, f[p]!["cgroup.subtree_control"]]).toEqual([p, ALL]);
    // runc enables the pod's own subtree when it creates container cgroups.
    for (const p of Object.values(w.paths)) expect([p, f[p]!["cgroup.subtree_control"], f[p]!["cgroup.controllers"]]).toEqual([p, "", ALL]);

    // Node allocatable on kubepods: 1000m → 1024 shares → weight 39; memory and pids enforced.
    expect(f["/kubepods"]).toMatchObject({ "cpu.weight": "39", "cpu.max": "max 100000", "memory.max": String(VM_ALLOCATABLE.memoryBytes), "pids.max": "2048" });
    // QoS: burstable = the Burstable pod's 250m (256 shares → 10), besteffort minimal.
    expect(f["/kubepods/burstable"]).toMatchObject({ "cpu.weight": "10", "memory.max": "max" });
    expect(f["/kubepods/besteffort"]).toMatchObject({ "cpu.weight": "1", "memory.max": "max" });

    expect(f[w.paths.burstable!]).toMatchObject({ "cpu.weight": "10", "cpu.max": "50000 100000", "memory.max": String(32 * MI), "pids.max": "1024" });
    expect(f[w.paths.guaranteed!]).toMatchObject({ "cpu.weight": "4", "cpu.max": "10000 100000", "memory.max": String(64 * MI), "pids.max": "1024" });
    expect(f[w.paths.besteffort!]).toMatchObject({ "cpu.weight": "1", "cpu.max": "max 100000", "memory.max": "max", "pids.max": "1024" });

    // The same numbers the pure functions give.
    for (const [k, pod] of Object.entries(VM_PODS)) {
      const c = podResourceConfig(pod, { cpuCFSQuota: VM_OPTIONS.cpuCFSQuota, cpuCFSQuotaPeriodUs: VM_OPTIONS.cpuCFSQuotaPeriodMs * 1000, podPidsLimit: VM_OPTIONS.podPidsLimit });
      expect(f[w.paths[k]!]!["cpu.weight"]).toBe(String(sharesToCpuWeight(c.cpuShares!)));
    }
  });

  test("the kernel enforces the pod's memory.max: a hog in a container cgroup below it is OOM-killed", () => {
    const oom = value<{ signal: string | null; events: Record<string, string> }>("cgroup-v2-oom");
    expect(oom.signal).toBe("SIGKILL");
    expect(Number(oom.events.oom_kill)).toBeGreaterThanOrEqual(1);
  });

  test("the kernel enforces the pod's cpu.max: a busy loop is throttled to about 100m", () => {
    const t = value<{ wallUs: number; usageUs: number; nrThrottled: number }>("cgroup-v2-throttle");
    expect(t.nrThrottled).toBeGreaterThan(0);
    expect(t.usageUs).toBeLessThan(t.wallUs * 0.2);
    expect(t.usageUs).toBeGreaterThan(t.wallUs * 0.02);
  });

  test("huge pages: hugetlb.<size>.max (and .rsvd.max) on the pod (its request, 0 for other sizes), kubepods and unbounded QoS levels; the kernel enforces them", () => {
    type Limits = Record<string, string>;
    const h = value<{
      sizes: string[];
      files: Record<string, Limits>;
      podPath: string;
      nonePath: string;
      withinCode: number;
      beyondCode: number;
      beyondErr: string;
      noneCode: number;
      usage: string;
    }>("cgroup-v2-hugetlb");
    // 1 << 62 (upstream's unbounded), exactly: String(2 ** 62) would be the double's 4611686018427388000.
    const unbounded = "4611686018427387904";
    expect(h.sizes[0]).toBe("2MB");
    expect(h.podPath).toBe("/hp/kubepods/podhuge-1");
    // Each size's limit and reservation limit: what the pod (or kubepods) was given, 0 for any other size; unbounded on the QoS levels.
    const each = (f: (size: string) => string): Limits => Object.fromEntries(h.sizes.flatMap((s) => [`${s}.max`, `${s}.rsvd.max`].map((k) => [k, f(s)])));
    expect(h.files).toEqual({
      "/hp/kubepods": each((s) => (s === "2MB" ? String(12 * MI) : "0")),
      "/hp/kubepods/burstable": each(() => unbounded),
      "/hp/kubepods/besteffort": each(() => unbounded),
      "/hp/kubepods/podhuge-1": each((s) => (s === "2MB" ? String(4 * MI) : "0")),
      "/hp/kubepods/besteffort/podnohuge-1": each(() => "0"),
    });
    // 4 MiB (two pages) fit the pod's 4Mi; one page more does not; a pod that asked none gets none.
    expect(h.withinCode).toBe(0);
    expect(h.usage).toBe(String(4 * MI));
    expect([h.beyondCode, h.beyondErr]).not.toEqual([0, ""]);
    expect(h.noneCode).not.toBe(0);
  });

  test("removePod removes the pods' cgroups (and the empty container cgroups below)", () => {
    expect(value("cgroup-v2-remove")).toEqual({ listedAfter: [], dirsLeft: [] });
  });

  test("the stats reader reads the v2 files the collector uses: CPU with throttling, memory with the OOM kill, pids", () => {
    type Read = {
      cpu?: { usageNanoseconds: number; nrThrottled?: number };
      memory?: { usageBytes: number; workingSetBytes: number; limitBytes?: number; oomKills?: number };
      pids?: number;
    };
    const s = value<{ version: string; guaranteed: Read; burstable: Read; kubepods: Read }>("stats-v2-reader");
    expect(s.version).toBe("v2");
    // The busy loop ran ~0.1 s of CPU under its 100m limit and was throttled.
    expect(s.guaranteed.cpu!.usageNanoseconds).toBeGreaterThan(50_000_000);
    expect(s.guaranteed.cpu!.nrThrottled!).toBeGreaterThan(0);
    expect(s.guaranteed.memory!.limitBytes).toBe(64 * 2 ** 20);
    // The hog hit memory.max: one OOM kill, counted in memory.events.
    expect(s.burstable.memory!.oomKills).toBe(1);
    expect(s.burstable.memory!.limitBytes).toBe(32 * 2 ** 20);
    expect(s.kubepods.cpu!.usageNanoseconds).toBeGreaterThanOrEqual(s.guaranteed.cpu!.usageNanoseconds);
    expect(s.kubepods.memory!.workingSetBytes).toBeGreaterThanOrEqual(0);
  });
});
