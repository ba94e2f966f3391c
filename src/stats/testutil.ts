/**
 * Test helpers for the collector: a fake fsRoot made from testdata/ with
 * pod cgroups added, and a CRI for stats built on FakeCri's real state
 * (sandboxes, containers, failures) with numbers the test sets.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeCri } from "../cri/fake.ts";
import { ContainerStats } from "../cri/index.ts";
import type { Clock } from "../util/clock.ts";
import type { StatsCri } from "./collector.ts";
import type { PodRef } from "../pods/identity.ts";

export const BUSYBOX = "docker.io/library/busybox:1.36";
/** What /proc/self/ns/net points to in a FakeNode: the agent runs in the host's network namespace. */
export const HOST_NETNS = "net:[4026531840]";

/** /proc/<pid>/net/dev inside a pod: lo and eth0. */
export const POD_NET_DEV = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     640       8    0    0    0     0          0         0      640       8    0    0    0     0       0          0
  eth0:    1000      12    1    0    0     0          0         0     2000      15    0    0    0     0       0          0
`;
const V1_CONTROLLERS = ["cpu", "cpuacct", "memory", "blkio", "pids"];

/** A writable copy of testdata/<version> (an fsRoot) plus a kubelet root dir, pod logs dir and a layer dir. */
export class FakeNode {
  readonly dir: string;
  readonly fsRoot: string;
  readonly rootDir: string;
  readonly podLogsDir: string;
  readonly layerDir: string;

  constructor(readonly version: "v1" | "v2") {
    this.dir = mkdtempSync(join(tmpdir(), `stats-${version}-`));
    this.fsRoot = join(this.dir, "root");
    cpSync(join(import.meta.dir, "testdata", version), this.fsRoot, { recursive: true });
    this.rootDir = join(this.dir, "kubelet");
    this.podLogsDir = join(this.dir, "pods-logs");
    this.layerDir = join(this.dir, "snapshots");
    for (const d of [this.rootDir, this.podLogsDir, this.layerDir]) mkdirSync(d, { recursive: true });
    this.setNetns("self", HOST_NETNS);
  }

  /**
   * A process `pid` in a child cgroup of the pod's (its sandbox), in
   * network namespace `netns` (HOST_NETNS: the host's), whose
   * /proc/<pid>/net/dev is `netDev`.
   */
  addPodProcess(uid: string, pid: number, netns: string, netDev?: string): void {
    for (const base of this.hierarchies()) {
      const pod = join(base, this.podCgroup({ uid }));
      mkdirSync(join(pod, "sandbox"), { recursive: true });
      writeFileSync(join(pod, "cgroup.procs"), ""); // a pod's processes are in its containers' cgroups
      writeFileSync(join(pod, "sandbox", "cgroup.procs"), `${pid}\n`);
    }
    this.setNetns(String(pid), netns);
    if (netDev !== undefined) {
      mkdirSync(join(this.fsRoot, "proc", String(pid), "net"), { recursive: true });
      writeFileSync(join(this.fsRoot, "proc", String(pid), "net/dev"), netDev);
    }
  }

  private setNetns(pid: string, netns: string): void {
    mkdirSync(join(this.fsRoot, "proc", pid, "ns"), { recursive: true });
    rmSync(join(this.fsRoot, "proc", pid, "ns/net"), { force: true });
    symlinkSync(netns, join(this.fsRoot, "proc", pid, "ns/net"));
  }

  podCgroup = (pod: { uid: string }): string => `/kubepods/pod${pod.uid}`;

  /** A pod cgroup copied from the fixture pod `kubepods/podtest`. */
  addPodCgroup(uid: string): void {
    const rel = this.podCgroup({ uid });
    for (const base of this.hierarchies()) {
      const from = join(base, "kubepods/podtest");
      const to = join(base, rel);
      mkdirSync(to, { recursive: true });
      for (const f of readdirSync(from, { withFileTypes: true })) if (f.isFile()) cpSync(join(from, f.name), join(to, f.name));
    }
  }

  /**
   * A container's cgroup `<pod cgroup>/<id>` (containerd's cgroupfs layout),
   * copied from the fixture pod, then `files` written over it: names are
   * the kernel's (`cpu.cfs_quota_us`, `memory.stat`, `io.stat`, ...); on v1
   * each goes to its controller's hierarchy (cgroup.procs to all).
   */
  addContainerCgroup(pod: { uid: string }, id: string, files: Record<string, string> = {}): string {
    const rel = join(this.podCgroup(pod), id);
    for (const base of this.hierarchies()) {
      const from = join(base, "kubepods/podtest");
      mkdirSync(join(base, rel), { recursive: true });
      for (const f of readdirSync(from, { withFileTypes: true })) if (f.isFile()) cpSync(join(from, f.name), join(base, rel, f.name));
    }
    for (const [name, text] of Object.entries(files)) this.writeCgroupFile(rel, name, text);
    return rel;
  }

  /** Writes one cgroup file (relative cgroup path; v1: into the controller the file's prefix names). */
  writeCgroupFile(rel: string, name: string, text: string): void {
    if (this.version === "v2") {
      writeFileSync(join(this.cgroupBase(), rel, name), text);
      return;
    }
    const controller = name.split(".")[0]!;
    const targets = controller === "cgroup" ? V1_CONTROLLERS : [controller];
    for (const c of targets) {
      mkdirSync(join(this.cgroupBase(), c, rel), { recursive: true });
      writeFileSync(join(this.cgroupBase(), c, rel, name), text);
    }
  }

  /** /sys/dev/block/<major:minor>/uevent naming the device. */
  addBlockDevice(majorMinor: string, devname: string): void {
    mkdirSync(join(this.fsRoot, "sys/dev/block", majorMinor), { recursive: true });
    writeFileSync(join(this.fsRoot, "sys/dev/block", majorMinor, "uevent"), `MAJOR=${majorMinor.split(":")[0]}\nDEVNAME=${devname}\nDEVTYPE=disk\n`);
  }

  /**
   * /proc/<pid>/fd with one link per target (`socket:[1]`, `/dev/null`,
   * ...) and /proc/<pid>/limits with this soft "Max open files".
   */
  addProcessFiles(pid: number, fdTargets: string[], maxOpenFilesSoft: number | "unlimited"): void {
    const dir = join(this.fsRoot, "proc", String(pid));
    mkdirSync(join(dir, "fd"), { recursive: true });
    fdTargets.forEach((target, fd) => symlinkSync(target, join(dir, "fd", String(fd))));
    writeFileSync(
      join(dir, "limits"),
      [
        "Limit                     Soft Limit           Hard Limit           Units     ",
        "Max processes             96365                96365                processes ",
        `Max open files            ${maxOpenFilesSoft}                1048576              files     `,
        "",
      ].join("\n"),
    );
  }

  /** The root filesystem as a mount of `/dev/<name>` (major:minor) with these /proc/diskstats counters. */
  setRootDisk(name: string, majorMinor: string, counters: number[]): void {
    writeFileSync(join(this.fsRoot, "proc/self/mountinfo"), `27 1 ${majorMinor} / / rw,relatime - ext4 /dev/${name} rw\n`);
    const [major, minor] = majorMinor.split(":");
    writeFileSync(join(this.fsRoot, "proc/diskstats"), `   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n ${major} ${minor} ${name} ${counters.join(" ")}\n`);
  }

  removePodCgroup(uid: string): void {
    for (const base of this.hierarchies()) rmSync(join(base, this.podCgroup({ uid })), { recursive: true, force: true });
  }

  /** Sets a cgroup's cumulative CPU usage (relative path, "/" for the root). */
  setCgroupCpu(rel: string, ns: number): void {
    if (this.version === "v1") writeFileSync(join(this.cgroupBase(), "cpuacct", rel, "cpuacct.usage"), `${ns}\n`);
    else {
      const file = join(this.cgroupBase(), rel, "cpu.stat");
      writeFileSync(file, readFileSync(file, "utf8").replace(/^usage_usec \d+/m, `usage_usec ${Math.round(ns / 1000)}`));
    }
  }

  /** Adds user jiffies to /proc/stat's aggregate cpu line. */
  addNodeUserJiffies(n: number): void {
    const file = join(this.fsRoot, "proc/stat");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace(/^cpu {2}(\d+)/m, (_m, user: string) => `cpu  ${Number(user) + n}`),
    );
  }

  writeLog(pod: PodRef, container: string, name: string, bytes: number): void {
    const d = join(this.podLogsDir, `${pod.namespace}_${pod.name}_${pod.uid}`, container);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, name), "l".repeat(bytes));
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private cgroupBase(): string {
    return join(this.fsRoot, "sys/fs/cgroup");
  }

  private hierarchies(): string[] {
    return this.version === "v1" ? V1_CONTROLLERS.map((c) => join(this.cgroupBase(), c)) : [this.cgroupBase()];
  }
}

export interface ContainerNumbers {
  cpuNs?: number;
  workingSetBytes?: number;
  layerBytes?: number;
}

/**
 * StatsCri over a FakeCri: lists come from the fake's state (so its
 * `failNext` applies), stats carry the numbers set here.
 */
export class StatsFakeCri implements StatsCri {
  readonly fake: FakeCri;
  readonly numbers = new Map<string, ContainerNumbers>();
  imageMount: string;

  constructor(clock: Clock, imageMount: string) {
    this.fake = new FakeCri({ clock, images: [BUSYBOX, "registry.k8s.io/pause:3.9"] });
    this.imageMount = imageMount;
  }

  /** A READY sandbox with running containers; returns the sandbox and container ids. */
  async addPod(pod: PodRef, containers: string[]): Promise<{ sandbox: string; containers: string[] }> {
    const config = {
      metadata: { name: pod.name, namespace: pod.namespace, uid: pod.uid, attempt: 0 },
      labels: { "io.kubernetes.pod.uid": pod.uid, "io.kubernetes.pod.name": pod.name, "io.kubernetes.pod.namespace": pod.namespace },
    };
    const sandbox = await this.fake.runPodSandbox(config);
    const ids: string[] = [];
    for (const name of containers) {
      const id = await this.fake.createContainer(sandbox, { metadata: { name }, image: { image: BUSYBOX }, labels: { "io.kubernetes.container.name": name } }, config);
      await this.fake.startContainer(id);
      ids.push(id);
    }
    return { sandbox, containers: ids };
  }

  listPodSandbox: StatsCri["listPodSandbox"] = (f) => this.fake.listPodSandbox(f);
  listContainers: StatsCri["listContainers"] = (f) => this.fake.listContainers(f);

  listContainerStats: StatsCri["listContainerStats"] = async (f) => (await this.fake.listContainerStats(f)).map((s) => this.withNumbers(s));

  imageFsInfo: StatsCri["imageFsInfo"] = async () => {
    const r = await this.fake.imageFsInfo();
    return { ...r, imageFilesystems: r.imageFilesystems.map((fs) => ({ ...fs, fsId: { mountpoint: this.imageMount } })) };
  };

  private withNumbers(s: ContainerStats): ContainerStats {
    const n = this.numbers.get(s.attributes?.id ?? "") ?? {};
    return ContainerStats.create({
      ...s,
      cpu: { timestamp: 0n, usageCoreNanoSeconds: { value: BigInt(n.cpuNs ?? 0) } },
      memory: { timestamp: 0n, workingSetBytes: { value: BigInt(n.workingSetBytes ?? 0) }, usageBytes: { value: BigInt(n.workingSetBytes ?? 0) }, availableBytes: { value: 0n } },
      writableLayer: { timestamp: 0n, fsId: { mountpoint: this.imageMount }, usedBytes: { value: BigInt(n.layerBytes ?? 0) }, inodesUsed: { value: 1n } },
    });
  }
}
