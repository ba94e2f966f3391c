// The cgroup writer on this host's real cgroup v1 (hybrid) hierarchies with
// a real containerd + runc: pod cgroups made by createPodCgroups are the
// cgroup_parent of real sandboxes, containers get containerLinuxResources,
// and the kernel shows the limits working: a memory hog is OOM-killed (CRI
// reason OOMKilled), a busy loop under a 100m limit is throttled.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { totalmem } from "node:os";
import { join } from "node:path";
import { containerLinuxResources, createPodCgroups, detectCgroupLayout, isCgroupError, nodeCgroupFs, type PodCgroups } from "../../src/cgroups/index.ts";
import { createCriClient } from "../../src/cri/client.ts";
import { ContainerState, NamespaceMode, type CriService, type In, type PodSandboxConfig } from "../../src/cri/index.ts";
import type { Pod } from "../../src/pods/schema.ts";
import { memoryLogger } from "../../src/util/log.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

const MI = 2 ** 20;
const MEMORY_CAPACITY = totalmem();
const CFS = { cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, oomGroup: false, hugePageSizes: [] };

let ctd: ContainerdHandle;
let cri: CriService;
let cg: PodCgroups;
const sandboxes: string[] = [];

/** v1 hierarchy mount points on this host, by controller. */
const mounts = new Map<string, string>();
const cgDir = (controller: string, path: string) => join(mounts.get(controller)!, path);
const readCg = (controller: string, path: string, file: string) => readFileSync(join(cgDir(controller, path), file), "utf8").trim();

beforeAll(async () => {
  requireRoot();
  const layout = detectCgroupLayout("/", nodeCgroupFs);
  if (layout.version !== "v1") throw new Error("this test is for the cgroup v1 host the notes describe; cgroup v2 is tested in qemu (cgroup-v2-vm.test.ts)");
  for (const h of layout.hierarchies) for (const c of h.controllers) mounts.set(c, h.mountPoint);
  if (layout.unified) mounts.set("unified", layout.unified.mountPoint);

  ctd = await startContainerd({ name: "cgroups" });
  cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 20_000, logger: memoryLogger().logger });
  cg = createPodCgroups({
    cgroupRoot: ctd.cgroupParent,
    podPidsLimit: 256,
    cpuCFSQuota: true,
    cpuCFSQuotaPeriodMs: 100,
    logger: memoryLogger().logger,
  });
  await cg.setupNode({ allocatable: { cpuMilli: 1500, memoryBytes: 1024 * MI, pids: 4096 }, enforce: true });
});

afterAll(async () => {
  for (const id of sandboxes) await cri?.removePodSandbox(id).catch(() => {});
  cri?.close();
  await ctd?.stop();
});

const mkPod = (uid: string, resources: { requests?: Record<string, string>; limits?: Record<string, string> }, command: string[]): Pod => ({
  metadata: { name: `cg-${uid}`, namespace: "cgroups-it", uid },
  spec: { containers: [{ name: "main", image: "busybox", command, resources }] },
});

/** ensurePod, then a host-network sandbox in that cgroup and the pod's one container, started. */
async function runPod(pod: Pod): Promise<{ parent: string; sandboxId: string; containerId: string }> {
  const parent = await cg.ensurePod(pod);
  const name = pod.metadata.name!;
  const config: In<PodSandboxConfig> = {
    metadata: { name, namespace: "cgroups-it", uid: pod.metadata.uid!, attempt: 0 },
    logDirectory: join(ctd.dir, "pod-logs", name),
    linux: { cgroupParent: parent, securityContext: { namespaceOptions: { network: NamespaceMode.NODE } } },
  };
  mkdirSync(join(ctd.dir, "pod-logs", name), { recursive: true });
  const sandboxId = await cri.runPodSandbox(config);
  sandboxes.push(sandboxId);
  const c = pod.spec.containers[0]!;
  const r = containerLinuxResources(pod, c, { memoryCapacityBytes: MEMORY_CAPACITY, ...CFS });
  const containerId = await cri.createContainer(
    sandboxId,
    {
      metadata: { name: c.name },
      image: { image: ctd.busyboxImage },
      command: c.command!,
      logPath: `${c.name}.log`,
      linux: {
        resources: {
          cpuShares: BigInt(r.cpuShares),
          cpuQuota: BigInt(r.cpuQuota),
          cpuPeriod: BigInt(r.cpuPeriod),
          memoryLimitInBytes: BigInt(r.memoryLimitInBytes),
          oomScoreAdj: BigInt(r.oomScoreAdj),
        },
      },
    },
    config,
  );
  await cri.startContainer(containerId);
  return { parent, sandboxId, containerId };
}

async function untilExited(id: string, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const st = (await cri.containerStatus(id)).status!;
    if (st.state === ContainerState.CONTAINER_EXITED) return st;
    await Bun.sleep(50);
  }
  throw new Error(`container ${id} did not exit within ${timeoutMs} ms`);
}

/** The container's main process, from its own cgroup. */
function containerPid(parent: string, containerId: string): number {
  const pid = Number(readCg("memory", join(parent, containerId), "cgroup.procs").split("\n")[0]);
  if (!pid) throw new Error(`no process in ${parent}/${containerId}`);
  return pid;
}

describe("cgroup v1 writer with containerd and runc", () => {
  const hog = mkPod("hog-0001", { requests: { cpu: "50m", memory: "8Mi" }, limits: { cpu: "500m", memory: "16Mi" } }, ["sh", "-c", "a=x; while true; do a=$a$a; done"]);
  const spin = mkPod("spin-0001", { requests: { cpu: "50m", memory: "8Mi" }, limits: { cpu: "100m" } }, ["sh", "-c", "while :; do :; done"]);
  let spinRun: { parent: string; sandboxId: string; containerId: string };

  test("node level: kubepods carries node allocatable, QoS cgroups exist", () => {
    const kubepods = join(ctd.cgroupParent, "kubepods");
    expect(readCg("memory", kubepods, "memory.limit_in_bytes")).toBe(String(1024 * MI));
    expect(readCg("cpu", kubepods, "cpu.shares")).toBe("1536");
    expect(readCg("pids", kubepods, "pids.max")).toBe("4096");
    expect(readCg("cpu", join(kubepods, "besteffort"), "cpu.shares")).toBe("2");
    expect(existsSync(cgDir("memory", join(kubepods, "burstable")))).toBe(true);
  });

  test("a busy loop under a 100m CPU limit: pod and container quota in effect, throttled, ~10% of a CPU", async () => {
    spinRun = await runPod(spin);
    const { parent, containerId } = spinRun;
    expect(parent).toBe(`${ctd.cgroupParent}/kubepods/burstable/podspin-0001`);
    expect([readCg("cpu", parent, "cpu.cfs_quota_us"), readCg("cpu", parent, "cpu.cfs_period_us"), readCg("cpu", parent, "cpu.shares")]).toEqual(["10000", "100000", "51"]);
    expect(readCg("pids", parent, "pids.max")).toBe("256");
    const own = join(parent, containerId);
    expect(readCg("cpu", own, "cpu.cfs_quota_us")).toBe("10000");

    const usage0 = Number(readCg("cpuacct", own, "cpuacct.usage"));
    await Bun.sleep(1500);
    const usedSeconds = (Number(readCg("cpuacct", own, "cpuacct.usage")) - usage0) / 1e9;
    const stat = Object.fromEntries(
      readCg("cpu", own, "cpu.stat")
        .split("\n")
        .map((l) => l.split(" ") as [string, string]),
    );
    expect(Number(stat.nr_throttled)).toBeGreaterThan(0);
    // Unthrottled this loop would use 1.5 s of CPU; 100m allows 0.15 s.
    expect(usedSeconds).toBeGreaterThan(0.05);
    expect(usedSeconds).toBeLessThan(0.3);
  });

  test("runc puts the container below the pod cgroup in every hierarchy; oom_score_adj is the Burstable one", () => {
    const { parent, containerId } = spinRun;
    const pid = containerPid(parent, containerId);
    const lines = readFileSync(`/proc/${pid}/cgroup`, "utf8").trim().split("\n");
    for (const line of lines) expect([line, line.endsWith(`${parent}/${containerId}`)]).toEqual([line, true]);
    expect(lines.length).toBeGreaterThanOrEqual(9);
    // cpuset was usable: the pod level holds the parent's CPUs, and so does the container.
    const rootCpus = readFileSync(join(mounts.get("cpuset")!, "cpuset.cpus"), "utf8").trim();
    expect(readCg("cpuset", parent, "cpuset.cpus")).toBe(rootCpus);
    const expected = containerLinuxResources(spin, spin.spec.containers[0]!, { memoryCapacityBytes: MEMORY_CAPACITY, ...CFS }).oomScoreAdj;
    expect(Number(readFileSync(`/proc/${pid}/oom_score_adj`, "utf8"))).toBe(expected);
  });

  test("updateQos: burstable shares are the Burstable pods' requests", async () => {
    await cg.updateQos([hog, spin]);
    expect(readCg("cpu", join(ctd.cgroupParent, "kubepods/burstable"), "cpu.shares")).toBe("102");
  });

  test("a memory hog with a 16Mi limit is OOM-killed and the CRI says OOMKilled", async () => {
    const { parent, containerId } = await runPod(hog);
    expect(readCg("memory", parent, "memory.limit_in_bytes")).toBe(String(16 * MI));
    const st = await untilExited(containerId);
    expect({ reason: st.reason, exitCode: st.exitCode }).toEqual({ reason: "OOMKilled", exitCode: 137 });
  });

  test("removePod: refused (Busy) while processes run, never kills them; removes every hierarchy's directories once they are gone", async () => {
    const { parent, sandboxId, containerId } = spinRun;
    const err = await cg.removePod("spin-0001").catch((e: unknown) => e);
    expect(isCgroupError(err, "Busy")).toBe(true);
    expect((await cri.containerStatus(containerId)).status?.state).toBe(ContainerState.CONTAINER_RUNNING);

    await cri.stopPodSandbox(sandboxId);
    await cri.removePodSandbox(sandboxId);
    expect((await cg.listPodUids()).sort()).toEqual(["hog-0001", "spin-0001"]);
    await cg.removePod("spin-0001");
    await cg.removePod("spin-0001");
    for (const c of ["cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "name=systemd", "unified"]) {
      if (mounts.has(c)) expect([c, existsSync(cgDir(c, parent))]).toEqual([c, false]);
    }
    expect(await cg.listPodUids()).toEqual(["hog-0001"]);
  });
});
