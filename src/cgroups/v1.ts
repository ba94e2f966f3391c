/**
 * The cgroup v1 writer (cgroupfs driver). Like upstream (libcontainer's fs
 * manager, "Apply(-1)"), a pod cgroup is created in every mounted
 * hierarchy, because runc puts each container into `<parent>/<id>` in all of
 * them; values go to the hierarchy of their controller. cpuset is the odd
 * one: a new cpuset cgroup starts with empty cpuset.cpus and cpuset.mems and
 * refuses tasks until they are set, so each level copies its parent's.
 * Measured with containerd 1.6.20 + runc 1.1.5 on this project's hosts: runc
 * would also create missing hierarchy directories and fill empty cpuset levels
 * itself (a sandbox in a pod cgroup with empty cpuset.cpus started, and the
 * level then held the parent's CPUs); doing it here keeps the pod cgroup
 * complete on its own, as upstream's, and removal covers every hierarchy.
 */
import { join } from "node:path";
import type { CgroupFs } from "./fs.ts";
import type { ResourceConfig } from "./resources.ts";
import { fileOps, pathChain, type CgroupBackend } from "./backend.ts";
import { hierarchyDir, type Hierarchy } from "./detect.ts";
import { isCgroupError } from "./errors.ts";
import { hugetlbSettings } from "./hugepages.ts";
import type { Logger } from "../util/log.ts";

export function createV1Backend(opts: {
  hierarchies: Hierarchy[];
  unified?: Hierarchy;
  fs: CgroupFs;
  logger: Logger;
  /** The host's huge page sizes as the kernel names them ("2MB"); none: no hugetlb writes. */
  hugePageSizes?: readonly string[];
}): CgroupBackend {
  const { logger } = opts;
  const hugePageSizes = opts.hugePageSizes ?? [];
  let hugetlbMissingLogged = false;
  const io = fileOps(opts.fs, logger);
  // The hybrid cgroup2 mount holds no controllers but runc creates container
  // cgroups there too; the pod directory is made (and removed) there as well.
  const all = opts.unified ? [...opts.hierarchies, opts.unified] : opts.hierarchies;
  const withController = (c: string) => opts.hierarchies.find((h) => h.controllers.includes(c));

  async function copyCpuset(h: Hierarchy, parent: string, child: string): Promise<void> {
    for (const file of ["cpuset.cpus", "cpuset.mems"]) {
      const own = await io.read(join(hierarchyDir(h, child), file));
      if (own !== "") continue;
      await io.write(join(hierarchyDir(h, child), file), await io.read(join(hierarchyDir(h, parent), file)));
    }
  }

  /** Writes `value` to `file` of `path` in the hierarchy of `controller`; a missing hierarchy is only fine for defaults. */
  async function put(controller: string, path: string, file: string, value: string, isDefault: boolean): Promise<void> {
    const h = withController(controller);
    if (!h) {
      if (!isDefault) logger.warn("cgroup v1 controller not mounted; value not applied", { controller, path, file, value });
      return;
    }
    await io.write(join(hierarchyDir(h, path), file), value);
  }

  /**
   * libcontainer fs HugetlbGroup.Set: hugetlb.<size>.limit_in_bytes, and the
   * reservation limit .rsvd.limit_in_bytes where the kernel has it. Without
   * a hugetlb hierarchy upstream skips it (the pages stay bounded by
   * admission alone): said once in the log here.
   */
  async function setHugetlb(path: string, limits: ReadonlyMap<number, number>): Promise<void> {
    const h = withController("hugetlb");
    if (!h) {
      if (!hugetlbMissingLogged) {
        hugetlbMissingLogged = true;
        logger.warn("no hugetlb cgroup hierarchy is mounted: huge page limits are not written to pod cgroups, as upstream (admission still bounds them)", {
          hugePageSizes: hugePageSizes.join(","),
        });
      }
      return;
    }
    let rsvd = true;
    for (const { pageSize, limit } of hugetlbSettings(limits, hugePageSizes)) {
      const dir = hierarchyDir(h, path);
      await io.write(join(dir, `hugetlb.${pageSize}.limit_in_bytes`), limit);
      if (!rsvd) continue;
      try {
        await io.write(join(dir, `hugetlb.${pageSize}.rsvd.limit_in_bytes`), limit);
      } catch (e) {
        if (!isCgroupError(e, "NotFound")) throw e;
        rsvd = false; // a kernel before 5.7: no reservation accounting
      }
    }
  }

  return {
    version: "v1",
    dirs: (path) => all.map((h) => hierarchyDir(h, path)),

    async ensure(path) {
      const chain = pathChain(path);
      for (const h of all) {
        const cpuset = h.controllers.includes("cpuset");
        for (const [i, p] of chain.entries()) {
          if (i === 0) continue;
          await io.mkdir(hierarchyDir(h, p));
          // Levels that existed may still be empty (made by someone else): check every one.
          if (cpuset) await copyCpuset(h, chain[i - 1]!, p);
        }
      }
    },

    async apply(path, c: ResourceConfig) {
      if (c.cpuShares !== undefined) await put("cpu", path, "cpu.shares", String(c.cpuShares), false);
      if (c.cpuPeriod !== undefined || c.cpuQuota !== undefined) {
        const period = c.cpuPeriod ? () => put("cpu", path, "cpu.cfs_period_us", String(c.cpuPeriod), false) : async () => {};
        // libcontainer fs: quota 0 means "not set"; -1 is unlimited.
        const quota = c.cpuQuota ? () => put("cpu", path, "cpu.cfs_quota_us", String(c.cpuQuota), c.cpuQuota === -1) : async () => {};
        try {
          await period();
          await quota();
        } catch (e) {
          // The kernel checks quota against period at each write: a shorter
          // period with the old quota can be refused, the other order works.
          if (!isCgroupError(e, "Invalid")) throw e;
          await quota();
          await period();
        }
      }
      if (c.memoryLimit !== undefined) await put("memory", path, "memory.limit_in_bytes", String(c.memoryLimit < 0 ? -1 : c.memoryLimit), c.memoryLimit < 0);
      if (c.pidsLimit !== undefined) await put("pids", path, "pids.max", c.pidsLimit < 0 ? "max" : String(c.pidsLimit), c.pidsLimit < 0);
      // memory.min has no v1 counterpart (memory QoS needs cgroup v2).
      if (c.hugePageLimits !== undefined && hugePageSizes.length > 0) await setHugetlb(path, c.hugePageLimits);
    },
  };
}
