/**
 * The cgroup v2 (unified) writer. A controller's files exist in a cgroup
 * only when its parent lists the controller in cgroup.subtree_control, so
 * creating a cgroup means enabling the controllers in every ancestor from
 * the hierarchy root down (libcontainer fs2 CreateCgroupPath does the same;
 * the new cgroup's own subtree_control is left to runc, which enables it
 * when it puts container cgroups below).
 */
import { join } from "node:path";
import { CgroupError, isCgroupError } from "./errors.ts";
import { hugetlbSettings } from "./hugepages.ts";
import type { CgroupFs } from "./fs.ts";
import type { ResourceConfig } from "./resources.ts";
import { sharesToCpuWeight, type CpuWeightFormula } from "./values.ts";
import { fileOps, pathChain, type CgroupBackend } from "./backend.ts";
import type { Hierarchy } from "./detect.ts";
import { hierarchyDir } from "./detect.ts";
import type { Logger } from "../util/log.ts";

/** Without these the pod limits cannot be enforced: creating a cgroup fails. */
const REQUIRED = ["cpu", "memory", "pids"];
/** Enabled when the kernel has them (upstream: cpuset, hugetlb; io for runc's blkio settings). */
const OPTIONAL = ["cpuset", "io", "hugetlb"];

const words = (s: string) => s.split(/\s+/).filter(Boolean);

export function createV2Backend(opts: {
  unified: Hierarchy;
  fs: CgroupFs;
  logger: Logger;
  cpuWeightFormula: CpuWeightFormula;
  /** The host's huge page sizes as the kernel names them ("2MB"); none: no hugetlb writes. */
  hugePageSizes?: readonly string[];
}): CgroupBackend {
  const { unified, logger } = opts;
  const hugePageSizes = opts.hugePageSizes ?? [];
  let hugetlbAvailable: boolean | undefined;
  const io = fileOps(opts.fs, logger);
  const dir = (path: string) => hierarchyDir(unified, path);

  /** Enables the wanted controllers in `path`'s cgroup.subtree_control. */
  async function enableControllers(path: string): Promise<void> {
    const d = dir(path);
    const available = new Set(words(await io.read(join(d, "cgroup.controllers"))));
    const missing = REQUIRED.filter((c) => !available.has(c));
    if (missing.length > 0) {
      throw new CgroupError("Unsupported", "enable", d, `controllers ${missing.join(", ")} are not available here (cgroup.controllers: "${[...available].join(" ")}")`);
    }
    const enabled = new Set(words(await io.read(join(d, "cgroup.subtree_control"))));
    const wanted = [...OPTIONAL.filter((c) => available.has(c)), ...REQUIRED].filter((c) => !enabled.has(c));
    if (wanted.length === 0) return;
    const file = join(d, "cgroup.subtree_control");
    try {
      await io.write(file, wanted.map((c) => `+${c}`).join(" "));
    } catch {
      // One at a time, so an optional controller the kernel refuses here
      // (a delegated subtree, a busy cpuset) does not block the required ones.
      for (const c of wanted) {
        try {
          await io.write(file, `+${c}`);
        } catch (e) {
          if (REQUIRED.includes(c)) throw e;
          logger.v(2).info("optional cgroup controller not enabled", { path: d, controller: c, err: e });
        }
      }
    }
  }

  /**
   * libcontainer fs2 setHugeTlb: hugetlb.<size>.max, and .rsvd.max where the
   * kernel has it. Upstream writes them only when the root's
   * cgroup.controllers lists hugetlb; without it, skipped as upstream and
   * said once in the log. A cgroup made by systemd (which does not manage
   * hugetlb) has it enabled in its ancestors first, as libcontainer's
   * CreateCgroupPath does after systemd made the unit.
   */
  async function setHugetlb(path: string, limits: ReadonlyMap<number, number>): Promise<void> {
    if (hugetlbAvailable === undefined) {
      hugetlbAvailable = words(await io.read(join(unified.mountPoint, "cgroup.controllers"))).includes("hugetlb");
      if (!hugetlbAvailable)
        logger.warn("the kernel has no hugetlb cgroup controller: huge page limits are not written to pod cgroups, as upstream (admission still bounds them)", {
          hugePageSizes: hugePageSizes.join(","),
        });
    }
    if (!hugetlbAvailable) return;
    const d = dir(path);
    if (!words(await io.read(join(d, "cgroup.controllers"))).includes("hugetlb")) {
      for (const p of pathChain(path).slice(0, -1)) {
        const control = join(dir(p), "cgroup.subtree_control");
        if (!words(await io.read(control)).includes("hugetlb")) await io.write(control, "+hugetlb");
      }
    }
    let rsvd = true;
    for (const { pageSize, limit } of hugetlbSettings(limits, hugePageSizes)) {
      await io.write(join(d, `hugetlb.${pageSize}.max`), limit);
      if (!rsvd) continue;
      try {
        await io.write(join(d, `hugetlb.${pageSize}.rsvd.max`), limit);
      } catch (e) {
        if (!isCgroupError(e, "NotFound")) throw e;
        rsvd = false;
      }
    }
  }

  return {
    version: "v2",
    dirs: (path) => [dir(path)],

    async ensure(path) {
      const chain = pathChain(path);
      for (const [i, p] of chain.entries()) {
        if (i > 0) await io.mkdir(dir(p));
        if (i < chain.length - 1) await enableControllers(p);
      }
    },

    async apply(path, c: ResourceConfig) {
      const d = dir(path);
      if (c.cpuShares !== undefined) await io.write(join(d, "cpu.weight"), String(sharesToCpuWeight(c.cpuShares, opts.cpuWeightFormula)));
      if (c.cpuQuota !== undefined || c.cpuPeriod !== undefined) {
        // libcontainer fs2: a quota <= 0 is "max"; the period only when given.
        const quota = c.cpuQuota !== undefined && c.cpuQuota > 0 ? String(c.cpuQuota) : "max";
        await io.write(join(d, "cpu.max"), c.cpuPeriod ? `${quota} ${c.cpuPeriod}` : quota);
      }
      if (c.memoryMin !== undefined) await io.write(join(d, "memory.min"), String(c.memoryMin));
      if (c.memoryLimit !== undefined) await io.write(join(d, "memory.max"), c.memoryLimit < 0 ? "max" : String(c.memoryLimit));
      if (c.pidsLimit !== undefined) await io.write(join(d, "pids.max"), c.pidsLimit < 0 ? "max" : String(c.pidsLimit));
      if (c.hugePageLimits !== undefined && hugePageSizes.length > 0) await setHugetlb(path, c.hugePageLimits);
    },
  };
}
