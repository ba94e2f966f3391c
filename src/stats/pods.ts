/**
 * The pod part of the Summary: one PodStats per pod the agent reports,
 * from what the CRI listed (sandboxes, containers, their stats) and what
 * the pod cgroup and the log directories hold. Upstream's CRI stats
 * provider (pkg/kubelet/stats/cri_stats_provider.go) is the model:
 * - a pod's sandbox: the READY one, else the newest (removeTerminatedPods);
 *   a pod without any sandbox is not reported;
 * - its containers: the RUNNING ones (removeTerminatedContainers), found by
 *   their sandbox's pod UID; startTime is the CRI createdAt;
 * - container cpu / memory / writable layer from ListContainerStats;
 *   usageNanoCores from two of our own samples (rate.ts);
 * - container logs: the files in `<podLogsDir>/<ns>_<name>_<uid>/<container>/`;
 * - pod cpu / memory / process count from the pod cgroup (upstream reads
 *   it through cAdvisor); a pod without a readable cgroup (cgroupsPerQOS
 *   off) gets its running containers' CRI cpu and memory summed;
 * - network from `/proc/<pid>/net/dev` of a process in the pod cgroup
 *   (pod-network.ts says why not ListPodSandboxStats);
 * - ephemeral-storage: containers' rootfs + logs, plus the files directly
 *   in the pod log directory and the emptyDir (on disk) and configMap
 *   volumes (calcEphemeralStorage);
 * - volumes: what each volume directory uses (stats/volumes.ts).
 */
import { join } from "node:path";
import { ContainerState, PodSandboxState, type Container, type ContainerStats as CriContainerStats, type MemoryUsage, type PodSandbox } from "../cri/index.ts";
import type { CgroupReader } from "./cgroup-reader.ts";
import { filesUsage, toFsStats, type FsInfo } from "./fs.ts";
import { attempt, cpuStats, memoryStats, withPressure, type PartError } from "./convert.ts";
import { podNetwork } from "./pod-network.ts";
import type { CpuRates } from "./rate.ts";
import type { VolumeUsage } from "./volumes.ts";
import type { ContainerStats, FsStats, MemoryStats, PodStats } from "./types.ts";
import { podLogDirectory } from "../pods/dirs.ts";
import type { PodRef } from "../pods/identity.ts";
import type { PodCgroupPaths } from "../cgroups/active.ts";

/** What the CRI listed in one collection; a list that failed is empty. */
export interface CriSnapshot {
  sandboxes: PodSandbox[];
  containers: Container[];
  containerStats: CriContainerStats[];
}

export interface PodReadContext {
  /** Where /proc is ("/" except in tests). */
  fsRoot: string;
  /** This agent's network namespace (the host's): a pod in it reports no network of its own. */
  hostNetns: string | undefined;
  time: string;
  nowMs: number;
  rates: CpuRates;
  cgroups: CgroupReader;
  podCgroups: PodCgroupPaths | undefined;
  podLogsDir: string;
  /** nodefs: capacity and inodes of `logs` and ephemeral-storage, as upstream's rootFsInfo. */
  nodeFs: FsInfo | undefined;
  /** statfs with a per-collection cache (writable layer mountpoints). */
  statFs: (path: string) => FsInfo | undefined;
  /** Fallback capacity for rootfs when the writable layer names no mountpoint. */
  imageFs: FsInfo | undefined;
  /** The pod's volumes, measured (cached for volumeStatsAggPeriod). */
  volumes?: (uid: string) => VolumeUsage[];
  /** KubeletPSI on cgroup v2: pressure of pods (their cgroup) and containers (theirs, below it). */
  psi?: boolean;
}

const nsToIso = (ns: bigint): string => new Date(Number(ns / 1_000_000n)).toISOString();
const num = (v: { value: bigint } | undefined): number | undefined => (v === undefined ? undefined : Number(v.value));

/** The snapshot indexed by pod UID, once per collection. */
export class PodIndex {
  private sandboxesByUid = new Map<string, PodSandbox[]>();
  private containersByUid = new Map<string, Container[]>();
  readonly containerStats = new Map<string, CriContainerStats>();

  constructor(s: CriSnapshot) {
    const uidOfSandbox = new Map<string, string>();
    for (const sb of s.sandboxes) {
      const uid = sb.metadata?.uid;
      if (!uid) continue;
      uidOfSandbox.set(sb.id, uid);
      push(this.sandboxesByUid, uid, sb);
    }
    for (const c of s.containers) {
      if (c.state !== ContainerState.CONTAINER_RUNNING) continue;
      const uid = uidOfSandbox.get(c.podSandboxId);
      if (uid) push(this.containersByUid, uid, c);
    }
    for (const st of s.containerStats) if (st.attributes?.id) this.containerStats.set(st.attributes.id, st);
  }

  /** The READY sandbox (the newest if several), else the newest. */
  sandboxOf(uid: string): PodSandbox | undefined {
    const all = this.sandboxesByUid.get(uid);
    if (!all) return undefined;
    const newest = (list: PodSandbox[]) => list.reduce((a, b) => (b.createdAt > a.createdAt ? b : a));
    const ready = all.filter((s) => s.state === PodSandboxState.SANDBOX_READY);
    return newest(ready.length > 0 ? ready : all);
  }

  /** Running containers of the pod, one per name (the newest). */
  containersOf(uid: string): Container[] {
    const byName = new Map<string, Container>();
    for (const c of this.containersByUid.get(uid) ?? []) {
      const name = c.metadata?.name ?? "";
      const prev = byName.get(name);
      if (!prev || c.createdAt > prev.createdAt) byName.set(name, c);
    }
    return [...byName.values()];
  }
}

function push<T>(m: Map<string, T[]>, k: string, v: T): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}

export function buildPodStats(ctx: PodReadContext, pod: PodRef, index: PodIndex, errors: PartError[]): PodStats | undefined {
  const sandbox = index.sandboxOf(pod.uid);
  if (!sandbox) return undefined;
  const logDir = podLogDirectory(ctx.podLogsDir, pod);
  const cgroupPath = attempt(`pod ${pod.uid} cgroup path`, errors, () => ctx.podCgroups?.podCgroupPath(pod));
  const out: PodStats = {
    podRef: { name: pod.name, namespace: pod.namespace, uid: pod.uid },
    startTime: nsToIso(sandbox.createdAt),
    containers: index.containersOf(pod.uid).map((c) => containerStats(ctx, c, index.containerStats.get(c.id), logDir, errors, cgroupPath)),
  };

  const cg = cgroupPath !== undefined ? attempt(`pod ${pod.uid} cgroup`, errors, () => ctx.cgroups.read(cgroupPath, { psi: ctx.psi === true })) : undefined;
  if (cg?.cpu) out.cpu = cpuStats(ctx, `pod/${pod.uid}`, cg.cpu.usageNanoseconds);
  else {
    const usage = sumOf(index, pod.uid, (st) => st.cpu?.usageCoreNanoSeconds);
    if (usage !== undefined) out.cpu = cpuStats(ctx, `pod/${pod.uid}`, usage);
  }
  if (cg?.memory) out.memory = memoryStats(ctx.time, cg.memory);
  else {
    const memory = summedMemory(ctx.time, index, pod.uid);
    if (memory) out.memory = memory;
  }
  if (cg?.pids !== undefined) out.process_stats = { process_count: cg.pids };
  withPressure(ctx.time, out, cg?.psi);
  if (cgroupPath !== undefined) {
    const network = attempt(`pod ${pod.uid} network`, errors, () => podNetwork(ctx.fsRoot, ctx.cgroups.processes(cgroupPath), ctx.hostNetns, ctx.time));
    if (network) out.network = network;
  }

  const podFiles = attempt(`pod ${pod.uid} logs`, errors, () => filesUsage(logDir));
  const volumes = (ctx.volumes && attempt(`pod ${pod.uid} volumes`, errors, () => ctx.volumes!(pod.uid))) || [];
  if (volumes.length)
    out.volume = volumes.map((v) => ({
      ...(v.measured ? { time: ctx.time, ...v.measured } : toFsStats(ctx.time, ctx.statFs(v.path), v.usage)),
      name: v.name,
      ...(v.pvcRef ? { pvcRef: v.pvcRef } : {}),
    }));
  const ephemeralVolumes = volumes.filter((v) => v.ephemeral).reduce((a, v) => ({ bytes: a.bytes + v.usage.bytes, inodes: a.inodes + v.usage.inodes }), { bytes: 0, inodes: 0 });
  out["ephemeral-storage"] = ephemeralStorage(ctx, out.containers, {
    bytes: (podFiles?.bytes ?? 0) + ephemeralVolumes.bytes,
    inodes: (podFiles?.inodes ?? 0) + ephemeralVolumes.inodes,
  });
  return out;
}

function containerStats(
  ctx: PodReadContext,
  c: Container,
  st: CriContainerStats | undefined,
  podLogDir: string,
  errors: PartError[],
  podCgroup: string | undefined,
): ContainerStats {
  const name = c.metadata?.name ?? "";
  const out: ContainerStats = { name, startTime: nsToIso(c.createdAt) };
  const usage = st?.cpu?.usageCoreNanoSeconds;
  if (usage) out.cpu = cpuStats(ctx, `container/${c.id}`, Number(usage.value));
  if (st?.memory) out.memory = criMemory(ctx.time, st.memory);
  const layer = st?.writableLayer;
  if (layer) {
    const mount = layer.fsId?.mountpoint;
    const fs = (mount ? ctx.statFs(mount) : undefined) ?? ctx.imageFs;
    out.rootfs = toFsStats(ctx.time, fs, { bytes: num(layer.usedBytes), inodes: num(layer.inodesUsed) });
  }
  const logs = attempt(`container ${c.id} logs`, errors, () => filesUsage(join(podLogDir, name)));
  if (logs) out.logs = toFsStats(ctx.time, ctx.nodeFs, logs);
  if (ctx.psi && podCgroup !== undefined) {
    // The runtime's stats carry no pressure (CRI has none in 1.6): the container's own cgroup below the pod's.
    const psi = attempt(`container ${c.id} psi`, errors, () => {
      const dir = ctx.cgroups.containerCgroup(podCgroup, c.id);
      return dir === undefined ? undefined : ctx.cgroups.read(dir, { psi: true })?.psi;
    });
    withPressure(ctx.time, out, psi);
  }
  return out;
}

/** The runtime's memory numbers; availableBytes only when the runtime knows a limit (containerd says 0 otherwise). */
function criMemory(time: string, m: MemoryUsage): MemoryStats {
  const out: MemoryStats = { time };
  const set = (k: "workingSetBytes" | "usageBytes" | "rssBytes" | "pageFaults" | "majorPageFaults", v: { value: bigint } | undefined) => {
    if (v !== undefined) out[k] = Number(v.value);
  };
  set("workingSetBytes", m.workingSetBytes);
  set("usageBytes", m.usageBytes);
  set("rssBytes", m.rssBytes);
  set("pageFaults", m.pageFaults);
  set("majorPageFaults", m.majorPageFaults);
  if (m.availableBytes && m.availableBytes.value > 0n) out.availableBytes = Number(m.availableBytes.value);
  return out;
}

/** The pod's running containers' CRI numbers added up (a pod without a cgroup of its own); undefined when none has it. */
function sumOf(index: PodIndex, uid: string, get: (st: CriContainerStats) => { value: bigint } | undefined): number | undefined {
  let total: number | undefined;
  for (const c of index.containersOf(uid)) {
    const st = index.containerStats.get(c.id);
    const v = st && num(get(st));
    if (v !== undefined) total = (total ?? 0) + v;
  }
  return total;
}

function summedMemory(time: string, index: PodIndex, uid: string): MemoryStats | undefined {
  const workingSetBytes = sumOf(index, uid, (st) => st.memory?.workingSetBytes);
  const usageBytes = sumOf(index, uid, (st) => st.memory?.usageBytes);
  const rssBytes = sumOf(index, uid, (st) => st.memory?.rssBytes);
  if (workingSetBytes === undefined && usageBytes === undefined && rssBytes === undefined) return undefined;
  return {
    time,
    ...(workingSetBytes !== undefined ? { workingSetBytes } : {}),
    ...(usageBytes !== undefined ? { usageBytes } : {}),
    ...(rssBytes !== undefined ? { rssBytes } : {}),
  };
}

function ephemeralStorage(ctx: PodReadContext, containers: ContainerStats[], podFiles: { bytes: number; inodes: number } | undefined): FsStats {
  let bytes = podFiles?.bytes ?? 0;
  let inodes = podFiles?.inodes ?? 0;
  for (const c of containers) {
    bytes += (c.rootfs?.usedBytes ?? 0) + (c.logs?.usedBytes ?? 0);
    inodes += (c.rootfs?.inodesUsed ?? 0) + (c.logs?.inodesUsed ?? 0);
  }
  return toFsStats(ctx.time, ctx.nodeFs, { bytes, inodes });
}
