/**
 * Builders and a fake StatsProvider for eviction tests (here and in the
 * agent's wiring tests): pods, pod stats and summaries with only the
 * fields eviction reads, and a config parsed like a config file.
 */
import * as v from "valibot";
import { KubeletConfigurationSchema, type KubeletConfiguration } from "../config/index.ts";
import type { Pod } from "../pods/schema.ts";
import type { ContainerStats, PodStats, StatsProvider, Summary } from "../stats/types.ts";
import { podUid } from "../pods/identity.ts";

export const Ki = 1024;
export const Mi = 1024 * Ki;
export const Gi = 1024 * Mi;

/** A KubeletConfiguration as a config file with these fields would give (durations as "5m" strings). */
export function testConfig(doc: Record<string, unknown> = {}): KubeletConfiguration {
  return v.parse(KubeletConfigurationSchema, { apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration", ...doc });
}

type Resources = Record<string, string | number>;

export interface PodSpecInput {
  name: string;
  uid?: string;
  namespace?: string;
  priority?: number;
  requests?: Resources;
  limits?: Resources;
  annotations?: Record<string, string>;
  terminationGracePeriodSeconds?: number;
  volumes?: Record<string, unknown>[];
  tolerations?: Record<string, unknown>[];
  /** Extra containers besides the first (named "app"). */
  containers?: { name: string; requests?: Resources; limits?: Resources }[];
}

/** A pod with one container "app" (plus `containers`); uid defaults to the name. */
export function pod(p: PodSpecInput): Pod {
  const resources = (requests?: Resources, limits?: Resources) => (requests || limits ? { resources: { ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) } } : {});
  return {
    metadata: { name: p.name, namespace: p.namespace ?? "default", uid: p.uid ?? p.name, ...(p.annotations ? { annotations: p.annotations } : {}) },
    spec: {
      containers: [
        { name: "app", image: "busybox", ...resources(p.requests, p.limits) },
        ...(p.containers ?? []).map((c) => ({ name: c.name, image: "busybox", ...resources(c.requests, c.limits) })),
      ],
      ...(p.priority !== undefined ? { priority: p.priority } : {}),
      ...(p.terminationGracePeriodSeconds !== undefined ? { terminationGracePeriodSeconds: p.terminationGracePeriodSeconds } : {}),
      ...(p.volumes ? { volumes: p.volumes as never } : {}),
      ...(p.tolerations ? { tolerations: p.tolerations } : {}),
    },
  };
}

export const T0 = "2026-01-01T00:00:00Z";

export interface PodStatsInput {
  /** Pod working set bytes; also the "app" container's unless `containers` is given. */
  memory?: number;
  /** "app" container rootfs and logs used bytes (and inodes). */
  rootfs?: number;
  logs?: number;
  rootfsInodes?: number;
  logsInodes?: number;
  containers?: ContainerStats[];
  volumes?: { name: string; usedBytes: number; inodesUsed?: number }[];
  ephemeralStorage?: number;
  processes?: number;
  time?: string;
}

export function podStats(p: Pod, s: PodStatsInput): PodStats {
  const time = s.time ?? T0;
  const app: ContainerStats = {
    name: "app",
    startTime: time,
    ...(s.memory !== undefined ? { memory: { time, workingSetBytes: s.memory } } : {}),
    ...(s.rootfs !== undefined ? { rootfs: { time, usedBytes: s.rootfs, ...(s.rootfsInodes !== undefined ? { inodesUsed: s.rootfsInodes } : {}) } } : {}),
    ...(s.logs !== undefined ? { logs: { time, usedBytes: s.logs, ...(s.logsInodes !== undefined ? { inodesUsed: s.logsInodes } : {}) } } : {}),
  };
  return {
    podRef: { name: p.metadata.name ?? "", namespace: p.metadata.namespace ?? "default", uid: podUid(p) },
    startTime: time,
    containers: s.containers ?? [app],
    ...(s.memory !== undefined ? { memory: { time, workingSetBytes: s.memory } } : {}),
    ...(s.volumes ? { volume: s.volumes.map((v) => ({ time, ...v })) } : {}),
    ...(s.ephemeralStorage !== undefined ? { "ephemeral-storage": { time, usedBytes: s.ephemeralStorage } } : {}),
    ...(s.processes !== undefined ? { process_stats: { process_count: s.processes } } : {}),
  };
}

export interface SummaryInput {
  time?: string;
  memory?: { available: number; workingSet: number };
  /** The "pods" system container, for allocatableMemory.available. */
  podsMemory?: { available: number; workingSet: number };
  nodefs?: { available: number; capacity: number; inodesFree?: number; inodes?: number };
  imagefs?: { available: number; capacity: number; inodesFree?: number; inodes?: number };
  pids?: { max: number; running: number };
  pods?: PodStats[];
}

export function summary(s: SummaryInput): Summary {
  const time = s.time ?? T0;
  const fs = (f: NonNullable<SummaryInput["nodefs"]>) => ({
    time,
    availableBytes: f.available,
    capacityBytes: f.capacity,
    usedBytes: f.capacity - f.available,
    ...(f.inodes !== undefined ? { inodes: f.inodes, inodesFree: f.inodesFree } : {}),
  });
  return {
    node: {
      nodeName: "node-a",
      startTime: T0,
      ...(s.memory ? { memory: { time, availableBytes: s.memory.available, workingSetBytes: s.memory.workingSet } } : {}),
      ...(s.podsMemory
        ? { systemContainers: [{ name: "pods", startTime: T0, memory: { time, availableBytes: s.podsMemory.available, workingSetBytes: s.podsMemory.workingSet } }] }
        : {}),
      ...(s.nodefs ? { fs: fs(s.nodefs) } : {}),
      ...(s.imagefs ? { runtime: { imageFs: fs(s.imagefs) } } : {}),
      ...(s.pids ? { rlimit: { time, maxpid: s.pids.max, curproc: s.pids.running } } : {}),
    },
    pods: s.pods ?? [],
  };
}

/** Serves the summary it was last given; counts calls; `fail` makes the next calls throw. */
export class FakeStatsProvider implements StatsProvider {
  calls = 0;
  fail: Error | undefined;
  /** Run before each summary is served, e.g. to apply what a GC freed. */
  onSummary: (() => void) | undefined;
  constructor(public current: Summary) {}
  set(s: Summary): void {
    this.current = s;
  }
  async summary(): Promise<Summary> {
    this.calls++;
    if (this.fail) throw this.fail;
    this.onSummary?.();
    return this.current;
  }
}
