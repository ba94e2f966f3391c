// statfs, the log accounting walk, and FsStats assembly.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, statfsSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { filesUsage, statFs, toFsStats } from "./fs.ts";

const dir = mkdtempSync(join(tmpdir(), "stats-fs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("statFs", () => {
  test("capacity, available (bavail), used (blocks - bfree) and inodes of the filesystem", () => {
    const info = statFs(dir);
    const raw = statfsSync(dir);
    expect(info.capacityBytes).toBe(raw.blocks * raw.bsize);
    expect(info.availableBytes).toBe(raw.bavail * raw.bsize);
    expect(info.usedBytes).toBe((raw.blocks - raw.bfree) * raw.bsize);
    expect(info.capacityBytes).toBeGreaterThan(info.availableBytes);
    expect(info.availableBytes).toBeGreaterThan(0);
    expect(info.inodes).toBeGreaterThanOrEqual(info.inodesFree);
  });

  test("a path that does not exist throws", () => {
    expect(() => statFs(join(dir, "nope"))).toThrow();
  });
});

describe("filesUsage", () => {
  test("files directly in the directory, by allocated blocks; subdirectories and symlink targets left out", () => {
    const d = join(dir, "logs");
    mkdirSync(join(d, "sub"), { recursive: true });
    writeFileSync(join(d, "0.log"), "x".repeat(10_000));
    writeFileSync(join(d, "1.log"), "");
    writeFileSync(join(d, "sub", "big.log"), "y".repeat(100_000));
    symlinkSync(join(d, "sub", "big.log"), join(d, "link"));
    const u = filesUsage(d)!;
    expect(u.inodes).toBe(3); // 0.log, 1.log, the symlink itself
    expect(u.bytes).toBeGreaterThanOrEqual(10_000);
    expect(u.bytes).toBeLessThan(100_000);
  });

  test("a directory that does not exist is undefined; an empty one is zero", () => {
    expect(filesUsage(join(dir, "missing"))).toBeUndefined();
    mkdirSync(join(dir, "empty"));
    expect(filesUsage(join(dir, "empty"))).toEqual({ bytes: 0, inodes: 0 });
  });
});

describe("toFsStats", () => {
  const info = { capacityBytes: 1000, availableBytes: 300, usedBytes: 650, inodes: 100, inodesFree: 40 };

  test("a whole filesystem: its own usage", () => {
    expect(toFsStats("T", info)).toEqual({ time: "T", availableBytes: 300, capacityBytes: 1000, usedBytes: 650, inodesFree: 40, inodes: 100, inodesUsed: 60 });
  });

  test("a part of it: the filesystem's capacity with the part's usage", () => {
    expect(toFsStats("T", info, { bytes: 5, inodes: 2 })).toEqual({
      time: "T",
      availableBytes: 300,
      capacityBytes: 1000,
      usedBytes: 5,
      inodesFree: 40,
      inodes: 100,
      inodesUsed: 2,
    });
  });

  test("no filesystem known: only the usage", () => {
    expect(toFsStats("T", undefined, { bytes: 5 })).toEqual({ time: "T", usedBytes: 5 });
  });
});
