// kubeletCgroups and systemCgroups on a fake cgroupfs (fake-fs.ts moves a pid
// out of the hierarchy's other cgroups, as the kernel) and a fake /proc.
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { fakeCgroupTree, type FakeCgroupTree } from "./fake-fs.ts";
import { createSystemCgroups, ENSURE_PERIOD_MS, OOM_SCORE_PERIOD_MS, type ProcFs } from "./index.ts";
import { cgroupName, parseProcCgroup } from "./system-cgroups.ts";

const AGENT = 4242;
const V1_NAMES = ["cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd", "unified"];

/** /proc of the fake host: pid namespaces, executables (kernel threads have none), oom_score_adj writes, /proc/<pid>/cgroup from the tree. */
function fakeProc(tree: FakeCgroupTree, version: "v1" | "v2", o: { kernelPids?: number[]; agentPidNs?: string; initDenied?: boolean; nspid?: string } = {}) {
  const writes: [string, string][] = [];
  const enoent = (path: string) => Object.assign(new Error(`ENOENT: ${path}`), { code: "ENOENT" });
  /** Where `pid` is in hierarchy `name`, from the cgroup.procs files. */
  const whereIs = (pid: number, name?: string): string => {
    const walk = (path: string): string | undefined => {
      if (tree.read(path, "cgroup.procs", name).split("\n").includes(String(pid))) return path;
      const dir = tree.dir(path, name);
      for (const e of new Bun.Glob("*/cgroup.procs").scanSync({ cwd: dir })) {
        const found = walk(cgroupName(`${path}/${e.slice(0, -"/cgroup.procs".length)}`));
        if (found) return found;
      }
      return undefined;
    };
    return walk("/") ?? "/";
  };
  const proc: ProcFs = {
    readFile(path) {
      if (path === `/proc/${AGENT}/status` && o.nspid !== undefined) return `Name:\tbun\nNSpid:\t${o.nspid}\n`;
      const m = /^\/proc\/(\d+)\/cgroup$/.exec(path);
      if (!m) throw enoent(path);
      const pid = Number(m[1]);
      if (version === "v2") return `0::${whereIs(pid)}\n`;
      const controllers: Record<string, string> = { systemd: "name=systemd", unified: "" };
      return V1_NAMES.map((n, i) => `${i}:${controllers[n] ?? n}:${whereIs(pid, n)}`).join("\n") + "\n";
    },
    writeFile(path, data) {
      writes.push([path, data]);
    },
    readlink(path) {
      if (path === "/proc/1/ns/pid" && o.initDenied) throw Object.assign(new Error(`EACCES: ${path}`), { code: "EACCES" });
      if (path === "/proc/1/ns/pid") return "pid:[4026531836]";
      if (path === `/proc/${AGENT}/ns/pid`) return o.agentPidNs ?? "pid:[4026531836]";
      const exe = /^\/proc\/(\d+)\/exe$/.exec(path);
      if (exe && !(o.kernelPids ?? []).includes(Number(exe[1]))) return "/usr/bin/something";
      throw enoent(path);
    },
  };
  return { proc, writes };
}

function make(tree: FakeCgroupTree, proc: ProcFs, over: { kubeletCgroups?: string; systemCgroups?: string; clock?: FakeClock } = {}) {
  const log = memoryLogger();
  const sys = createSystemCgroups({
    kubeletCgroups: over.kubeletCgroups ?? "",
    systemCgroups: over.systemCgroups ?? "",
    oomScoreAdj: -999,
    pid: AGENT,
    fsRoot: tree.root,
    fs: tree.fs,
    proc,
    procRoot: "/proc",
    clock: over.clock ?? new FakeClock(),
    logger: log.logger,
  });
  return { sys, lines: log.lines };
}

const procsOf = (tree: FakeCgroupTree, path: string, name?: string) => tree.read(path, "cgroup.procs", name).split("\n").filter(Boolean).map(Number);

let tree: FakeCgroupTree | undefined;
afterEach(() => tree?.cleanup());

test("names are cgroupfs paths below the root; /proc/<pid>/cgroup is read per hierarchy", () => {
  expect(cgroupName("kubelet")).toBe("/kubelet");
  expect(cgroupName("/system.slice/kubelet.service/")).toBe("/system.slice/kubelet.service");
  expect(parseProcCgroup("9:name=systemd:/\n2:cpuacct,cpu:/a\n0::/b\n")).toEqual(
    new Map([
      ["name=systemd", "/"],
      ["cpu,cpuacct", "/a"],
      ["", "/b"],
    ]),
  );
});

describe("kubeletCgroups", () => {
  test("cgroup v1 (hybrid): the agent moves into the cgroup, created in every hierarchy and the cgroup2 mount, cpuset filled, oom_score_adj set", async () => {
    tree = fakeCgroupTree("v1");
    for (const n of V1_NAMES) tree.addProcess("/", AGENT, n);
    const { proc, writes } = fakeProc(tree, "v1");
    const { sys, lines } = make(tree, proc, { kubeletCgroups: "/runtime.slice/kubelet" });
    await sys.ensureKubelet();
    for (const n of V1_NAMES) {
      expect(procsOf(tree, "/runtime.slice/kubelet", n)).toEqual([AGENT]);
      expect(procsOf(tree, "/", n)).toEqual([1]);
    }
    expect(tree.read("/runtime.slice/kubelet", "cpuset.cpus", "cpuset")).toBe("0-1");
    expect(writes).toEqual([[`/proc/${AGENT}/oom_score_adj`, "-999"]]);
    expect(lines.filter((l) => l.includes("moved the agent into kubeletCgroups"))).toHaveLength(1);
    // Already there: not moved again (upstream compares the current cgroup first); the oom_score_adj is set again.
    await sys.ensureKubelet();
    expect(lines.filter((l) => l.includes("moved the agent into kubeletCgroups"))).toHaveLength(1);
    expect(writes).toHaveLength(2);
  });

  test("cgroup v2: moved into the cgroup, the root's controllers enabled for it", async () => {
    tree = fakeCgroupTree("v2");
    tree.addProcess("/", AGENT);
    const { proc } = fakeProc(tree, "v2");
    const { sys } = make(tree, proc, { kubeletCgroups: "kubelet" });
    await sys.ensureKubelet();
    expect(procsOf(tree, "/kubelet")).toEqual([AGENT]);
    expect(procsOf(tree, "/")).toEqual([1]);
    expect(tree.read("/", "cgroup.subtree_control")).toContain("memory");
  });

  test("an agent outside the host's PID namespace is left alone, as upstream", async () => {
    tree = fakeCgroupTree("v2");
    tree.addProcess("/", AGENT);
    const { proc, writes } = fakeProc(tree, "v2", { agentPidNs: "pid:[4026532999]" });
    const { sys } = make(tree, proc, { kubeletCgroups: "/kubelet" });
    await sys.ensureKubelet();
    expect(procsOf(tree, "/")).toContain(AGENT);
    expect(writes).toEqual([]);
  });

  test("init's namespace link denied: NSpid of /proc/<pid>/status tells, one entry for init's namespace", async () => {
    tree = fakeCgroupTree("v2");
    tree.addProcess("/", AGENT);
    const nested = make(tree, fakeProc(tree, "v2", { initDenied: true, nspid: "4242 7" }).proc, { kubeletCgroups: "/kubelet" });
    await nested.sys.ensureKubelet();
    expect(procsOf(tree, "/")).toContain(AGENT);
    const unknown = make(tree, fakeProc(tree, "v2", { initDenied: true }).proc, { kubeletCgroups: "/kubelet" });
    await unknown.sys.ensure();
    expect(unknown.lines.find((l) => l.includes("Failed to ensure state"))).toContain("failed to find pid namespace of init process");
    const host = make(tree, fakeProc(tree, "v2", { initDenied: true, nspid: "4242" }).proc, { kubeletCgroups: "/kubelet" });
    await host.sys.ensureKubelet();
    expect(procsOf(tree, "/kubelet")).toEqual([AGENT]);
  });

  test('a failure is logged as upstream\'s "Failed to ensure state", not thrown', async () => {
    tree = fakeCgroupTree("v2", { v2Controllers: ["cpu", "memory"] }); // no pids controller: the cgroup cannot be made ready
    tree.addProcess("/", AGENT);
    const { proc } = fakeProc(tree, "v2");
    const { sys, lines } = make(tree, proc, { kubeletCgroups: "/kubelet" });
    await sys.ensure();
    expect(procsOf(tree, "/")).toContain(AGENT);
    expect(lines.find((l) => l.includes("Failed to ensure state"))).toContain("failed to move PID 4242 to");
  });
});

describe("systemCgroups", () => {
  for (const version of ["v1", "v2"] as const) {
    test(`cgroup ${version}: the root's processes move, but pid 1 and kernel threads`, async () => {
      tree = fakeCgroupTree(version);
      const names = version === "v1" ? V1_NAMES : [undefined];
      for (const n of names) for (const pid of [2, 300, 301]) tree.addProcess("/", pid, n);
      const { proc } = fakeProc(tree, version, { kernelPids: [2] });
      const { sys } = make(tree, proc, { systemCgroups: "/system" });
      await sys.ensureSystem();
      for (const n of names) {
        expect(procsOf(tree, "/", n)).toEqual([1, 2]);
        expect(procsOf(tree, "/system", n)).toEqual([300, 301]);
      }
    });
  }

  test("the root is refused", () => {
    tree = fakeCgroupTree("v2");
    expect(() => make(tree!, fakeProc(tree!, "v2").proc, { systemCgroups: "/" })).toThrow('system container cannot be root ("/")');
  });
});

describe("the ensure loop", () => {
  test("with kubeletCgroups: at once, then every minute, until disposed", async () => {
    tree = fakeCgroupTree("v2");
    tree.addProcess("/", AGENT);
    const { proc, writes } = fakeProc(tree, "v2");
    const clock = new FakeClock();
    const { sys } = make(tree, proc, { kubeletCgroups: "/kubelet", clock });
    await sys.start();
    expect(procsOf(tree, "/kubelet")).toEqual([AGENT]);
    // Someone moves it back: the next pass, a minute later, moves it again.
    await tree.fs.writeFile(join(tree.dir("/"), "cgroup.procs"), String(AGENT));
    expect(procsOf(tree, "/kubelet")).toEqual([]);
    clock.advance(ENSURE_PERIOD_MS);
    await Bun.sleep(20);
    expect(procsOf(tree, "/kubelet")).toEqual([AGENT]);
    expect(writes).toHaveLength(2);
    sys[Symbol.dispose]();
    expect(clock.pendingTimers()).toBe(0);
  });

  test("without kubeletCgroups: only the agent's oom_score_adj, every 5 minutes", async () => {
    tree = fakeCgroupTree("v2");
    tree.addProcess("/", AGENT);
    const { proc, writes } = fakeProc(tree, "v2");
    const clock = new FakeClock();
    const { sys } = make(tree, proc, { clock });
    await sys.start();
    // The host checks set it at start; the loop sets it again every 5 minutes.
    expect(writes).toEqual([]);
    clock.advance(ENSURE_PERIOD_MS);
    await Bun.sleep(10);
    expect(writes).toEqual([]);
    clock.advance(OOM_SCORE_PERIOD_MS - ENSURE_PERIOD_MS);
    await Bun.sleep(10);
    expect(writes).toEqual([[`/proc/${AGENT}/oom_score_adj`, "-999"]]);
    clock.advance(OOM_SCORE_PERIOD_MS);
    await Bun.sleep(10);
    expect(writes).toHaveLength(2);
    expect(procsOf(tree, "/")).toContain(AGENT);
    sys[Symbol.dispose]();
  });
});
