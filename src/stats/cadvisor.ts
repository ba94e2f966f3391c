/**
 * What `/metrics/cadvisor` reports: one entry per cgroup the upstream
 * kubelet's embedded cAdvisor would list for this node's pods, read when
 * scraped (no polling of its own) from the pass the Summary API uses (which
 * pods, their sandboxes and running containers, their start times, their
 * writable layers) plus a detailed read of each cgroup:
 * - the root `/` (machine): cgroup stats, the host's interfaces, nodefs
 *   and imagefs with their disks' /proc/diskstats counters;
 * - the pods parent cgroup and every cgroup between it and a pod's (the QoS
 *   classes);
 * - each pod's cgroup (`container=""`, pod and namespace set, as upstream's
 *   containerPrometheusLabelsFunc associates a pod cgroup with its pod);
 * - each pod's sandbox (pause) container, `<pod cgroup>/<sandbox id>`
 *   (containerd's cgroupfs layout), with the pod's network counters, as
 *   cAdvisor reports a pod's network on the container that owns the
 *   namespace;
 * - each running container, `<pod cgroup>/<container id>`, with its
 *   writable layer's usage from the CRI. A container whose cgroup cannot be
 *   read (no pod cgroup: cgroupsPerQOS off) keeps the CRI's CPU and memory
 *   numbers from the Summary.
 * Every cgroup also gets what cAdvisor's process metrics read from procfs:
 * the open descriptors and sockets of the processes in its cgroup.procs
 * (one readlink per descriptor, the largest part of a scrape's cost), and,
 * for the machine, sandboxes and containers, the soft open-files limit of
 * their root process.
 */
import { readdirSync, readlinkSync } from "node:fs";
import { join, posix } from "node:path";
import type { CgroupReader } from "./cgroup-reader.ts";
import { readIfExists } from "./cgroup-reader.ts";
import type { CgroupStats } from "./cgroupfs.ts";
import { netnsOf } from "./pod-network.ts";
import type { PodRef } from "../pods/identity.ts";
import type { PodIndex } from "./pods.ts";
import { isIgnoredInterface, parseDiskstats, parseMaxOpenFilesSoft, parseNetDev, type DiskStats, type InterfaceCounters } from "./procfs.ts";
import type { FsStats, Summary } from "./types.ts";
import type { PodCgroupPaths } from "../cgroups/active.ts";

export interface CadvisorFs {
  /** The filesystem's device as /proc/self/mountinfo names its source (e.g. /dev/sda1). */
  device: string;
  usageBytes: number;
  limitBytes: number;
  inodes?: number;
  inodesFree?: number;
  /** The machine's filesystems only: the /proc/diskstats line of the mount's device, when it has one. */
  disk?: DiskStats;
}

export interface CadvisorDeviceIo {
  device: string;
  readBytes: number;
  writeBytes: number;
}

export interface CadvisorContainer {
  /** The cgroup path (label `id`): "/" for the machine. */
  id: string;
  /** The runtime's id of a container or sandbox (label `name`); "" for other cgroups. */
  name: string;
  image: string;
  pod: string;
  namespace: string;
  /** The container's name in its pod; "" for sandboxes and other cgroups. */
  container: string;
  startTimeSeconds: number;
  cgroup: CgroupStats;
  /** Per block device, with its name resolved. */
  io: CadvisorDeviceIo[];
  interfaces: InterfaceCounters[];
  fs: CadvisorFs[];
  /** Open file descriptors and sockets of the processes in cgroup.procs (not below), as cAdvisor's processStatsFromProcs. */
  openFiles?: { fds: number; sockets: number };
  /**
   * Soft "Max open files" of the cgroup's root process (cAdvisor's
   * container_ulimits_soft): pid 1 for the machine, a container's or
   * sandbox's first process; none for raw cgroups (pods, QoS classes).
   */
  maxOpenFilesSoft?: number;
}

export interface CadvisorView {
  containers: CadvisorContainer[];
  /**
   * KubeletPSI: the pressure families are reported, for every cgroup (from
   * its *.pressure files, read here on cgroup v2; cAdvisor's zero PSI stats
   * where there are none, as on v1).
   */
  psi: boolean;
}

export interface CadvisorReadContext {
  fsRoot: string;
  cgroups: CgroupReader;
  /** The pods parent cgroup. */
  podsCgroup: string;
  podCgroups: PodCgroupPaths | undefined;
  /** The kubelet root directory (nodefs). */
  rootDir: string;
  /** The image filesystem's mount point, when the runtime named one. */
  imageFsMount: string | undefined;
  /** The pod image of sandboxes (the runtime's sandbox image), for their `image` label. */
  sandboxImage: string;
  /** KubeletPSI (cAdvisor's PressureMetrics): read and report the pressure files. */
  psi: boolean;
}

const seconds = (iso: string | undefined) => (iso ? Date.parse(iso) / 1000 : 0);
const nsToSeconds = (ns: bigint) => Number(ns / 1_000_000n) / 1000;

interface Mount {
  mountPoint: string;
  source: string;
  /** `major:minor` of the mounted device (0:N for filesystems without a block device). */
  device: string;
}

/** Mount points, sources and device numbers of /proc/self/mountinfo, longest mount point first. */
function readMounts(fsRoot: string): Mount[] {
  const text = readIfExists(join(fsRoot, "proc/self/mountinfo")) ?? "";
  const out: Mount[] = [];
  for (const line of text.split("\n")) {
    const dash = line.indexOf(" - ");
    if (dash < 0) continue;
    const head = line.slice(0, dash).split(" ");
    const mountPoint = head[4];
    const source = line.slice(dash + 3).split(" ")[1];
    if (mountPoint && source) out.push({ mountPoint: mountPoint.replace(/\\040/g, " "), source, device: head[2] ?? "" });
  }
  return out.sort((a, b) => b.mountPoint.length - a.mountPoint.length);
}

function mountOfPath(mounts: Mount[], path: string): Mount | undefined {
  const p = posix.normalize(path);
  return mounts.find((m) => m.mountPoint === "/" || p === m.mountPoint || p.startsWith(`${m.mountPoint}/`));
}

/** The source of the mount holding `path` (what cAdvisor's fs info calls the device). */
export function deviceOfPath(mounts: { mountPoint: string; source: string }[], path: string): string {
  const p = posix.normalize(path);
  for (const m of mounts) if (m.mountPoint === "/" || p === m.mountPoint || p.startsWith(`${m.mountPoint}/`)) return m.source;
  return path;
}

/**
 * Open descriptors of `pids` and how many are sockets (a link to
 * `socket:[inode]`), as cAdvisor's processStatsFromProcs counts them: a
 * process that ended meanwhile, or whose fd directory cannot be read, counts
 * nothing.
 */
function openFilesOf(fsRoot: string, pids: number[]): { fds: number; sockets: number } {
  let fds = 0;
  let sockets = 0;
  const proc = join(fsRoot, "proc");
  for (const pid of pids) {
    // One readdir per process and one readlink per descriptor (what cAdvisor does too); the paths
    // are appended, not path.join'ed: a scrape reads some thousands of them.
    const dir = `${proc}/${pid}/fd`;
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    fds += names.length;
    for (const name of names) {
      try {
        if (readlinkSync(`${dir}/${name}`).startsWith("socket")) sockets++;
      } catch {
        // closed between the listing and the read
      }
    }
  }
  return { fds, sockets };
}

function maxOpenFilesOf(fsRoot: string, pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  const text = readIfExists(join(fsRoot, "proc", String(pid), "limits"));
  return text === undefined ? undefined : parseMaxOpenFilesSoft(text);
}

/** `/dev/<DEVNAME>` of a block device number (sysfs uevent), else `major:minor`. */
function blockDeviceName(fsRoot: string, major: number, minor: number, cache: Map<string, string>): string {
  const key = `${major}:${minor}`;
  let name = cache.get(key);
  if (name === undefined) {
    const uevent = readIfExists(join(fsRoot, "sys/dev/block", key, "uevent"));
    const devname = uevent ? /^DEVNAME=(.+)$/m.exec(uevent)?.[1] : undefined;
    name = devname ? `/dev/${devname}` : key;
    cache.set(key, name);
  }
  return name;
}

function fsOf(device: string, s: FsStats | undefined, usedBytes?: number): CadvisorFs | undefined {
  if (!s) return undefined;
  const usage = usedBytes ?? s.usedBytes ?? (s.capacityBytes !== undefined && s.availableBytes !== undefined ? s.capacityBytes - s.availableBytes : undefined);
  if (usage === undefined || s.capacityBytes === undefined) return undefined;
  return {
    device,
    usageBytes: usage,
    limitBytes: s.capacityBytes,
    ...(s.inodes !== undefined ? { inodes: s.inodes } : {}),
    ...(s.inodesFree !== undefined ? { inodesFree: s.inodesFree } : {}),
  };
}

/** Interfaces of `pid`'s network namespace (the host's when pid is "self"), without the ones cAdvisor ignores. */
function interfacesOf(fsRoot: string, pid: number | "self"): InterfaceCounters[] {
  // /proc/net/dev is this process's namespace, as node.ts reads it.
  const text = readIfExists(pid === "self" ? join(fsRoot, "proc/net/dev") : join(fsRoot, "proc", String(pid), "net/dev"));
  return text === undefined ? [] : parseNetDev(text).filter((i) => !isIgnoredInterface(i.name));
}

/** The counters of a pod's own network namespace; [] for a pod on the host's network or without a process. */
function podInterfaces(ctx: CadvisorReadContext, cgroupPath: string, hostNetns: string | undefined): InterfaceCounters[] {
  for (const pid of ctx.cgroups.processes(cgroupPath)) {
    const netns = netnsOf(ctx.fsRoot, pid);
    if (netns === undefined) continue;
    if (netns === hostNetns) return [];
    return interfacesOf(ctx.fsRoot, pid);
  }
  return [];
}

/** Every cgroup strictly between `parent` and `child` (QoS classes), outermost first. */
function between(parent: string, child: string): string[] {
  const out: string[] = [];
  const prefix = parent === "/" ? "/" : `${parent}/`;
  if (!child.startsWith(prefix)) return out;
  const parts = child.slice(prefix.length).split("/");
  for (let i = 1; i < parts.length; i++) out.push(posix.join(parent, ...parts.slice(0, i)));
  return out;
}

/**
 * `summary`: the last pass (the node's filesystems, the containers' writable
 * layers); `index` and `pods`: listed now, so that a container started since
 * that pass is reported at once.
 */
export function buildCadvisorView(ctx: CadvisorReadContext, summary: Summary, index: PodIndex, pods: PodRef[]): CadvisorView {
  const detail = { detail: true, psi: ctx.psi } as const;
  const devices = new Map<string, string>();
  const mounts = readMounts(ctx.fsRoot);
  const hostNetns = netnsOf(ctx.fsRoot, "self");
  const out: CadvisorContainer[] = [];
  const ioOf = (cg: CgroupStats) =>
    (cg.ioByDevice ?? []).map((d) => ({ device: blockDeviceName(ctx.fsRoot, d.major, d.minor, devices), readBytes: d.readBytes, writeBytes: d.writeBytes }));
  const processes = (cg: CgroupStats, rootPid: number | undefined) => {
    const maxOpenFilesSoft = maxOpenFilesOf(ctx.fsRoot, rootPid);
    return {
      ...(cg.processIds ? { openFiles: openFilesOf(ctx.fsRoot, cg.processIds) } : {}),
      ...(maxOpenFilesSoft !== undefined ? { maxOpenFilesSoft } : {}),
    };
  };
  const raw = (id: string, startTimeSeconds: number, labels: { pod?: string; namespace?: string } = {}): CadvisorContainer | undefined => {
    const cg = ctx.cgroups.read(id, detail);
    if (!cg) return undefined;
    return {
      id,
      name: "",
      image: "",
      pod: labels.pod ?? "",
      namespace: labels.namespace ?? "",
      container: "",
      startTimeSeconds,
      cgroup: cg,
      io: ioOf(cg),
      interfaces: [],
      fs: [],
      // cAdvisor's raw handler knows a root process for "/" only: pid 1.
      ...processes(cg, id === "/" ? 1 : undefined),
    };
  };
  let diskstats: Map<string, DiskStats> | undefined;
  const diskOf = (path: string): DiskStats | undefined => {
    diskstats ??= parseDiskstats(readIfExists(join(ctx.fsRoot, "proc/diskstats")) ?? "");
    const mount = mountOfPath(mounts, path);
    return mount ? diskstats.get(mount.device) : undefined;
  };
  const withDisk = (fs: CadvisorFs | undefined, path: string): CadvisorFs | undefined => {
    const disk = fs ? diskOf(path) : undefined;
    return fs && disk ? { ...fs, disk } : fs;
  };

  const bootSeconds = seconds(summary.node.startTime);
  const root = raw("/", bootSeconds);
  if (root) {
    root.interfaces = interfacesOf(ctx.fsRoot, "self");
    const nodeDevice = deviceOfPath(mounts, ctx.rootDir);
    // The machine's filesystems carry their disk's /proc/diskstats counters (cAdvisor's fsToFsStats).
    const nodefs = withDisk(fsOf(nodeDevice, summary.node.fs), ctx.rootDir);
    if (nodefs) root.fs.push(nodefs);
    if (ctx.imageFsMount) {
      const imageDevice = deviceOfPath(mounts, ctx.imageFsMount);
      const imagefs = imageDevice !== nodeDevice ? withDisk(fsOf(imageDevice, summary.node.runtime?.imageFs), ctx.imageFsMount) : undefined;
      if (imagefs) root.fs.push(imagefs);
    }
    out.push(root);
  }

  const statsByUid = new Map(summary.pods.map((p) => [p.podRef.uid, p]));
  const middle = new Set<string>([ctx.podsCgroup]);
  const podEntries: CadvisorContainer[] = [];
  for (const pod of pods) {
    const sandbox = index.sandboxOf(pod.uid);
    if (!sandbox) continue;
    const stats = statsByUid.get(pod.uid);
    const podPath = ctx.podCgroups?.podCgroupPath(pod);
    const labels = { pod: pod.name, namespace: pod.namespace };
    if (podPath !== undefined) {
      for (const m of between(ctx.podsCgroup, podPath)) middle.add(m);
      const entry = raw(podPath, nsToSeconds(sandbox.createdAt), labels);
      if (entry) podEntries.push(entry);
    }
    if (podPath !== undefined) {
      const id = posix.join(podPath, sandbox.id);
      const cg = ctx.cgroups.read(id, detail);
      if (cg) {
        podEntries.push({
          id,
          name: sandbox.id,
          image: ctx.sandboxImage,
          ...labels,
          container: "",
          startTimeSeconds: nsToSeconds(sandbox.createdAt),
          cgroup: cg,
          io: ioOf(cg),
          interfaces: podInterfaces(ctx, podPath, hostNetns),
          fs: [],
          ...processes(cg, cg.processIds?.[0]),
        });
      }
    }
    for (const c of index.containersOf(pod.uid)) {
      const name = c.metadata?.name ?? "";
      const id = podPath !== undefined ? posix.join(podPath, c.id) : `/${c.id}`;
      const summaryStats = stats?.containers.find((s) => s.name === name);
      const cg = (podPath !== undefined ? ctx.cgroups.read(id, detail) : undefined) ?? fromSummary(summaryStats);
      if (!cg) continue;
      const layer = summaryStats?.rootfs;
      const mount = index.containerStats.get(c.id)?.writableLayer?.fsId?.mountpoint || ctx.imageFsMount;
      const rootfs = layer && mount ? fsOf(deviceOfPath(mounts, mount), layer) : undefined;
      podEntries.push({
        id,
        name: c.id,
        image: c.image?.image ?? "",
        ...labels,
        container: name,
        startTimeSeconds: nsToSeconds(c.createdAt),
        cgroup: cg,
        io: ioOf(cg),
        interfaces: [],
        fs: rootfs ? [rootfs] : [],
        ...processes(cg, cg.processIds?.[0]),
      });
    }
  }
  for (const m of [...middle].sort()) {
    const entry = raw(m, bootSeconds);
    if (entry) out.push(entry);
  }
  out.push(...podEntries);
  return { containers: out, psi: ctx.psi };
}

/** CRI numbers of a container without a readable cgroup. */
function fromSummary(s: Summary["pods"][number]["containers"][number] | undefined): CgroupStats | undefined {
  if (!s || (!s.cpu && !s.memory)) return undefined;
  const out: CgroupStats = {};
  if (s.cpu?.usageCoreNanoSeconds !== undefined) out.cpu = { usageNanoseconds: s.cpu.usageCoreNanoSeconds };
  if (s.memory?.usageBytes !== undefined || s.memory?.workingSetBytes !== undefined) {
    out.memory = {
      usageBytes: s.memory.usageBytes ?? s.memory.workingSetBytes ?? 0,
      workingSetBytes: s.memory.workingSetBytes ?? 0,
      ...(s.memory.rssBytes !== undefined ? { rssBytes: s.memory.rssBytes } : {}),
    };
  }
  return out;
}
