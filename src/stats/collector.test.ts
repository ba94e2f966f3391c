// The collector over a fake fsRoot (testdata/ copied, pod cgroups added) and
// a FakeCri with numbers set per container: what lands in the Summary, the
// two-sample CPU rate, failures that leave one part out, caching, the timer.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { parseFlatKeyed, parseSingleValue } from "./cgroupfs.ts";
import { createStatsCollector, type StatsCollector } from "./collector.ts";
import { parseMeminfo } from "./procfs.ts";
import { FakeNode, HOST_NETNS, POD_NET_DEV, StatsFakeCri } from "./testutil.ts";
import type { PodStats } from "./types.ts";
import type { PodRef } from "../pods/identity.ts";
import { podLogDirectory as runtimePodLogDirectory, podLogDirectory } from "../pods/dirs.ts";

const web: PodRef = { uid: "uid-web", name: "web", namespace: "default" };
const db: PodRef = { uid: "uid-db", name: "db", namespace: "prod" };

let node: FakeNode;
let clock: FakeClock;
let cri: StatsFakeCri;
let pods: PodRef[];
let logs: ReturnType<typeof memoryLogger>;
let collector: StatsCollector;

function setup(version: "v1" | "v2", extra: Partial<Parameters<typeof createStatsCollector>[0]> = {}) {
  node = new FakeNode(version);
  clock = new FakeClock();
  cri = new StatsFakeCri(clock, node.layerDir);
  pods = [web, db];
  logs = memoryLogger(3);
  collector = createStatsCollector({
    nodeName: "n1",
    rootDir: node.rootDir,
    fsRoot: node.fsRoot,
    cgroupRoot: "/kubepods",
    podCgroups: { podCgroupPath: node.podCgroup },
    cri,
    pods: { activePods: () => pods.map((metadata) => ({ metadata })) },
    podLogsDir: node.podLogsDir,
    clock,
    logger: logs.logger,
    ...extra,
  });
}

afterEach(async () => {
  await collector?.[Symbol.asyncDispose]();
  node?.cleanup();
});

const podOf = (pods: PodStats[], uid: string) => pods.find((p) => p.podRef.uid === uid);

describe("cgroup v1 (captured tree)", () => {
  let webIds: { sandbox: string; containers: string[] };

  beforeEach(async () => {
    setup("v1");
    webIds = await cri.addPod(web, ["app", "sidecar"]);
    node.addPodCgroup(web.uid);
    node.addPodProcess(web.uid, 4242, "net:[4026532500]", POD_NET_DEV);
    cri.numbers.set(webIds.containers[0]!, { cpuNs: 5e9, workingSetBytes: 30 << 20, layerBytes: 4096 });
    cri.numbers.set(webIds.containers[1]!, { cpuNs: 1e9, workingSetBytes: 10 << 20, layerBytes: 8192 });
    node.writeLog(web, "app", "0.log", 10_000);
    node.writeLog(web, "sidecar", "0.log", 100);
  });

  test("node: cpu from /proc/stat, memory from the root cgroup against MemTotal, network, nodefs, rlimit, pods container, imagefs", async () => {
    await collector.collect();
    const { node: n } = await collector.summary();
    const f = (rel: string) => readFileSync(join(node.fsRoot, rel), "utf8");

    expect(n.nodeName).toBe("n1");
    expect(n.startTime).toBe(new Date(1795290771 * 1000).toISOString());
    expect(n.cpu).toEqual({ time: new Date(clock.now()).toISOString(), usageCoreNanoSeconds: (183848 + 67534 + 1170 + 95) * 1e7 });

    const usage = parseSingleValue(f("sys/fs/cgroup/memory/memory.usage_in_bytes"))!;
    const inactive = parseFlatKeyed(f("sys/fs/cgroup/memory/memory.stat")).get("total_inactive_file")!;
    const total = parseMeminfo(f("proc/meminfo")).get("MemTotal")!;
    expect(n.memory).toMatchObject({ usageBytes: usage, workingSetBytes: usage - inactive, availableBytes: total - (usage - inactive) });

    expect(n.network?.name).toBe("eth0");
    expect(n.network?.rxBytes).toBe(1351920640);
    expect(n.network?.interfaces?.map((i) => i.name)).toEqual(["ifb0", "ifb1", "eth0"]); // no lo

    expect(n.fs?.capacityBytes).toBeGreaterThan(n.fs!.availableBytes!);
    expect(n.fs?.inodesUsed).toBe(n.fs!.inodes! - n.fs!.inodesFree!);
    expect(n.rlimit).toMatchObject({ maxpid: 32768, curproc: 96 });
    expect(n.systemContainers).toEqual([
      {
        name: "pods",
        startTime: n.startTime,
        cpu: { time: n.cpu!.time, usageCoreNanoSeconds: 1216755603 },
        memory: { time: n.cpu!.time, usageBytes: 21741568, workingSetBytes: 21741568, rssBytes: 20172800, pageFaults: 11499, majorPageFaults: 0 },
      },
    ]);
    expect(n.runtime?.imageFs?.capacityBytes).toBeGreaterThan(0);
    expect(n.runtime?.imageFs?.usedBytes).toBe(2 * 1024 * 1024); // FakeCri: two 1 MiB images
    expect(n.runtime?.containerFs).toEqual(n.runtime?.imageFs);
  });

  test("pod: cgroup cpu/memory/processes, network of its namespace, containers from CRI with rootfs and logs, ephemeral-storage as their sum", async () => {
    await collector.collect();
    const { pods: ps } = await collector.summary();
    expect(ps.map((p) => p.podRef.uid)).toEqual([web.uid]); // db has no sandbox: not reported
    const p = podOf(ps, web.uid)!;
    expect(p.podRef).toEqual(web);
    expect(p.cpu?.usageCoreNanoSeconds).toBe(1216755603);
    expect(p.cpu?.usageNanoCores).toBeUndefined(); // one sample only
    expect(p.memory).toMatchObject({ workingSetBytes: 21741568, rssBytes: 20172800 });
    expect(p.memory?.availableBytes).toBeUndefined(); // no limit
    expect(p.process_stats).toEqual({ process_count: 2 });
    expect(p.network).toEqual({
      time: p.cpu!.time,
      name: "eth0",
      rxBytes: 1000,
      rxErrors: 1,
      txBytes: 2000,
      txErrors: 0,
      interfaces: [{ name: "eth0", rxBytes: 1000, rxErrors: 1, txBytes: 2000, txErrors: 0 }],
    });

    expect(p.containers.map((c) => c.name).sort()).toEqual(["app", "sidecar"]);
    const app = p.containers.find((c) => c.name === "app")!;
    expect(app.cpu?.usageCoreNanoSeconds).toBe(5e9);
    expect(app.memory).toMatchObject({ workingSetBytes: 30 << 20 });
    expect(app.memory?.availableBytes).toBeUndefined(); // containerd's 0 means "no limit known"
    expect(app.rootfs).toMatchObject({ usedBytes: 4096, inodesUsed: 1 });
    expect(app.rootfs?.capacityBytes).toBeGreaterThan(0);
    expect(app.logs?.usedBytes).toBeGreaterThanOrEqual(10_000);
    expect(app.logs?.inodesUsed).toBe(1);
    expect(app.logs?.capacityBytes).toBe(p["ephemeral-storage"]?.capacityBytes);

    const sidecar = p.containers.find((c) => c.name === "sidecar")!;
    const eph = p["ephemeral-storage"]!;
    expect(eph.usedBytes).toBe(4096 + 8192 + app.logs!.usedBytes! + sidecar.logs!.usedBytes!);
    expect(eph.inodesUsed).toBe(2 + 2);
  });

  test("second pass: usageNanoCores for node, pods parent, pod and containers from the clock's interval", async () => {
    await collector.collect();
    clock.advance(10_000);
    node.addNodeUserJiffies(1500); // 15 s of CPU in 10 s
    node.setCgroupCpu(`/kubepods/pod${web.uid}`, 1216755603 + 5e9);
    node.setCgroupCpu("/kubepods", 1216755603 + 2e9);
    cri.numbers.set(webIds.containers[0]!, { cpuNs: 5e9 + 2.5e9 });
    await collector.collect();
    const s = await collector.summary();
    expect(s.node.cpu?.usageNanoCores).toBe(1.5e9);
    expect(s.node.systemContainers?.[0]?.cpu?.usageNanoCores).toBe(2e8);
    const p = podOf(s.pods, web.uid)!;
    expect(p.cpu?.usageNanoCores).toBe(5e8);
    expect(p.containers.find((c) => c.name === "app")?.cpu?.usageNanoCores).toBe(2.5e8);
    expect(p.containers.find((c) => c.name === "sidecar")?.cpu?.usageNanoCores).toBe(0);
  });

  test("exited containers and older sandboxes are left out; a restarted container's rate starts over", async () => {
    const dbIds = await cri.addPod(db, ["main"]);
    node.addPodCgroup(db.uid);
    cri.numbers.set(dbIds.containers[0]!, { cpuNs: 1e9 });
    await collector.collect();
    clock.advance(10_000);
    cri.fake.exitContainer(dbIds.containers[0]!, 1);
    const config = { metadata: { name: db.name, namespace: db.namespace, uid: db.uid, attempt: 0 } };
    const next = await cri.fake.createContainer(dbIds.sandbox, { metadata: { name: "main", attempt: 1 }, image: { image: "docker.io/library/busybox:1.36" } }, config);
    await cri.fake.startContainer(next);
    cri.numbers.set(next, { cpuNs: 3e9 });
    await collector.collect();
    const p = podOf((await collector.summary()).pods, db.uid)!;
    expect(p.containers).toHaveLength(1);
    expect(p.containers[0]?.cpu).toEqual({ time: new Date(clock.now()).toISOString(), usageCoreNanoSeconds: 3e9 });
  });

  test("a pod without a cgroup gets its containers' CRI cpu and memory added up, and no processes or network", async () => {
    node.removePodCgroup(web.uid);
    await collector.collect();
    const p = podOf((await collector.summary()).pods, web.uid)!;
    expect(p.cpu?.usageCoreNanoSeconds).toBe(5e9 + 1e9);
    expect(p.memory).toEqual({ time: p.cpu!.time, workingSetBytes: 40 << 20, usageBytes: 40 << 20 });
    expect(p.process_stats).toBeUndefined();
    expect(p.network).toBeUndefined();
  });

  test("network: none for a pod on the host's network (the node's counters) or without a process; a pid that exited is skipped", async () => {
    const hostNet: PodRef = { uid: "uid-hostnet", name: "hostnet", namespace: "default" };
    const idle: PodRef = { uid: "uid-idle", name: "idle", namespace: "default" };
    for (const p of [hostNet, idle]) {
      await cri.addPod(p, ["main"]);
      node.addPodCgroup(p.uid);
    }
    node.addPodProcess(hostNet.uid, 4343, HOST_NETNS, POD_NET_DEV);
    // web's cgroup lists a pid with no /proc entry before its live one.
    writeFileSync(join(node.fsRoot, "sys/fs/cgroup/memory/kubepods", `pod${web.uid}`, "sandbox/cgroup.procs"), "9999\n4242\n");
    pods = [web, hostNet, idle];
    await collector.collect();
    const s = await collector.summary();
    expect(podOf(s.pods, hostNet.uid)?.network).toBeUndefined();
    expect(podOf(s.pods, idle.uid)?.network).toBeUndefined();
    expect(podOf(s.pods, web.uid)?.network?.rxBytes).toBe(1000);
  });

  test("never calls ListPodSandboxStats (it can crash containerd 1.6.20)", async () => {
    await collector.collect();
    expect(cri.fake.callsOf("listPodSandboxStats")).toEqual([]);
  });

  test("the log directory is the runtime's", () => {
    expect(podLogDirectory("/var/log/pods", web)).toBe(runtimePodLogDirectory("/var/log/pods", web));
  });
});

describe("cgroup v2 (hand-written tree)", () => {
  beforeEach(async () => {
    setup("v2");
    await cri.addPod(web, ["app"]);
    node.addPodCgroup(web.uid);
  });

  test("node memory from the root's anon + file; the pod's limit gives availableBytes; default route ens3", async () => {
    await collector.collect();
    const s = await collector.summary();
    const total = parseMeminfo(readFileSync(join(node.fsRoot, "proc/meminfo"), "utf8")).get("MemTotal")!;
    const ws = 1073741824 + 2147483648 - 536870912;
    expect(s.node.memory).toMatchObject({ usageBytes: 1073741824 + 2147483648, workingSetBytes: ws, availableBytes: total - ws, rssBytes: 1073741824 });
    expect(s.node.network?.name).toBe("ens3");
    expect(s.node.network?.interfaces?.map((i) => i.name)).toEqual(["ens3", "cni0"]);
    const p = podOf(s.pods, web.uid)!;
    expect(p.cpu?.usageCoreNanoSeconds).toBe(2.5e9);
    expect(p.memory).toMatchObject({ usageBytes: 52428800, workingSetBytes: 48234496, availableBytes: 134217728 - 48234496, majorPageFaults: 3 });
    expect(p.process_stats).toEqual({ process_count: 7 });
  });
});

describe("cgroup v2 with KubeletPSI: pressure of the node, the pods container, pods and containers", () => {
  let ids: { sandbox: string; containers: string[] };
  beforeEach(async () => {
    setup("v2", { psi: true });
    ids = await cri.addPod(web, ["app"]);
    node.addPodCgroup(web.uid);
    cri.numbers.set(ids.containers[0]!, { cpuNs: 1e9, workingSetBytes: 1 << 20 });
  });

  test("node psi from /proc/pressure (no root files here), rlimit maxpid = min(pid_max, threads-max)", async () => {
    await collector.collect();
    const s = await collector.summary();
    expect(s.node.cpu?.psi).toEqual({ some: { avg10: 1.5, avg60: 0.8, avg300: 0.2, total: 4000000 }, full: { avg10: 0, avg60: 0, avg300: 0, total: 0 } });
    expect(s.node.memory?.psi?.full).toEqual({ avg10: 0.05, avg60: 0.02, avg300: 0, total: 60000 });
    expect(s.node.io).toEqual({
      time: s.node.memory!.time,
      psi: { some: { avg10: 2, avg60: 1, avg300: 0.5, total: 900000 }, full: { avg10: 1, avg60: 0.5, avg300: 0.25, total: 450000 } },
    });
    expect(s.node.rlimit).toMatchObject({ maxpid: 15000, curproc: 96 });
  });

  test("the root cgroup's pressure files win over /proc/pressure", async () => {
    node.writeCgroupFile("/", "memory.pressure", "some avg10=9.00 avg60=9.00 avg300=9.00 total=9\nfull avg10=8.00 avg60=8.00 avg300=8.00 total=8\n");
    await collector.collect();
    const s = await collector.summary();
    expect(s.node.memory?.psi?.some.total).toBe(9);
    expect(s.node.cpu?.psi?.some.total).toBe(4000000);
  });

  test("a pod's psi from its cgroup, a container's from its own cgroup below (found by ID, the systemd scope name too)", async () => {
    node.addContainerCgroup(web, `cri-containerd-${ids.containers[0]}.scope`, {
      "cpu.pressure": "some avg10=50.00 avg60=40.00 avg300=30.00 total=123\nfull avg10=1.00 avg60=1.00 avg300=1.00 total=45\n",
    });
    await collector.collect();
    const p = podOf((await collector.summary()).pods, web.uid)!;
    expect(p.cpu).toMatchObject({
      usageCoreNanoSeconds: 2.5e9,
      psi: { some: { avg10: 12.34, avg60: 5.67, avg300: 1.23, total: 987654 }, full: { avg10: 10, avg60: 4, avg300: 1, total: 876543 } },
    });
    expect(p.memory?.psi?.some).toEqual({ avg10: 3, avg60: 2, avg300: 1, total: 5555 });
    expect(p.io?.psi?.full.total).toBe(66);
    const app = p.containers[0]!;
    expect(app.cpu).toMatchObject({ usageCoreNanoSeconds: 1e9, psi: { some: { avg10: 50, avg60: 40, avg300: 30, total: 123 } } });
    // The container's other pressure files are the fixture pod's copies.
    expect(app.memory?.psi?.some.total).toBe(5555);
    expect(app.io?.psi?.some.total).toBe(77);
  });

  test("a container without a cgroup of its own gets no psi; without the gate nothing has psi", async () => {
    await collector.collect();
    const app = podOf((await collector.summary()).pods, web.uid)!.containers[0]!;
    expect(app.cpu?.psi).toBeUndefined();
    expect(app.io).toBeUndefined();
    await collector[Symbol.asyncDispose]();
    setup("v2");
    await cri.addPod(web, ["app"]);
    node.addPodCgroup(web.uid);
    await collector.collect();
    const s = await collector.summary();
    expect(s.node.cpu?.psi).toBeUndefined();
    expect(s.node.io).toBeUndefined();
    expect(podOf(s.pods, web.uid)!.cpu?.psi).toBeUndefined();
  });
});

describe("failures leave one part out", () => {
  beforeEach(async () => {
    setup("v1");
    const ids = await cri.addPod(web, ["app"]);
    cri.numbers.set(ids.containers[0]!, { cpuNs: 1e9, workingSetBytes: 1 << 20 });
    await cri.addPod(db, ["main"]);
    node.addPodCgroup(web.uid);
    node.addPodCgroup(db.uid);
  });

  test("a network namespace that cannot be read leaves only that pod's network out", async () => {
    node.addPodProcess(web.uid, 4242, "net:[4026532500]", POD_NET_DEV);
    node.addPodProcess(db.uid, 4343, "net:[4026532600]");
    mkdirSync(join(node.fsRoot, "proc/4343/net/dev"), { recursive: true }); // EISDIR when read
    await collector.collect();
    const s = await collector.summary();
    expect(podOf(s.pods, web.uid)?.network?.rxBytes).toBe(1000);
    const dbStats = podOf(s.pods, db.uid)!;
    expect(dbStats.network).toBeUndefined();
    expect(dbStats.cpu?.usageCoreNanoSeconds).toBe(1216755603);
  });

  test("ListContainerStats failing: containers still listed (name, start, logs) without cpu or memory", async () => {
    cri.fake.failNext("listContainerStats", "Unavailable");
    await collector.collect();
    const app = podOf((await collector.summary()).pods, web.uid)!.containers[0]!;
    expect(app.name).toBe("app");
    expect(app.cpu).toBeUndefined();
    expect(app.memory).toBeUndefined();
  });

  test("ImageFsInfo failing: no runtime part, the rest is there", async () => {
    cri.fake.failNext("imageFsInfo", "DeadlineExceeded");
    await collector.collect();
    const s = await collector.summary();
    expect(s.node.runtime).toBeUndefined();
    expect(s.node.memory).toBeDefined();
    expect(s.pods).toHaveLength(2);
  });

  test("a failing part warns once, then logs at -v=4 only, and says when it recovers", async () => {
    cri.fake.failNext("listContainers", "Unavailable");
    cri.fake.failNext("listContainers", "Unavailable");
    await collector.collect();
    clock.advance(10_000);
    await collector.collect();
    clock.advance(10_000);
    await collector.collect();
    const about = logs.lines.filter((l) => l.includes("part=ListContainers"));
    expect(about.map((l) => l[0])).toEqual(["W", "I"]);
    expect(about[1]).toContain("recovered");
  });

  test("node: no root memory cgroup falls back to /proc/meminfo; a nodefs that cannot be statfs'd is left out with a warning", async () => {
    rmSync(join(node.fsRoot, "sys/fs/cgroup/memory/memory.usage_in_bytes"));
    rmSync(node.rootDir, { recursive: true });
    await collector.collect();
    const s = await collector.summary();
    const m = parseMeminfo(readFileSync(join(node.fsRoot, "proc/meminfo"), "utf8"));
    const total = m.get("MemTotal")!;
    expect(s.node.memory).toMatchObject({ usageBytes: total - m.get("MemFree")!, workingSetBytes: total - m.get("MemAvailable")!, availableBytes: m.get("MemAvailable")! });
    expect(s.node.fs).toBeUndefined();
    expect(s.node.cpu).toBeDefined();
    expect(logs.lines.filter((l) => l.startsWith("W")).join("\n")).toContain('part="node fs"');
  });

  test("every CRI call failing still gives a node summary and no pods", async () => {
    for (const m of ["listPodSandbox", "listContainers", "listContainerStats", "imageFsInfo"] as const) cri.fake.failNext(m, "Unavailable");
    await collector.collect();
    const s = await collector.summary();
    expect(s.pods).toEqual([]);
    expect(s.node.cpu?.usageCoreNanoSeconds).toBeGreaterThan(0);
  });
});

describe("caching and the timer", () => {
  beforeEach(async () => {
    setup("v1");
    await cri.addPod(web, ["app"]);
  });

  const passes = () => cri.fake.callsOf("listPodSandbox").length;

  test("summary() reuses a pass younger than 10 s, concurrent callers share one pass", async () => {
    const [a, b] = await Promise.all([collector.summary(), collector.summary()]);
    expect(a).toBe(b);
    expect(passes()).toBe(1);
    clock.advance(9_999);
    await collector.summary();
    expect(passes()).toBe(1);
    clock.advance(1);
    await collector.summary();
    expect(passes()).toBe(2);
  });

  test("start(period): a pass now and one per period; dispose stops the timer", async () => {
    collector.start(5_000);
    collector.start(1_000); // ignored
    await collector.collect(); // joins the first pass
    expect(passes()).toBe(1);
    await Bun.sleep(0);
    clock.advance(5_000);
    await collector.collect();
    expect(passes()).toBe(2);
    await collector[Symbol.asyncDispose]();
    expect(clock.pendingTimers()).toBe(0);
    clock.advance(60_000);
    expect(passes()).toBe(2);
  });
});

describe("volumes measured by their CSI driver", () => {
  test("each becomes a volume entry with the driver's figures and its pvcRef, asked once per volumeStatsAggPeriod", async () => {
    const asked: string[] = [];
    let used = 4096;
    setup("v1", {
      volumeStatsAggPeriodMs: 60_000,
      volumes: {
        claimVolumes: () => [],
        driverVolumeStats: async (uid) => {
          asked.push(uid);
          return uid === web.uid
            ? [
                {
                  name: "data",
                  pvcRef: { name: "claim", namespace: "default" },
                  capacityBytes: 1 << 30,
                  availableBytes: (1 << 30) - used,
                  usedBytes: used,
                  inodes: 100,
                  inodesFree: 90,
                  inodesUsed: 10,
                },
              ]
            : [];
        },
      },
    });
    await cri.addPod(web, ["app"]);
    await collector.collect(); // asks the driver; the answer is there for the next pass
    expect(podOf((await collector.summary()).pods, web.uid)!.volume ?? []).toEqual([]);
    clock.advance(1);
    await collector.collect();
    const data = podOf((await collector.summary()).pods, web.uid)!.volume!.find((v) => v.name === "data");
    expect(data).toEqual({
      time: new Date(clock.now()).toISOString(),
      name: "data",
      pvcRef: { name: "claim", namespace: "default" },
      capacityBytes: 1 << 30,
      availableBytes: (1 << 30) - 4096,
      usedBytes: 4096,
      inodes: 100,
      inodesFree: 90,
      inodesUsed: 10,
    });
    used = 8192;
    clock.advance(30_000);
    await collector.collect();
    expect(podOf((await collector.summary()).pods, web.uid)!.volume!.find((v) => v.name === "data")?.usedBytes).toBe(4096);
    clock.advance(30_000);
    await collector.collect(); // a period after the ask: asked again
    clock.advance(1);
    await collector.collect();
    expect(podOf((await collector.summary()).pods, web.uid)!.volume!.find((v) => v.name === "data")?.usedBytes).toBe(8192);
    expect(asked.filter((u) => u === web.uid)).toHaveLength(2);
  });
});
