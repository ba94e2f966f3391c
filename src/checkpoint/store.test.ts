import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { CheckpointError, FileCheckpointStore } from "./store.ts";
import { FakeCheckpointStore } from "./fake.ts";

let dir: string;
let clock: FakeClock;
let log: ReturnType<typeof memoryLogger>;
let seq: number;
const deterministicBytes = (n: number) => Buffer.alloc(n, seq++ % 256);
const store = () => new FileCheckpointStore({ dir, clock, logger: log.logger, randomBytes: deterministicBytes });

beforeEach(() => {
  dir = join(mkdtempSync(join(tmpdir(), "ckpt-")), "checkpoints");
  clock = new FakeClock();
  log = memoryLogger();
  seq = 1;
});
afterEach(() => rmSync(join(dir, ".."), { recursive: true, force: true }));

describe("FileCheckpointStore", () => {
  test("a written document reads back with its time; the file is 0600 in a 0700 directory", () => {
    const s = store();
    s.write("pods", "uid-1", { a: 1, b: ["x"] });
    const r = s.read("pods", "uid-1");
    expect(r).toEqual({ ok: true, key: "uid-1", data: { a: 1, b: ["x"] }, writtenAt: clock.now() });
    expect(statSync(join(dir, "pods", "uid-1.json")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "pods")).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(dir, "pods"))).toEqual(["uid-1.json"]); // no temporary file left
  });

  test("a rewrite replaces the document; remove deletes it and a missing one is not an error", () => {
    const s = store();
    s.write("pods", "k", { v: 1 });
    clock.advance(5000);
    s.write("pods", "k", { v: 2 });
    expect(s.read("pods", "k")).toMatchObject({ ok: true, data: { v: 2 }, writtenAt: clock.now() });
    s.remove("pods", "k");
    s.remove("pods", "k");
    expect(s.read("pods", "k")).toEqual({ ok: false, reason: "missing" });
  });

  test("keys with slashes and dots map to safe file names and back", () => {
    const s = store();
    for (const key of ["default/web", "..", ".hidden", "a b%c"]) s.write("configmaps", key, key);
    expect(s.keys("configmaps")).toEqual([".hidden", "..", "a b%c", "default/web"].sort());
    expect(readdirSync(join(dir, "configmaps")).every((n) => !n.startsWith(".") && !n.includes("/"))).toBe(true);
    expect(s.list("configmaps").map((c) => c.data)).toEqual(s.keys("configmaps"));
  });

  test("a truncated file is reported as corrupt, named in a warning and skipped by list", () => {
    const s = store();
    s.write("pods", "good", { ok: true });
    s.write("pods", "bad", { ok: true, padding: "x".repeat(100) });
    const file = join(dir, "pods", "bad.json");
    const text = readFileSync(file, "utf8");
    writeFileSync(file, text.slice(0, text.length / 2));
    const r = s.read("pods", "bad");
    expect(r).toMatchObject({ ok: false, reason: "corrupt", file });
    expect(s.list("pods").map((c) => c.key)).toEqual(["good"]);
    expect(log.lines.some((l) => l.includes("ignoring corrupt checkpoint") && l.includes(file))).toBe(true);
  });

  test("an altered payload fails the checksum; an envelope moved to another key is refused", () => {
    const s = store();
    s.write("pods", "a", { replicas: 1 });
    const file = join(dir, "pods", "a.json");
    writeFileSync(file, readFileSync(file, "utf8").replace('"replicas\\":1', '"replicas\\":9'));
    expect(s.read("pods", "a")).toMatchObject({ ok: false, reason: "corrupt", message: "checksum mismatch" });
    s.write("pods", "b", { x: 1 });
    writeFileSync(join(dir, "pods", "c.json"), readFileSync(join(dir, "pods", "b.json")));
    expect(s.read("pods", "c")).toMatchObject({ ok: false, reason: "corrupt", message: "envelope names pods/b, expected pods/c" });
  });

  test("garbage of any kind never throws from read or list", () => {
    const s = store();
    s.write("pods", "x", 1);
    for (const garbage of ["", "null", "[]", "{}", '{"version":1}', "\u0000\u0001", '{"version":1,"kind":"pods","key":"x","payload":5}']) {
      writeFileSync(join(dir, "pods", "x.json"), garbage);
      expect(s.read("pods", "x").ok).toBe(false);
      expect(s.list("pods")).toEqual([]);
    }
  });

  test("sensitive documents are encrypted at rest with the node key (0600) and read back", () => {
    const s = store();
    s.write("secrets", "default/db", { password: "hunter2" }, { sensitive: true });
    const raw = readFileSync(join(dir, "secrets", "default%2Fdb.json"), "utf8");
    expect(raw).not.toContain("hunter2");
    expect(JSON.parse(raw).encoding).toBe("aes-256-gcm");
    expect(statSync(join(dir, ".key")).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, ".key")).length).toBe(32);
    // Another store instance (an agent restart) reads the same key from disk.
    expect(store().read("secrets", "default/db")).toMatchObject({ ok: true, data: { password: "hunter2" } });
  });

  test("an encrypted document does not open with another node key, nor under another name", () => {
    const s = store();
    s.write("secrets", "a", { token: "t" }, { sensitive: true });
    writeFileSync(join(dir, "secrets", "b.json"), readFileSync(join(dir, "secrets", "a.json"), "utf8").replace('"key":"a"', '"key":"b"'));
    expect(store().read("secrets", "b")).toMatchObject({ ok: false, reason: "corrupt", message: expect.stringContaining("cannot decrypt") });
    writeFileSync(join(dir, ".key"), Buffer.alloc(32, 0xee));
    expect(store().read("secrets", "a")).toMatchObject({ ok: false, reason: "corrupt", message: expect.stringContaining("cannot decrypt") });
  });

  test("temporary files a crash left behind are removed and never read as documents", () => {
    const s = store();
    s.write("pods", "k", { v: 1 });
    writeFileSync(join(dir, "pods", ".k.json.tmp-abc"), '{"half":');
    expect(s.keys("pods")).toEqual(["k"]);
    expect(readdirSync(join(dir, "pods"))).toEqual(["k.json"]);
  });

  test("a write the disk refuses throws a CheckpointError naming the document and keeps the old version", () => {
    const s = store();
    s.write("pods", "k", { v: 1 });
    let thrown: unknown;
    try {
      s.write("pods", "k", { v: 2n } as unknown);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CheckpointError);
    expect((thrown as CheckpointError).message).toStartWith("checkpoint write pods/k:");
    expect(s.read("pods", "k")).toMatchObject({ ok: true, data: { v: 1 } });
  });

  test("writeMany writes each document; one that fails is named, those before it are written, the rest not", () => {
    const s = store();
    s.writeMany("pods", [
      { key: "a", data: { v: 1 } },
      { key: "b", data: { v: 2 } },
    ]);
    expect(s.list("pods").map((c) => [c.key, c.data])).toEqual([
      ["a", { v: 1 }],
      ["b", { v: 2 }],
    ]);
    expect(() =>
      s.writeMany("pods", [
        { key: "a", data: { v: 10 } },
        { key: "b", data: { v: 20n } as unknown },
        { key: "c", data: { v: 30 } },
      ]),
    ).toThrow("checkpoint write pods/b:");
    expect(s.list("pods").map((c) => [c.key, c.data])).toEqual([
      ["a", { v: 10 }],
      ["b", { v: 2 }],
    ]);
  });

  test("a kind's directory removed under the store is made again by the next write", () => {
    const s = store();
    s.write("pods", "a", 1);
    rmSync(join(dir, "pods"), { recursive: true });
    s.write("pods", "b", 2);
    expect(s.read("pods", "b")).toMatchObject({ ok: true, data: 2 });
  });

  test("kinds are checked: a path in a kind is refused", () => {
    expect(() => store().write("../etc", "k", 1)).toThrow(/checkpoint kind/);
  });
});

describe("FakeCheckpointStore", () => {
  test("behaves like the file store for reads, lists, removal and corruption", () => {
    const s = new FakeCheckpointStore(clock);
    s.write("pods", "a", { v: 1 });
    s.write("pods", "b", { v: 2 });
    s.corrupt("pods", "b");
    expect(s.list("pods")).toEqual([{ key: "a", data: { v: 1 }, writtenAt: clock.now() }]);
    expect(s.read("pods", "b")).toMatchObject({ ok: false, reason: "corrupt" });
    s.remove("pods", "a");
    expect(s.keys("pods")).toEqual(["b"]);
  });
});
