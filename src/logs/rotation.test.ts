import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { FakeCri } from "../cri/fake.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { createLogRotation, LOG_MONITOR_PERIOD_MS, rotationTimestamp, type LogRotationOptions } from "./rotation.ts";

const IMAGE = "busybox:1.0";
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "bunlet-logrot-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function setup(over: Partial<LogRotationOptions> = {}) {
  const clock = new FakeClock();
  const cri = new FakeCri({ clock, images: [IMAGE] });
  const { logger, lines } = memoryLogger();
  // containerd's ReopenContainerLog opens the path again with O_CREATE: a
  // fresh empty file after a rename. FakeCri checks the state only.
  const paths = new Map<string, string>();
  const rotation = createLogRotation({
    cri: {
      listContainers: (f) => cri.listContainers(f),
      containerStatus: (id) => cri.containerStatus(id),
      reopenContainerLog: async (id) => {
        await cri.reopenContainerLog(id);
        appendFileSync(paths.get(id)!, "");
      },
    },
    maxSizeBytes: 100,
    maxFiles: 3,
    clock,
    logger,
    ...over,
  });
  let n = 0;
  /** A running container whose log is `<dir>/<pod>/app/0.log`, with `content` in it. */
  const container = async (content = "", state: "running" | "exited" = "running") => {
    const name = `p${++n}`;
    const logDirectory = join(dir, name);
    mkdirSync(join(logDirectory, "app"), { recursive: true });
    const config = { metadata: { name, namespace: "default", uid: `uid-${name}`, attempt: 0 }, logDirectory };
    const sandbox = await cri.runPodSandbox(config);
    const id = await cri.createContainer(sandbox, { metadata: { name: "app" }, image: { image: IMAGE }, logPath: "app/0.log" }, config);
    await cri.startContainer(id);
    if (state === "exited") cri.exitContainer(id, 0);
    const path = join(logDirectory, "app/0.log");
    paths.set(id, path);
    if (content) writeFileSync(path, content);
    return { id, path, dir: join(logDirectory, "app") };
  };
  const files = (d: string) => readdirSync(d).sort();
  return { clock, cri, rotation, container, files, lines };
}

const line = (i: number) => `2026-01-01T00:00:00.000000000Z stdout F line ${i}\n`;
const lines = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => line(from + k)).join("");

describe("log rotation", () => {
  test("a log under the size limit is left alone", async () => {
    const t = setup();
    const c = await t.container("x".repeat(99));
    await t.rotation.rotateAll();
    expect(t.files(c.dir)).toEqual(["0.log"]);
    expect(t.cri.callsOf("reopenContainerLog")).toEqual([]);
  });

  test("at the limit: renamed with a timestamp, the runtime reopens, a fresh file takes the writes", async () => {
    const t = setup();
    const c = await t.container(lines(0, 3)); // 3 × 48 bytes
    await t.rotation.rotateAll();
    const ts = rotationTimestamp(t.clock.now());
    expect(ts).toMatch(/^\d{8}-\d{6}$/);
    expect(t.files(c.dir)).toEqual(["0.log", `0.log.${ts}`]);
    expect(readFileSync(`${c.path}.${ts}`, "utf8")).toBe(lines(0, 3));
    expect(readFileSync(c.path, "utf8")).toBe("");
    expect(t.cri.callsOf("reopenContainerLog")).toEqual([[c.id]]);
  });

  test("repeated rotations keep at most maxFiles files; all rotated files but the newest are gzipped; the oldest go", async () => {
    const t = setup({ maxFiles: 4 });
    const c = await t.container();
    const stamps: string[] = [];
    for (let round = 0; round < 5; round++) {
      appendFileSync(c.path, lines(round * 10, round * 10 + 10));
      stamps.push(rotationTimestamp(t.clock.now()));
      await t.rotation.rotateAll();
      t.clock.advance(LOG_MONITOR_PERIOD_MS);
    }
    // Current + newest rotated + 2 gzipped = 4.
    expect(t.files(c.dir)).toEqual(["0.log", `0.log.${stamps[2]}.gz`, `0.log.${stamps[3]}.gz`, `0.log.${stamps[4]}`]);
    expect(gunzipSync(readFileSync(`${c.path}.${stamps[2]}.gz`)).toString()).toBe(lines(20, 30));
    expect(gunzipSync(readFileSync(`${c.path}.${stamps[3]}.gz`)).toString()).toBe(lines(30, 40));
    expect(readFileSync(`${c.path}.${stamps[4]}`, "utf8")).toBe(lines(40, 50));
  });

  test("maxFiles 2: only the current file and the newest rotated one", async () => {
    const t = setup({ maxFiles: 2 });
    const c = await t.container();
    for (let round = 0; round < 3; round++) {
      appendFileSync(c.path, lines(0, 5));
      await t.rotation.rotateAll();
      t.clock.advance(LOG_MONITOR_PERIOD_MS);
    }
    const files = t.files(c.dir);
    expect(files.length).toBe(2);
    expect(files[0]).toBe("0.log");
    expect(files[1]).toMatch(/^0\.log\.\d{8}-\d{6}$/);
  });

  test("when the reopen fails the file is renamed back, and the next round rotates it", async () => {
    const t = setup();
    const c = await t.container(lines(0, 3));
    t.cri.failNext("reopenContainerLog", "Unknown", "shim gone");
    await t.rotation.rotateAll();
    expect(t.files(c.dir)).toEqual(["0.log"]);
    expect(readFileSync(c.path, "utf8")).toBe(lines(0, 3));
    expect(t.lines.some((l) => l.includes("failed to rotate log for container") && l.includes("shim gone"))).toBe(true);
    t.clock.advance(LOG_MONITOR_PERIOD_MS);
    await t.rotation.rotateAll();
    expect(t.files(c.dir)).toEqual(["0.log", `0.log.${rotationTimestamp(t.clock.now())}`]);
  });

  test("a running container whose log file is missing gets a reopen", async () => {
    const t = setup();
    const c = await t.container();
    expect(existsSync(c.path)).toBe(false);
    await t.rotation.rotateAll();
    expect(t.cri.callsOf("reopenContainerLog")).toEqual([[c.id]]);
    expect(t.files(c.dir)).toEqual(["0.log"]);
  });

  test("containers that are not running are skipped", async () => {
    const t = setup();
    const c = await t.container(lines(0, 10), "exited");
    await t.rotation.rotateAll();
    expect(t.files(c.dir)).toEqual(["0.log"]);
    expect(t.cri.callsOf("containerStatus")).toEqual([]);
  });

  test("each running container's status is read once for its log path, not every round; a container that stops is forgotten", async () => {
    const t = setup();
    const a = await t.container("x");
    const b = await t.container("y");
    for (let i = 0; i < 3; i++) await t.rotation.rotateAll();
    expect(
      t.cri
        .callsOf("containerStatus")
        .map((args) => args[0])
        .sort(),
    ).toEqual([a.id, b.id].sort());
    // Still rotated from the remembered path.
    appendFileSync(a.path, lines(0, 3));
    await t.rotation.rotateAll();
    expect(t.files(a.dir)).toHaveLength(2);
    expect(t.cri.callsOf("containerStatus")).toHaveLength(2);
    // b stops: forgotten; were the runtime to report that ID running again, its status would be read again.
    t.cri.exitContainer(b.id, 0);
    await t.rotation.rotateAll();
    expect(t.cri.callsOf("containerStatus")).toHaveLength(2);
  });

  test("one container's failure does not stop the others", async () => {
    const t = setup();
    const a = await t.container(lines(0, 3));
    const b = await t.container(lines(0, 3));
    t.cri.failNext("containerStatus", "Unavailable");
    await t.rotation.rotateAll();
    const rotatedA = t.files(a.dir).length === 2;
    const rotatedB = t.files(b.dir).length === 2;
    expect([rotatedA, rotatedB].sort()).toEqual([false, true]);
  });

  test("leftovers of an interrupted rotation are cleaned up: temporaries, and files already compressed", async () => {
    const t = setup({ maxFiles: 5 });
    const c = await t.container(lines(0, 3));
    writeFileSync(`${c.path}.20250101-000000`, "old");
    writeFileSync(`${c.path}.20250101-000000.gz`, "");
    writeFileSync(`${c.path}.20250101-000010.tmp`, "partial");
    writeFileSync(`${c.path}.20250101-000010`, "kept");
    await t.rotation.rotateAll();
    const ts = rotationTimestamp(t.clock.now());
    expect(t.files(c.dir)).toEqual(["0.log", "0.log.20250101-000000.gz", "0.log.20250101-000010.gz", `0.log.${ts}`]);
    expect(gunzipSync(readFileSync(`${c.path}.20250101-000010.gz`)).toString()).toBe("kept");
  });

  test("other containers' files in the same directory are not touched", async () => {
    const t = setup({ maxFiles: 2 });
    const c = await t.container(lines(0, 3));
    writeFileSync(join(c.dir, "1.log"), "restart");
    writeFileSync(join(c.dir, "1.log.20250101-000000"), "restart rotated");
    await t.rotation.rotateAll();
    expect(t.files(c.dir).filter((f) => f.startsWith("1.log"))).toEqual(["1.log", "1.log.20250101-000000"]);
  });

  test("a second rotation in the same second waits instead of replacing the first rotated file", async () => {
    const t = setup();
    const c = await t.container(lines(0, 3));
    await t.rotation.rotateAll();
    appendFileSync(c.path, lines(3, 6));
    await t.rotation.rotateAll();
    const ts = rotationTimestamp(t.clock.now());
    expect(readFileSync(`${c.path}.${ts}`, "utf8")).toBe(lines(0, 3));
    expect(readFileSync(c.path, "utf8")).toBe(lines(3, 6));
  });

  test("negative maxSize disables rotation; maxFiles must be at least 2", async () => {
    const t = setup({ maxSizeBytes: -1 });
    const c = await t.container(lines(0, 10));
    await t.rotation.rotateAll();
    expect(t.files(c.dir)).toEqual(["0.log"]);
    expect(t.cri.callsOf("listContainers")).toEqual([]);
    expect(() => setup({ maxFiles: 1 })).toThrow("invalid MaxFiles 1, must be > 1");
  });

  test("start: a round now and every period after; dispose leaves no timer", async () => {
    const t = setup();
    const c = await t.container(lines(0, 3));
    t.rotation.start();
    for (let i = 0; i < 50 && t.files(c.dir).length < 2; i++) await Bun.sleep(1);
    expect(t.files(c.dir).length).toBe(2);
    await Bun.sleep(5);
    appendFileSync(c.path, lines(3, 6));
    t.clock.advance(LOG_MONITOR_PERIOD_MS);
    for (let i = 0; i < 50 && t.files(c.dir).length < 3; i++) await Bun.sleep(1);
    expect(t.files(c.dir).length).toBe(3);
    await t.rotation[Symbol.asyncDispose]();
    expect(t.clock.pendingTimers()).toBe(0);
  });
});
