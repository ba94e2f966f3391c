import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkHost, KERNEL_TUNABLES, numaNodes, swapDevices, type HostCheckDeps } from "./host-checks.ts";

const HEADER = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fake /proc: swaps and self/oom_score_adj as files; open file limits set are recorded. */
function fakeProc(swaps: string | undefined): HostCheckDeps & { root: string; limits: number[] } {
  const limits: number[] = [];
  const root = mkdtempSync(join(tmpdir(), "host-checks-"));
  dirs.push(root);
  mkdirSync(join(root, "self"));
  writeFileSync(join(root, "self/oom_score_adj"), "0\n");
  if (swaps !== undefined) writeFileSync(join(root, "swaps"), swaps);
  // Upstream's kernel tunables, as the kubelet wants them.
  for (const [flag, value] of KERNEL_TUNABLES) {
    mkdirSync(join(root, "sys", flag, ".."), { recursive: true });
    writeFileSync(join(root, "sys", flag), `${value}\n`);
  }
  writeFileSync(join(root, "self/uid_map"), "         0          0 4294967295\n");
  return {
    root,
    procRoot: root,
    sysctlRoot: join(root, "sys"),
    readFile: (p) => readFileSync(p, "utf8"),
    writeFile: (p, d) => writeFileSync(p, d),
    cgroupVersion: () => "v1",
    limits,
    setOpenFileLimit: (n) => void limits.push(n),
  };
}
const settings = {
  failSwapOn: true,
  failCgroupV1: false,
  oomScoreAdj: -999,
  maxOpenFiles: 1_000_000,
  protectKernelDefaults: false,
  featureGates: {} as Record<string, boolean>,
};

describe("failSwapOn", () => {
  test("/proc/swaps with a device: refused, naming it and the setting", () => {
    const r = checkHost(settings, fakeProc(`${HEADER}/swapfile                               file\t\t1048572\t\t0\t\t-2\n`));
    expect(r).toEqual({ ok: false, problem: expect.stringContaining("running with swap on is not supported, please disable swap or set --fail-swap-on flag to false") });
    expect(!r.ok && r.problem).toContain("lists /swapfile");
  });
  test("only the header: starts", () => {
    expect(checkHost(settings, fakeProc(HEADER)).ok).toBe(true);
  });
  test("swap on and failSwapOn false: starts", () => {
    expect(checkHost({ ...settings, failSwapOn: false }, fakeProc(`${HEADER}/dev/sda2 partition 1 0 -2\n`)).ok).toBe(true);
  });
  test("no /proc/swaps to read: refused with the path", () => {
    const p = fakeProc(undefined);
    expect(checkHost(settings, p)).toEqual({ ok: false, problem: expect.stringContaining(`cannot read ${join(p.root, "swaps")}`) });
  });
  test("swapDevices reads the first column of every line after the header", () => {
    expect(swapDevices(`${HEADER}/a file 1 0 -2\n/dev/b partition 1 0 -3\n`)).toEqual(["/a", "/dev/b"]);
  });
});

test("failCgroupV1 refuses a v1 host and starts on v2", () => {
  const p = fakeProc(HEADER);
  expect(checkHost({ ...settings, failCgroupV1: true }, p)).toEqual({ ok: false, problem: expect.stringContaining("cgroup v1") });
  expect(checkHost({ ...settings, failCgroupV1: true }, { ...p, cgroupVersion: () => "v2" }).ok).toBe(true);
});

test("singleProcessOOMKill: false is refused on a v1 host as invalid configuration (exit 2); true, unset, or any value on v2 starts", () => {
  const p = fakeProc(HEADER);
  expect(checkHost({ ...settings, failSwapOn: false, singleProcessOOMKill: false }, p)).toEqual({
    ok: false,
    problem: "invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1",
    invalidConfig: true,
  });
  expect(checkHost({ ...settings, failSwapOn: false, singleProcessOOMKill: true }, p).ok).toBe(true);
  expect(checkHost({ ...settings, failSwapOn: false }, p).ok).toBe(true);
  expect(checkHost({ ...settings, failSwapOn: false, singleProcessOOMKill: false }, { ...p, cgroupVersion: () => "v2" }).ok).toBe(true);
});

test("oomScoreAdj is written to the agent's own oom_score_adj; a failure is a warning", () => {
  const p = fakeProc(HEADER);
  expect(checkHost({ ...settings, oomScoreAdj: -500 }, p)).toEqual({ ok: true, warnings: [], info: [] });
  expect(readFileSync(join(p.root, "self/oom_score_adj"), "utf8")).toBe("-500");
  const denied = checkHost(settings, {
    ...p,
    writeFile: () => {
      throw new Error("EACCES: permission denied");
    },
  });
  expect(denied).toEqual({ ok: true, warnings: [expect.stringContaining("could not set the agent's")], info: [] });
});

test("maxOpenFiles sets the agent's open file limit; a failure is a warning naming the field, as upstream logs it", () => {
  const p = fakeProc(HEADER);
  expect(checkHost({ ...settings, maxOpenFiles: 4096 }, p)).toEqual({ ok: true, warnings: [], info: [] });
  expect(p.limits).toEqual([4096]);
  const denied = checkHost(settings, {
    ...p,
    setOpenFileLimit: () => {
      throw new Error("setrlimit(RLIMIT_NOFILE, 1000000) failed: EPERM");
    },
  });
  expect(denied).toEqual({ ok: true, warnings: ["maxOpenFiles: could not set the agent's open file limit to 1000000: setrlimit(RLIMIT_NOFILE, 1000000) failed: EPERM"], info: [] });
});

test("numaNodes: the nodeN entries in order; none or no directory is one node", () => {
  expect(numaNodes("/x", () => ["possible", "node1", "online", "node0", "has_cpu"])).toEqual([0, 1]);
  expect(numaNodes("/x", () => ["possible"])).toEqual([0]);
  expect(numaNodes("/nonexistent-numa-dir")).toEqual([0]);
  expect(numaNodes("/sys/devices/system/node").length).toBeGreaterThan(0);
});

describe("protectKernelDefaults", () => {
  const loose = () => {
    const p = fakeProc(HEADER);
    writeFileSync(join(p.root, "sys/vm/overcommit_memory"), "0\n");
    writeFileSync(join(p.root, "sys/kernel/panic_on_oops"), "0\n");
    return p;
  };
  test("upstream's six tunables, with upstream's values", () => {
    expect(Object.fromEntries(KERNEL_TUNABLES)).toEqual({
      "vm/overcommit_memory": 1,
      "vm/panic_on_oom": 0,
      "kernel/panic": 10,
      "kernel/panic_on_oops": 1,
      "kernel/keys/root_maxkeys": 1000000,
      "kernel/keys/root_maxbytes": 25000000,
    });
  });
  test("true, every tunable as upstream wants it: starts, no warning", () => {
    expect(checkHost({ ...settings, failSwapOn: false, protectKernelDefaults: true }, fakeProc(HEADER))).toEqual({ ok: true, warnings: [], info: [] });
  });
  test("true, two differ: refused with upstream's message for each", () => {
    const r = checkHost({ ...settings, protectKernelDefaults: true }, loose());
    expect(r).toEqual({
      ok: false,
      problem:
        "[invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0, invalid kernel flag: kernel/panic_on_oops, expected value: 1, actual value: 0] (protectKernelDefaults: true, --protect-kernel-defaults: the kernel tunables must be set as the kubelet expects)",
    });
  });
  test("false, two differ: both are written with upstream's values, the agent starts, as upstream's KernelTunableModify", () => {
    const p = loose();
    const r = checkHost(settings, p);
    expect(r).toEqual({
      ok: true,
      warnings: [],
      info: ["Updating kernel flag vm/overcommit_memory: expected value 1, actual value 0", "Updating kernel flag kernel/panic_on_oops: expected value 1, actual value 0"],
    });
    expect(readFileSync(join(p.root, "sys/vm/overcommit_memory"), "utf8")).toBe("1");
    expect(readFileSync(join(p.root, "sys/kernel/panic_on_oops"), "utf8")).toBe("1");
    // Now as upstream wants them: nothing more is written, and true starts too.
    expect(checkHost(settings, p)).toEqual({ ok: true, warnings: [], info: [] });
    expect(checkHost({ ...settings, protectKernelDefaults: true }, p)).toEqual({ ok: true, warnings: [], info: [] });
  });
  test("false, a tunable that cannot be written stops the agent, as upstream; in a user namespace only with the hint", () => {
    const p = loose();
    const failing = {
      ...p,
      writeFile: (path: string) => {
        throw new Error(`EACCES: permission denied, open '${path}'`);
      },
    };
    const r = checkHost(settings, failing);
    expect(r).toEqual({
      ok: false,
      problem: `[write ${join(p.root, "sys/vm/overcommit_memory")}: EACCES: permission denied, open '${join(p.root, "sys/vm/overcommit_memory")}', write ${join(p.root, "sys/kernel/panic_on_oops")}: EACCES: permission denied, open '${join(p.root, "sys/kernel/panic_on_oops")}'] (protectKernelDefaults: false, --protect-kernel-defaults: the kubelet sets these kernel tunables)`,
    });
    writeFileSync(join(p.root, "self/uid_map"), "         0     100000      65536\n");
    const inUserns = checkHost(settings, failing);
    expect(!inUserns.ok && inUserns.problem).toContain("(Hint: enable KubeletInUserNamespace feature flag to ignore the error)");
    const gated = checkHost({ ...settings, featureGates: { KubeletInUserNamespace: true } }, failing);
    expect(gated.ok).toBe(true);
    expect(gated.ok && gated.info.filter((l) => l.startsWith("Updating kernel flag failed (running in UserNS, ignoring)"))).toHaveLength(2);
  });
  test("a tunable that cannot be read stops the agent whatever the setting, as upstream", () => {
    const p = fakeProc(HEADER);
    rmSync(join(p.root, "sys/kernel/keys"), { recursive: true });
    for (const protect of [false, true]) {
      const r = checkHost({ ...settings, protectKernelDefaults: protect }, p);
      expect(r.ok).toBe(false);
      expect(!r.ok && r.problem).toStartWith(`[reading ${join(p.root, "sys/kernel/keys/root_maxkeys")}: `);
    }
  });
});
