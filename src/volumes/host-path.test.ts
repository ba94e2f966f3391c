import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkHostPathType, type HostPathType } from "./host-path.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hostpath-"));
  mkdirSync(join(dir, "d"));
  writeFileSync(join(dir, "f"), "x");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("checkHostPathType (upstream messages)", () => {
  const cases: [HostPathType, string, string | undefined][] = [
    ["", "missing", undefined],
    ["Directory", "d", undefined],
    ["Directory", "f", "is not a directory"],
    ["Directory", "missing", "is not a directory"],
    ["File", "f", undefined],
    ["File", "d", "is not a file"],
    ["Socket", "f", "is not a socket file"],
    ["CharDevice", "f", "is not a character device"],
    ["BlockDevice", "f", "is not a block device"],
    ["DirectoryOrCreate", "f", "is not a directory"],
    ["FileOrCreate", "d", "is not a file"],
  ];
  for (const [type, name, error] of cases) {
    test(`${type || '""'} on ${name}: ${error ?? "ok"}`, () => {
      const path = join(dir, name);
      if (error) expect(() => checkHostPathType(path, type)).toThrow(`hostPath type check failed: ${path} ${error}`);
      else checkHostPathType(path, type);
    });
  }

  test("/dev/null is a character device", () => {
    checkHostPathType("/dev/null", "CharDevice");
  });

  test("DirectoryOrCreate makes the directory (0755) and its parents; FileOrCreate an empty 0644 file", () => {
    checkHostPathType(join(dir, "a/b"), "DirectoryOrCreate");
    expect(statSync(join(dir, "a/b")).isDirectory()).toBe(true);
    expect(statSync(join(dir, "a/b")).mode & 0o777).toBe(0o755 & ~process.umask());
    checkHostPathType(join(dir, "new"), "FileOrCreate");
    expect(statSync(join(dir, "new")).size).toBe(0);
    expect(existsSync(join(dir, "new"))).toBe(true);
  });
});
