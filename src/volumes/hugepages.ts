/**
 * emptyDir `medium: HugePages` and `HugePages-<size>` (upstream
 * pkg/volume/emptydir setupHugepages / getPageSizeMountOption): a hugetlbfs
 * with the page size the pod's huge page requests name. Pure; the mount is
 * the volume manager's.
 */
import { binaryQuantity, hugePageSizeFromResourceName, isHugePageResourceName } from "../cgroups/hugepages.ts";
import { parseQuantity } from "../config/index.ts";
import type { Pod } from "../pods/schema.ts";

/** upstream IsHugePageMedium: "HugePages" or "HugePages-<size>". */
export const isHugePageMedium = (medium: string): boolean => medium === "HugePages" || medium.startsWith("HugePages-");

/**
 * The page size in bytes the hugetlbfs of `medium` gets, from the pod's
 * `hugepages-<size>` requests (init containers too; a limit stands for the
 * request, which the API makes equal): "HugePages" needs exactly one size
 * among them, "HugePages-<size>" that size. Throws upstream's messages.
 */
export function hugePageVolumeSize(medium: string, pod: Pod): number {
  const mediumSize = medium === "HugePages" ? undefined : mediumPageSize(medium);
  let found: number | undefined;
  for (const c of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
    const requests = { ...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {}) };
    for (const name of Object.keys(requests)) {
      if (!isHugePageResourceName(name)) continue;
      const size = hugePageSizeFromResourceName(name);
      if (mediumSize === undefined) {
        if (found !== undefined && found !== size) throw new Error(`medium: ${medium} can't be used if container requests multiple huge page sizes`);
        found = size;
      } else if (size === mediumSize) found = size;
    }
  }
  if (found === undefined) throw new Error(`medium ${medium}: hugePages storage requested, but there is no resource request for huge pages`);
  return found;
}

/** The `pagesize=` option of a page size, as upstream prints the quantity ("2Mi", "1Gi"). */
export const hugetlbfsPageSizeOption = (bytes: number): string => binaryQuantity(bytes);

function mediumPageSize(medium: string): number {
  const text = medium.slice("HugePages-".length);
  try {
    return parseQuantity(text);
  } catch {
    throw new Error(`medium ${medium}: ${JSON.stringify(text)} is not a huge page size`);
  }
}
