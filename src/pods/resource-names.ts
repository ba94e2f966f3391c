/**
 * Resource names a pod spec uses for huge pages, and the byte counts in them
 * printed as resource.Quantity prints them. One place for the cgroups,
 * topology manager and memory manager, which all name huge page sizes.
 */

export const HUGEPAGES_PREFIX = "hugepages-";

/** upstream IsHugePageResourceName. */
export const isHugePageResourceName = (name: string): boolean => name.startsWith(HUGEPAGES_PREFIX);

const BINARY_SUFFIXES: readonly (readonly [string, number])[] = [
  ["Ei", 2 ** 60],
  ["Pi", 2 ** 50],
  ["Ti", 2 ** 40],
  ["Gi", 2 ** 30],
  ["Mi", 2 ** 20],
  ["Ki", 2 ** 10],
];
const DECIMAL_SUFFIXES: readonly (readonly [string, number])[] = [
  ["E", 1e18],
  ["P", 1e15],
  ["T", 1e12],
  ["G", 1e9],
  ["M", 1e6],
  ["k", 1e3],
];

/** A byte count with the largest suffix that divides it exactly (binary or decimal), else plain: 2097152 → "2Mi", 1536 → "1536". */
export function exactQuantity(bytes: number, binary: boolean): string {
  if (bytes === 0) return "0";
  for (const [suffix, unit] of binary ? BINARY_SUFFIXES : DECIMAL_SUFFIXES) if (bytes % unit === 0) return `${bytes / unit}${suffix}`;
  return String(bytes);
}

/** A byte count as resource.Quantity prints a BinarySI value: 2097152 → "2Mi", 1536 → "1536". */
export const binaryQuantity = (bytes: number): string => exactQuantity(bytes, true);

/** upstream HugePageResourceName for a page size in KiB: hugepages-2Mi, hugepages-1Gi. */
export const hugePageResourceName = (pageSizeKiB: number): string => HUGEPAGES_PREFIX + binaryQuantity(pageSizeKiB * 1024);
