import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { AtomicWriteError, writeAtomically, type Payload } from "./atomic-writer.ts";

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "atomic-"))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const bytes = (s: string) => new TextEncoder().encode(s);
const payload = (files: Record<string, string>, mode = 0o644): Payload => new Map(Object.entries(files).map(([k, v]) => [k, { content: bytes(v), mode }]));
let n = 0;
const opts = (clock = new FakeClock(Date.UTC(2026, 0, 2, 15, 4, 5))) => ({ clock, random: () => ++n });

describe("writeAtomically", () => {
  test("writes a timestamped directory, ..data pointing at it, and user-visible symlinks through ..data", () => {
    expect(writeAtomically(dir, payload({ a: "1", "sub/b": "2" }), opts())).toBe(true);
    const ts = readlinkSync(join(dir, "..data"));
    expect(ts).toMatch(/^\.\.2026_01_02_15_04_05\.\d+$/);
    expect(readlinkSync(join(dir, "a"))).toBe("..data/a");
    expect(readlinkSync(join(dir, "sub"))).toBe("..data/sub");
    expect(readFileSync(join(dir, "sub/b"), "utf8")).toBe("2");
    expect(statSync(join(dir, "a")).mode & 0o777).toBe(0o644);
  });

  test("an unchanged payload writes nothing; a change swaps ..data and removes the old directory and vanished names", () => {
    writeAtomically(dir, payload({ a: "1", gone: "x" }), opts());
    const first = readlinkSync(join(dir, "..data"));
    expect(writeAtomically(dir, payload({ a: "1", gone: "x" }), opts())).toBe(false);
    expect(readlinkSync(join(dir, "..data"))).toBe(first);
    expect(writeAtomically(dir, payload({ a: "2" }), opts())).toBe(true);
    const second = readlinkSync(join(dir, "..data"));
    expect(second).not.toBe(first);
    expect(readFileSync(join(dir, "a"), "utf8")).toBe("2");
    expect(readdirSync(dir).sort()).toEqual(["..data", second, "a"].sort());
  });

  test("a timestamped directory left by an interrupted write is removed by the next write", () => {
    writeAtomically(dir, payload({ a: "1" }), opts());
    mkdirSync(join(dir, "..2026_01_01_00_00_00.7"));
    writeAtomically(dir, payload({ a: "1" }), opts());
    expect(readdirSync(dir).filter((e) => e.startsWith("..2026")).length).toBe(1);
  });

  test("a mode change alone is a change", () => {
    writeAtomically(dir, payload({ a: "1" }, 0o644), opts());
    expect(writeAtomically(dir, payload({ a: "1" }, 0o400), opts())).toBe(true);
    expect(statSync(join(dir, "a")).mode & 0o777).toBe(0o400);
  });

  test("paths that could leave the directory are refused before anything is written", () => {
    for (const bad of ["../x", "/etc/passwd", "a/../../x", "..hidden"]) {
      expect(() => writeAtomically(dir, payload({ [bad]: "x" }), opts())).toThrow(AtomicWriteError);
    }
    expect(readdirSync(dir)).toEqual([]);
  });

  test("a ..data link that does not name one of our timestamped directories is replaced, never followed or removed", () => {
    const outside = mkdtempSync(join(tmpdir(), "outside-"));
    mkdirSync(join(outside, "keep"));
    symlinkSync(outside, join(dir, "..data"));
    writeAtomically(dir, payload({ a: "1" }), opts());
    expect(lstatSync(join(outside, "keep")).isDirectory()).toBe(true);
    expect(readlinkSync(join(dir, "..data"))).toMatch(/^\.\.2026/);
    rmSync(outside, { recursive: true });
  });

  test("setPerms runs on the new directory before it becomes visible", () => {
    const seen: string[] = [];
    writeAtomically(dir, payload({ a: "1" }), { ...opts(), setPerms: (d) => seen.push(readdirSync(d).join(",")) });
    expect(seen).toEqual(["a"]);
  });
});
