import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { podDirs } from "../pods/dirs.ts";
import type { Pod } from "../pods/schema.ts";
import { lastLogLines, randomFileName, terminationMessage, terminationMessageMount } from "./termination.ts";

let root: string;
beforeEach(() => (root = mkdtempSync(join(tmpdir(), "term-"))));
afterEach(() => rmSync(root, { recursive: true, force: true }));

const pod: Pod = { metadata: { name: "p", namespace: "ns", uid: "u1" }, spec: { containers: [{ name: "c", image: "i" }] } };
const criLine = (text: string, stream = "stdout", tag = "F") => `2026-01-01T00:00:00.000000000Z ${stream} ${tag} ${text}\n`;

describe("termination messages", () => {
  test("each start gets a new empty world-writable file named with 8 hex digits, mounted at the default path", () => {
    let n = 0;
    const random = () => [0.5, 0.25][n++]!;
    const dirs = podDirs(root);
    const first = terminationMessageMount(dirs, pod, pod.spec.containers[0]!, random);
    const second = terminationMessageMount(dirs, pod, { ...pod.spec.containers[0]!, terminationMessagePath: "/tmp/msg" }, random);
    expect(first).toMatchObject({ containerPath: "/dev/termination-log", hostPath: join(root, "pods/u1/containers/c/80000000") });
    expect(second).toMatchObject({ containerPath: "/tmp/msg", hostPath: join(root, "pods/u1/containers/c/40000000") });
    expect(readdirSync(join(root, "pods/u1/containers/c")).sort()).toEqual(["40000000", "80000000"]);
    expect(statSync(first.hostPath).mode & 0o777).toBe(0o666);
    expect(statSync(first.hostPath).size).toBe(0);
    expect(randomFileName(() => 0)).toBe("00000000");
    expect(randomFileName(() => 0.9999999999)).toBe("ffffffff");
  });

  const facts = (over: Partial<Parameters<typeof terminationMessage>[0]> = {}) => ({
    exitCode: 1,
    runtimeMessage: "",
    mounts: [{ containerPath: "/dev/termination-log", hostPath: join(root, "msg") }],
    terminationMessagePath: "/dev/termination-log",
    terminationMessagePolicy: "File",
    logPath: join(root, "0.log"),
    ...over,
  });

  test("the file's first 4096 bytes are the message; policy File never reads the log", () => {
    writeFileSync(join(root, "msg"), "x".repeat(5000));
    writeFileSync(join(root, "0.log"), criLine("from the log"));
    expect(terminationMessage(facts())).toBe("x".repeat(4096));
    writeFileSync(join(root, "msg"), "");
    expect(terminationMessage(facts())).toBe("");
  });

  test("FallbackToLogsOnError: an empty file and a failure give the log's tail; success or a written file do not", () => {
    writeFileSync(join(root, "msg"), "");
    writeFileSync(join(root, "0.log"), criLine("out") + criLine("err", "stderr") + criLine("par", "stdout", "P") + criLine("tial"));
    expect(terminationMessage(facts({ terminationMessagePolicy: "FallbackToLogsOnError" }))).toBe("out\nerr\npartial\n");
    expect(terminationMessage(facts({ terminationMessagePolicy: "FallbackToLogsOnError", exitCode: 0 }))).toBe("");
    writeFileSync(join(root, "msg"), "written");
    expect(terminationMessage(facts({ terminationMessagePolicy: "FallbackToLogsOnError" }))).toBe("written");
    // No termination file at all (the mount is missing): the log still answers.
    expect(terminationMessage(facts({ terminationMessagePolicy: "FallbackToLogsOnError", mounts: [] }))).toBe("out\nerr\npartial\n");
  });

  test("FallbackToLogsOnError: a last line without a newline (tagged P at exit) is part of the message", () => {
    writeFileSync(join(root, "msg"), "");
    writeFileSync(join(root, "0.log"), criLine("DONE", "stdout", "P"));
    expect(terminationMessage(facts({ terminationMessagePolicy: "FallbackToLogsOnError" }))).toBe("DONE");
    writeFileSync(join(root, "0.log"), criLine("one") + criLine("tw", "stdout", "P") + criLine("o", "stderr", "P"));
    expect(lastLogLines(join(root, "0.log"))).toBe("one\ntwo");
  });

  test("the log tail is the last 80 lines, cut to the last 2048 bytes", () => {
    writeFileSync(join(root, "0.log"), Array.from({ length: 100 }, (_, i) => criLine(`line ${i}`)).join(""));
    const tail = lastLogLines(join(root, "0.log"));
    expect(tail.split("\n").filter(Boolean)).toHaveLength(80);
    expect(tail.startsWith("line 20\n")).toBe(true);
    writeFileSync(join(root, "0.log"), Array.from({ length: 10 }, (_, i) => criLine(`${i}`.repeat(500))).join(""));
    const cut = lastLogLines(join(root, "0.log"));
    expect(Buffer.byteLength(cut)).toBe(2048);
    expect(cut.endsWith("9".repeat(500) + "\n")).toBe(true);
    expect(lastLogLines(join(root, "missing.log"))).toBe("");
  });

  test("the runtime's own message comes first", () => {
    writeFileSync(join(root, "msg"), "bye");
    expect(terminationMessage(facts({ runtimeMessage: "failed to start" }))).toBe("failed to start: bye");
    expect(terminationMessage(facts({ runtimeMessage: "failed to start", mounts: [] }))).toBe("failed to start");
  });
});
