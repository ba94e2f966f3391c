import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { binaryQuantity, cgroupPageSizes, hugePageLimits, hugePageResourceName, hugePageSizeFromResourceName, hugePageUnitSize, readHugePagePools } from "./hugepages.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A fake /sys with the given pools (name → nr_hugepages text, undefined: no nr_hugepages file). */
function fakeSys(pools: Record<string, string | undefined>): string {
  const sys = mkdtempSync(join(tmpdir(), "hugepages-sys-"));
  dirs.push(sys);
  for (const [name, pages] of Object.entries(pools)) {
    mkdirSync(join(sys, "kernel/mm/hugepages", name), { recursive: true });
    if (pages !== undefined) writeFileSync(join(sys, "kernel/mm/hugepages", name, "nr_hugepages"), pages);
  }
  return sys;
}

test("every pool in /sys/kernel/mm/hugepages, smallest page first, with its nr_hugepages; odd entries and unreadable counts as the kernel's", () => {
  const sys = fakeSys({ "hugepages-1048576kB": "2\n", "hugepages-2048kB": "16\n", "hugepages-64kB": undefined, "not-a-pool": "3" });
  expect(readHugePagePools(sys)).toEqual([
    { pageSizeKiB: 64, numPages: 0 },
    { pageSizeKiB: 2048, numPages: 16 },
    { pageSizeKiB: 1048576, numPages: 2 },
  ]);
  expect(cgroupPageSizes(readHugePagePools(sys))).toEqual(["64KB", "2MB", "1GB"]);
});

test("a kernel without hugetlb (no directory) has no pools", () => {
  expect(readHugePagePools(fakeSys({}))).toEqual([]);
  expect(readHugePagePools("/nonexistent-sys")).toEqual([]);
});

test("names and sizes as upstream's v1helper: resource names, the kernel's unit sizes, quantities", () => {
  expect(hugePageResourceName(2048)).toBe("hugepages-2Mi");
  expect(hugePageResourceName(1048576)).toBe("hugepages-1Gi");
  expect(hugePageResourceName(64)).toBe("hugepages-64Ki");
  expect(hugePageSizeFromResourceName("hugepages-2Mi")).toBe(2 * 2 ** 20);
  expect(() => hugePageSizeFromResourceName("memory")).toThrow("invalid hugepage name");
  expect(hugePageUnitSize(2 * 2 ** 20)).toBe("2MB");
  expect(hugePageUnitSize(2 ** 30)).toBe("1GB");
  expect(hugePageUnitSize(64 * 1024)).toBe("64KB");
  expect(() => hugePageUnitSize(1025 * 1024)).toThrow("divisible");
  expect(binaryQuantity(0)).toBe("0");
  expect(binaryQuantity(32 * 2 ** 20)).toBe("32Mi");
  expect(binaryQuantity(3 * 2 ** 30)).toBe("3Gi");
  expect(binaryQuantity(1536)).toBe("1536");
});

test("HugePageLimits: hugepages-<size> amounts by page size in bytes, two spellings of one size added, other names ignored", () => {
  expect(hugePageLimits({ cpu: 1000, memory: 2 ** 30, "hugepages-2Mi": 8 * 2 ** 20, "hugepages-2048Ki": 2 * 2 ** 20, "hugepages-1Gi": 2 ** 30 })).toEqual(
    new Map([
      [2 * 2 ** 20, 10 * 2 ** 20],
      [2 ** 30, 2 ** 30],
    ]),
  );
});
