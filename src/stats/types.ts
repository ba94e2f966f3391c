/**
 * The Summary API shape (k8s.io/kubelet/pkg/apis/stats/v1alpha1), with
 * upstream's JSON field names: what `/stats/summary` serves and what the
 * eviction manager reads. Times are RFC 3339 strings; bytes and
 * nanocores are numbers. Fields the collector cannot know are omitted.
 */
/**
 * One line of a pressure file (KubeletPSI): the share of wall time some (or
 * all) non-idle tasks stalled on the resource, in percent over 10 s, 60 s
 * and 300 s, and the cumulative stall time in microseconds, the kernel's
 * number as it is (upstream passes it through too).
 */
export interface PsiData {
  total: number;
  avg10: number;
  avg60: number;
  avg300: number;
}

/** A pressure file (`cpu.pressure`, `/proc/pressure/memory`, ...): its `some` and `full` lines. */
export interface PsiStats {
  full: PsiData;
  some: PsiData;
}

export interface CpuStats {
  time: string;
  usageNanoCores?: number;
  usageCoreNanoSeconds?: number;
  psi?: PsiStats;
}

/** I/O stats; the Summary carries only their pressure (KubeletPSI). */
export interface IoStats {
  time: string;
  psi?: PsiStats;
}

export interface MemoryStats {
  time: string;
  availableBytes?: number;
  usageBytes?: number;
  workingSetBytes?: number;
  rssBytes?: number;
  pageFaults?: number;
  majorPageFaults?: number;
  psi?: PsiStats;
}

export interface FsStats {
  time: string;
  availableBytes?: number;
  capacityBytes?: number;
  usedBytes?: number;
  inodesFree?: number;
  inodes?: number;
  inodesUsed?: number;
}

export interface NetworkStats {
  time: string;
  name?: string;
  rxBytes?: number;
  rxErrors?: number;
  txBytes?: number;
  txErrors?: number;
  interfaces?: { name: string; rxBytes?: number; rxErrors?: number; txBytes?: number; txErrors?: number }[];
}

export interface RlimitStats {
  time: string;
  maxpid?: number;
  curproc?: number;
}

export interface ProcessStats {
  process_count?: number;
}

export interface ContainerStats {
  name: string;
  startTime: string;
  cpu?: CpuStats;
  memory?: MemoryStats;
  io?: IoStats;
  rootfs?: FsStats;
  logs?: FsStats;
}

export interface PodStats {
  podRef: { name: string; namespace: string; uid: string };
  startTime: string;
  containers: ContainerStats[];
  cpu?: CpuStats;
  memory?: MemoryStats;
  io?: IoStats;
  network?: NetworkStats;
  volume?: (FsStats & { name: string; pvcRef?: { name: string; namespace: string } })[];
  "ephemeral-storage"?: FsStats;
  process_stats?: ProcessStats;
}

export interface NodeStats {
  nodeName: string;
  systemContainers?: ContainerStats[];
  startTime: string;
  cpu?: CpuStats;
  memory?: MemoryStats;
  io?: IoStats;
  network?: NetworkStats;
  fs?: FsStats;
  runtime?: { imageFs?: FsStats; containerFs?: FsStats };
  rlimit?: RlimitStats;
}

export interface Summary {
  node: NodeStats;
  pods: PodStats[];
}

/** Where the eviction manager and `/stats/summary` get their numbers. */
export interface StatsProvider {
  /** A fresh summary; may reuse readings younger than the collection period. */
  summary(): Promise<Summary>;
}
