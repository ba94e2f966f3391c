/**
 * Huge pages as the kernel shows them and as Kubernetes names them:
 * - the pools in /sys/kernel/mm/hugepages/hugepages-<size>kB (nr_hugepages),
 *   which become the node's `hugepages-<size>` capacity (upstream
 *   cadvisor.CapacityFromMachineInfo);
 * - the page sizes in the kernel's cgroup file names ("2MB", "1GB":
 *   libcontainer's HugePageSizes, hugetlb.2MB.limit_in_bytes), which the CRI's
 *   HugepageLimit.page_size uses too;
 * - a pod's `hugepages-<size>` amounts as limits per page size (upstream
 *   HugePageLimits).
 * Pure except readHugePagePools.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseQuantity } from "../config/index.ts";
import { binaryQuantity, HUGEPAGES_PREFIX, hugePageResourceName, isHugePageResourceName } from "../pods/resource-names.ts";

export interface HugePagePool {
  pageSizeKiB: number;
  /** nr_hugepages: the pages allocated in the pool now. */
  numPages: number;
}

export { HUGEPAGES_PREFIX, binaryQuantity, hugePageResourceName, isHugePageResourceName };

/**
 * The pools of `<sysRoot>/kernel/mm/hugepages`, smallest page first; none
 * when the kernel has no hugetlb support (no directory). A pool whose
 * nr_hugepages cannot be read counts 0 pages, as cAdvisor's.
 */
export function readHugePagePools(sysRoot = "/sys"): HugePagePool[] {
  const dir = join(sysRoot, "kernel/mm/hugepages");
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const pools: HugePagePool[] = [];
  for (const name of names) {
    const m = /^hugepages-(\d+)kB$/.exec(name);
    if (!m) continue;
    let numPages = 0;
    try {
      numPages = Number(readFileSync(join(dir, name, "nr_hugepages"), "utf8").trim()) || 0;
    } catch {
      // unreadable: no pages
    }
    pools.push({ pageSizeKiB: Number(m[1]), numPages });
  }
  return pools.sort((a, b) => a.pageSizeKiB - b.pageSizeKiB);
}

/** upstream HugePageSizeFromResourceName: the page size in bytes; throws on a name that is not hugepages-<quantity>. */
export function hugePageSizeFromResourceName(name: string): number {
  if (!isHugePageResourceName(name)) throw new Error(`resource name: ${name} is an invalid hugepage name`);
  return parseQuantity(name.slice(HUGEPAGES_PREFIX.length));
}

const UNIT_LIST = ["B", "KB", "MB", "GB", "TB", "PB"];

/**
 * upstream HugePageUnitSizeFromByteSize: 2097152 → "2MB", 1073741824 → "1GB",
 * the form of the kernel's hugetlb cgroup files and the CRI's page_size.
 * Throws when the size is not a whole number of its largest unit.
 */
export function hugePageUnitSize(bytes: number): string {
  let size = bytes;
  let idx = 0;
  while (size % 1024 === 0 && idx < UNIT_LIST.length - 1) {
    size /= 1024;
    idx++;
  }
  if (size > 1024 && idx < UNIT_LIST.length - 1) throw new Error(`size: ${size}${UNIT_LIST[idx]} must be guaranteed to divisible into the largest units`);
  return `${size}${UNIT_LIST[idx]}`;
}

/** libcontainer HugePageSizes: the kernel's page sizes ("2MB", "1GB") of these pools, whatever their page count. */
export const cgroupPageSizes = (pools: readonly HugePagePool[]): string[] => pools.map((p) => hugePageUnitSize(p.pageSizeKiB * 1024));

/**
 * upstream HugePageLimits: the `hugepages-<size>` entries of a resource list
 * as page size in bytes → bytes (two names of one size, "2Mi" and
 * "2097152", add up). Other names, and a size that is no quantity (the
 * API refuses those), are ignored.
 */
export function hugePageLimits(amounts: Readonly<Record<string, number>>): Map<number, number> {
  const out = new Map<number, number>();
  for (const [name, value] of Object.entries(amounts)) {
    if (!isHugePageResourceName(name)) continue;
    let size: number;
    try {
      size = hugePageSizeFromResourceName(name);
    } catch {
      continue;
    }
    out.set(size, (out.get(size) ?? 0) + value);
  }
  return out;
}

/** What qos_container_manager writes for every size on the QoS cgroups: effectively unbounded (1 << 62). */
export const HUGETLB_UNBOUNDED = 2 ** 62;

/**
 * upstream maybeSetHugetlb: the config's limits by the kernel's size name,
 * then 0 for every size of the host the config does not name (a cgroup gets
 * no huge pages it was not given). Sizes the host does not have are left
 * out: there is no file to write them to. `limit` is the exact decimal the
 * file gets: String() of 1 << 62 as a double would write 4611686018427388000,
 * not upstream's 4611686018427387904.
 */
export function hugetlbSettings(limits: ReadonlyMap<number, number>, hostSizes: readonly string[]): { pageSize: string; limit: string }[] {
  const bySize = new Map<string, number>();
  for (const [bytes, limit] of limits) {
    try {
      bySize.set(hugePageUnitSize(bytes), limit);
    } catch {
      // not a kernel page size: skipped, as upstream's "Invalid pageSize"
    }
  }
  return hostSizes.map((pageSize) => ({ pageSize, limit: BigInt(Math.trunc(bySize.get(pageSize) ?? 0)).toString() }));
}
