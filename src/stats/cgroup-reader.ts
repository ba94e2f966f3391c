/**
 * Reads one cgroup's stats from cgroupfs, v1 or v2, through the pure
 * parsers in cgroupfs.ts. Paths are relative to the hierarchy root (what
 * the runtime gets as cgroup_parent with the cgroupfs driver); the mount
 * points are the conventional ones under `<fsRoot>/sys/fs/cgroup`.
 *
 * Reads are synchronous on purpose: cgroupfs and procfs answer from kernel
 * memory in microseconds, and one pass over 110 pods is about a thousand
 * small reads (measured in collector.test.ts); promises would cost more
 * than the reads.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  cpuFromV1,
  cpuFromV2,
  cpuSpecFromV1,
  cpuSpecFromV2,
  parseBlkioByDevice,
  parseIoStatByDevice,
  memoryFromV1,
  memoryFromV2,
  parseBlkioServiceBytes,
  parseIoStat,
  parsePressure,
  parseSingleValue,
  specMemoryValue,
  type CgroupPressure,
  type CgroupStats,
} from "./cgroupfs.ts";

export type CgroupVersion = "v1" | "v2";

/** Reads a file; undefined when it does not exist (a cgroup that went away, a controller not mounted). */
export function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

/**
 * v2 when `/sys/fs/cgroup` is the unified hierarchy (it has
 * cgroup.controllers); v1 otherwise, including the hybrid layout, whose v2
 * mount at /sys/fs/cgroup/unified carries no controllers.
 */
export function detectCgroupVersion(fsRoot = "/"): CgroupVersion {
  return existsSync(join(fsRoot, "sys/fs/cgroup/cgroup.controllers")) ? "v2" : "v1";
}

export interface CgroupReadOptions {
  /** Also read io.stat / blkio.throttle.io_service_bytes (not part of the Summary). */
  io?: boolean;
  /**
   * Also what `/metrics/cadvisor` reports beyond the Summary: user/system
   * CPU, swap, failcnt, kernel and peak memory, per-device I/O, the limits
   * (spec), the process ids and pids.max. Pressure is the `psi` option.
   */
  detail?: boolean;
  /** Also the pressure files (cpu/memory/io.pressure; v2 only, KubeletPSI). */
  psi?: boolean;
}

const pidList = (text: string) =>
  text
    .split("\n")
    .filter((l) => l !== "")
    .map(Number);

export interface CgroupReader {
  readonly version: CgroupVersion;
  /**
   * Stats of the cgroup at `path` (relative to the hierarchy root, "/" for
   * the root). Each controller is read on its own: one that is missing
   * leaves its field undefined. Undefined when nothing could be read (the
   * cgroup does not exist). Other I/O errors are thrown.
   */
  read(path: string, opts?: CgroupReadOptions): CgroupStats | undefined;
  /**
   * Some processes of the cgroup at `path` or below it: those of the first
   * non-empty `cgroup.procs`, depth first (a pod's processes live in its
   * containers' cgroups). Empty when it has none or does not exist.
   */
  processes(path: string): number[];
  /**
   * The cgroup of container `id` directly below `path` (cgroupfs: `<id>`, the
   * systemd driver: `cri-containerd-<id>.scope` and the like: the child
   * whose name holds the ID); undefined when there is none.
   */
  containerCgroup(path: string, id: string): string | undefined;
}

function childNamed(dir: string, path: string, id: string): string | undefined {
  if (!/^[0-9a-zA-Z_-]+$/.test(id)) return undefined;
  let names: string[];
  try {
    names = readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return undefined;
  }
  const name = names.find((n) => n === id) ?? names.find((n) => n.includes(id));
  return name === undefined ? undefined : join(path, name);
}

/** Depth first from `dir`; [] when the directory is gone (a pod that just ended). */
function firstProcesses(dir: string): number[] {
  const procs = readIfExists(join(dir, "cgroup.procs"));
  if (procs === undefined) return [];
  const pids = procs
    .split("\n")
    .filter((l) => l !== "")
    .map(Number);
  if (pids.length > 0) return pids;
  let children: string[];
  try {
    children = readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return [];
  }
  for (const child of children) {
    const found = firstProcesses(join(dir, child));
    if (found.length > 0) return found;
  }
  return [];
}

export function createCgroupReader(opts: { fsRoot?: string; version?: CgroupVersion }): CgroupReader {
  const base = join(opts.fsRoot ?? "/", "sys/fs/cgroup");
  const version = opts.version ?? detectCgroupVersion(opts.fsRoot);
  return version === "v2" ? v2Reader(base) : v1Reader(base);
}

function v2Reader(base: string): CgroupReader {
  return {
    version: "v2",
    read(path, opts) {
      const dir = join(base, path);
      const file = (name: string) => readIfExists(`${dir}/${name}`);
      const cpuStat = file("cpu.stat");
      const memStat = file("memory.stat");
      const memoryMax = memStat !== undefined ? file("memory.max") : undefined;
      const out: CgroupStats = {};
      if (cpuStat !== undefined) out.cpu = cpuFromV2(cpuStat);
      if (memStat !== undefined) {
        out.memory = memoryFromV2({
          current: file("memory.current"),
          stat: memStat,
          max: memoryMax,
          events: file("memory.events"),
          ...(opts?.detail ? { swapCurrent: file("memory.swap.current"), peak: file("memory.peak") } : {}),
        });
      }
      const pids = file("pids.current");
      if (pids !== undefined) out.pids = parseSingleValue(pids);
      if (opts?.io || opts?.detail) {
        const io = file("io.stat");
        if (io !== undefined) out.io = parseIoStat(io);
        if (io !== undefined && opts.detail) out.ioByDevice = parseIoStatByDevice(io);
      }
      if (opts?.psi) {
        const psi: CgroupPressure = {};
        for (const r of ["cpu", "memory", "io"] as const) {
          const text = file(`${r}.pressure`);
          const parsed = text !== undefined ? parsePressure(text) : undefined;
          if (parsed) psi[r] = parsed;
        }
        if (Object.keys(psi).length > 0) out.psi = psi;
      }
      if (opts?.detail) {
        const cpuMax = file("cpu.max");
        const spec = cpuSpecFromV2(cpuMax, file("cpu.weight"));
        // cAdvisor's HasMemory on v2: the cgroup has memory.max (the root has not).
        if (memoryMax !== undefined) {
          spec.memoryLimitBytes = specMemoryValue(memoryMax);
          spec.memorySwapLimitBytes = specMemoryValue(file("memory.swap.max"));
          spec.memoryReservationBytes = specMemoryValue(file("memory.min"));
        }
        if (Object.keys(spec).length > 0) out.spec = spec;
        const procs = file("cgroup.procs");
        if (procs !== undefined) {
          out.processIds = pidList(procs);
          out.processes = out.processIds.length;
        }
        const pidsMax = file("pids.max");
        if (pidsMax !== undefined) out.pidsMax = parseSingleValue(pidsMax);
      }
      return cpuStat === undefined && memStat === undefined && pids === undefined ? undefined : out;
    },
    processes: (path) => firstProcesses(join(base, path)),
    containerCgroup: (path, id) => childNamed(join(base, path), path, id),
  };
}

/**
 * v1: one hierarchy per controller. cpu and cpuacct are often co-mounted
 * (`cpu,cpuacct`, with `cpu` and `cpuacct` symlinks on systemd machines);
 * on this project's build machines they are mounted apart. Resolved once.
 */
function v1Reader(base: string): CgroupReader {
  const mount = (...names: string[]) => {
    for (const n of names) if (existsSync(join(base, n))) return join(base, n);
    return join(base, names[0]!);
  };
  const cpuacct = mount("cpuacct", "cpu,cpuacct", "cpuacct,cpu");
  const cpu = mount("cpu", "cpu,cpuacct", "cpuacct,cpu");
  const memory = mount("memory");
  const blkio = mount("blkio");
  const pidsMount = mount("pids");
  return {
    version: "v1",
    read(path, opts) {
      // Each hierarchy's directory once; file names appended (path.join per file was a tenth of a scrape).
      const dirs = new Map<string, string>();
      const at = (m: string, name: string) => {
        let dir = dirs.get(m);
        if (dir === undefined) dirs.set(m, (dir = join(m, path)));
        return readIfExists(`${dir}/${name}`);
      };
      const out: CgroupStats = {};
      const detail = opts?.detail === true;
      const usage = at(cpuacct, "cpuacct.usage");
      if (usage !== undefined) out.cpu = cpuFromV1(usage, at(cpu, "cpu.stat"), detail ? at(cpuacct, "cpuacct.stat") : undefined);
      const memUsage = at(memory, "memory.usage_in_bytes");
      const memStat = memUsage !== undefined ? at(memory, "memory.stat") : undefined;
      if (memUsage !== undefined && memStat !== undefined) {
        out.memory = memoryFromV1({
          usage: memUsage,
          stat: memStat,
          limit: at(memory, "memory.limit_in_bytes"),
          oomControl: at(memory, "memory.oom_control"),
          ...(detail ? { failcnt: at(memory, "memory.failcnt"), kmemUsage: at(memory, "memory.kmem.usage_in_bytes"), maxUsage: at(memory, "memory.max_usage_in_bytes") } : {}),
        });
      }
      const pids = at(pidsMount, "pids.current");
      if (pids !== undefined) out.pids = parseSingleValue(pids);
      if (opts?.io || detail) {
        // The _recursive file counts the cgroup's descendants too (a pod's
        // I/O is done in its containers' cgroups); same format.
        const io = at(blkio, "blkio.throttle.io_service_bytes_recursive") ?? at(blkio, "blkio.throttle.io_service_bytes");
        if (io !== undefined) out.io = parseBlkioServiceBytes(io);
        if (io !== undefined && detail) out.ioByDevice = parseBlkioByDevice(io);
      }
      if (detail) {
        const spec = cpuSpecFromV1(at(cpu, "cpu.cfs_period_us"), at(cpu, "cpu.cfs_quota_us"), at(cpu, "cpu.shares"));
        // cAdvisor's HasMemory on v1: the memory cgroup exists; a file it lacks
        // (memsw without swap accounting) reads as 0.
        if (out.memory) {
          spec.memoryLimitBytes = out.memory.limitBytes ?? 0;
          spec.memorySwapLimitBytes = specMemoryValue(at(memory, "memory.memsw.limit_in_bytes"));
          spec.memoryReservationBytes = specMemoryValue(at(memory, "memory.soft_limit_in_bytes"));
        }
        if (Object.keys(spec).length > 0) out.spec = spec;
        // cAdvisor counts processes (and their descriptors) in the cpu hierarchy's cgroup.procs.
        const procs = at(cpu, "cgroup.procs");
        if (procs !== undefined) {
          out.processIds = pidList(procs);
          out.processes = out.processIds.length;
        }
        const pidsMax = at(pidsMount, "pids.max");
        if (pidsMax !== undefined) out.pidsMax = parseSingleValue(pidsMax);
      }
      return usage === undefined && memUsage === undefined && pids === undefined ? undefined : out;
    },
    // Every v1 hierarchy holds the same processes; memory is always mounted where pods are limited.
    processes: (path) => firstProcesses(join(memory, path)),
    containerCgroup: (path, id) => childNamed(join(memory, path), path, id),
  };
}
