/**
 * The systemd cgroup driver (cgroupDriver: systemd), after upstream's
 * pkg/kubelet/cm/cgroup_manager_linux.go and libcontainer's systemd manager:
 *
 * - names: a cgroup name is a list of components ("kubepods", "burstable",
 *   "pod<uid>"); each component has "-" replaced by "_", they are joined by
 *   "-" into a slice name, and the slice expands into its cgroupfs path
 *   (ExpandSlice): kubepods-burstable-pod1_2.slice lives at
 *   /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice.
 *   That expanded path is also what the CRI gets as cgroup_parent (upstream's
 *   ToSystemd); containerd takes its last element as the slice.
 * - creation: a transient slice unit per level (StartTransientUnit) with the
 *   parent in Wants=, accounting on and DefaultDependencies=no; slices are not
 *   delegated (libcontainer sets Delegate= only on scopes, which runc makes
 *   for containers).
 * - values: set as unit properties (SetUnitProperties, so a daemon-reload does
 *   not undo them) and then written to the cgroup files as well, as
 *   libcontainer's Set does (systemd rounds a CPU quota up to 10 ms per second).
 * - removal: StopUnit, only once no process is left (systemd would kill them).
 */
import { basename, dirname, join } from "node:path";
import { CgroupError, fromErrno } from "./errors.ts";
import type { CgroupFs } from "./fs.ts";
import type { CgroupBackend } from "./backend.ts";
import type { ResourceConfig } from "./resources.ts";
import { UINT64_MAX, type SystemdUnits, type UnitProperty } from "./systemd-units.ts";
import { sharesToCpuWeight, type CpuWeightFormula } from "./values.ts";
import type { Logger } from "../util/log.ts";

const SUFFIX = ".slice";
const escapePart = (part: string) => part.replaceAll("-", "_");
const unescapePart = (part: string) => part.replaceAll("_", "-");

/**
 * libcontainer's ExpandSlice: "a-b-c.slice" → "/a.slice/a-b.slice/a-b-c.slice";
 * "-.slice" (the root slice) → "/". Throws on a malformed slice name.
 */
export function expandSlice(slice: string): string {
  if (!slice.endsWith(SUFFIX) || slice.length <= SUFFIX.length || slice.includes("/")) {
    throw new CgroupError("Invalid", "name", slice, "not a systemd slice name");
  }
  const name = slice.slice(0, -SUFFIX.length);
  if (name === "-") return "/";
  let path = "";
  let prefix = "";
  for (const component of name.split("-")) {
    if (component === "") throw new CgroupError("Invalid", "name", slice, "a slice name has no empty component");
    path += `/${prefix}${component}${SUFFIX}`;
    prefix += `${component}-`;
  }
  return path;
}

/** upstream's CgroupName.ToSystemd: the cgroupfs path of the slice of these components ("/" for none). */
export function systemdCgroupPath(components: readonly string[]): string {
  if (components.length === 0) return "/";
  return expandSlice(components.map(escapePart).join("-") + SUFFIX);
}

/** ParseSystemdToCgroupName: the components of a slice name or path ("kubepods-burstable.slice" → kubepods, burstable). */
export function parseSystemdName(name: string): string[] {
  const base = basename(name);
  if (base === "" || base === "/" || base === "-.slice") return [];
  return base
    .replace(/\.slice$/, "")
    .split("-")
    .map(unescapePart);
}

/** The unit that owns cgroup `path` (its last element) and its parent slice ("-.slice" at the top). */
function unitOf(path: string): { unit: string; parent: string } {
  const unit = basename(path);
  const up = dirname(path);
  return { unit, parent: up === "/" ? "-.slice" : basename(up) };
}

/**
 * Unit properties of a ResourceConfig, as libcontainer's systemd manager
 * converts them (v2: genV2ResourcesProperties; v1: the legacy manager).
 */
export function resourceProperties(c: ResourceConfig, version: "v1" | "v2", formula: CpuWeightFormula): UnitProperty[] {
  const props: UnitProperty[] = [];
  const t = (name: string, value: bigint): UnitProperty => ({ name, type: "t", value });
  if (c.cpuShares !== undefined && c.cpuShares !== 0) {
    props.push(version === "v2" ? t("CPUWeight", BigInt(sharesToCpuWeight(c.cpuShares, formula))) : t("CPUShares", BigInt(c.cpuShares)));
  }
  const quota = c.cpuQuota ?? 0;
  const period = c.cpuPeriod ?? 0;
  if (period !== 0) props.push(t("CPUQuotaPeriodUSec", BigInt(period)));
  if (quota !== 0 || period !== 0) {
    // Microseconds per CPU second, which systemd keeps as a whole percentage: round up to 10 ms.
    let perSec = UINT64_MAX;
    if (quota > 0) {
      const p = BigInt(period || 100_000);
      perSec = (BigInt(quota) * 1_000_000n) / p;
      if (perSec % 10_000n !== 0n) perSec = (perSec / 10_000n + 1n) * 10_000n;
    }
    props.push(t("CPUQuotaPerSecUSec", perSec));
  }
  if (c.memoryLimit !== undefined && c.memoryLimit !== 0) {
    props.push(t(version === "v2" ? "MemoryMax" : "MemoryLimit", c.memoryLimit < 0 ? UINT64_MAX : BigInt(c.memoryLimit)));
  }
  if (c.memoryMin !== undefined && version === "v2") props.push(t("MemoryMin", BigInt(c.memoryMin)));
  if (c.pidsLimit !== undefined && c.pidsLimit !== 0) props.push(t("TasksMax", c.pidsLimit < 0 ? UINT64_MAX : BigInt(c.pidsLimit)));
  return props;
}

export interface SystemdBackendOptions {
  /** The cgroupfs writer of this host's layout: it names the directories and writes the files. */
  files: CgroupBackend;
  units: SystemdUnits;
  fs: CgroupFs;
  logger: Logger;
  cpuWeightFormula: CpuWeightFormula;
  /** How long a started slice may take to show its cgroup directory. */
  realizeTimeoutMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

export function createSystemdBackend(opts: SystemdBackendOptions): CgroupBackend {
  const { files, units, fs, logger } = opts;
  const sleep = opts.sleep ?? ((ms: number) => Bun.sleep(ms));
  const realizeTimeoutMs = opts.realizeTimeoutMs ?? 5000;
  const exists = (path: string) => files.dirs(path).every((d) => fs.existsSync(d));

  async function waitRealized(path: string): Promise<void> {
    for (let waited = 0; !exists(path); waited += 20) {
      if (waited >= realizeTimeoutMs)
        throw new CgroupError("NotFound", "StartTransientUnit", path, `systemd started ${basename(path)} but its cgroup did not appear within ${realizeTimeoutMs} ms`);
      await sleep(20);
    }
  }

  /** Any process in the cgroup tree at `dir`. */
  async function hasProcesses(dir: string): Promise<boolean> {
    let procs = "";
    try {
      procs = (await fs.readFile(join(dir, "cgroup.procs"))).trim();
    } catch (e) {
      if ((e as { code?: string }).code === "ENOENT") return false;
      throw fromErrno("read", join(dir, "cgroup.procs"), e);
    }
    if (procs !== "") return true;
    for (const child of await fs.listDirs(dir)) if (await hasProcesses(join(dir, child))) return true;
    return false;
  }

  return {
    version: files.version,
    dirs: (path) => files.dirs(path),

    async ensure(path) {
      const chain: string[] = [];
      for (let p = path; p !== "/"; p = dirname(p)) chain.unshift(p);
      for (const p of chain) {
        if (exists(p)) continue;
        const { unit, parent } = unitOf(p);
        const started = await units.startUnit(unit, [
          { name: "Description", type: "s", value: `libcontainer container ${unit}` },
          { name: "Wants", type: "as", value: [parent] },
          { name: "MemoryAccounting", type: "b", value: true },
          { name: "CPUAccounting", type: "b", value: true },
          { name: "IOAccounting", type: "b", value: true },
          { name: "TasksAccounting", type: "b", value: true },
          { name: "DefaultDependencies", type: "b", value: false },
        ]);
        logger.v(4).info("systemd slice started", { unit, parent, started });
        await waitRealized(p);
      }
    },

    async apply(path, config) {
      const props = resourceProperties(config, files.version, opts.cpuWeightFormula);
      if (props.length > 0) await units.setUnitProperties(basename(path), props);
      await files.apply(path, config);
    },

    async release(path) {
      for (const dir of files.dirs(path)) {
        if (await hasProcesses(dir)) throw new CgroupError("Busy", "StopUnit", dir, "the cgroup still has processes; not stopping its slice (systemd would kill them)");
      }
      await units.stopUnit(basename(path));
      logger.v(4).info("systemd slice stopped", { unit: basename(path) });
    },
  };
}
