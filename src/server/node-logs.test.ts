import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodeLogsApp, resolveNodeLogPath } from "./node-logs.ts";

let base: string;
let root: string;
beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), "nodelogs-"));
  root = join(base, "var-log");
  mkdirSync(join(root, "apt"), { recursive: true });
  writeFileSync(join(root, "syslog"), "line one\nline two\n");
  writeFileSync(join(root, "apt", "history.log"), "installed\n");
  writeFileSync(join(base, "secret"), "outside\n");
  symlinkSync(join(base, "secret"), join(root, "escape"));
  symlinkSync("/", join(root, "rootlink"));
  symlinkSync(join(root, "syslog"), join(root, "inside-link"));
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe("/logs/ (node log files)", () => {
  test("a directory is a listing of links, a file its bytes", async () => {
    const app = nodeLogsApp(root);
    const list = await app.request("/logs/");
    expect(list.status).toBe(200);
    expect(await list.text()).toBe(
      '<pre>\n<a href="apt/">apt/</a>\n<a href="escape">escape</a>\n<a href="inside-link">inside-link</a>\n<a href="rootlink">rootlink</a>\n<a href="syslog">syslog</a>\n</pre>\n',
    );
    expect(await (await app.request("/logs/syslog")).text()).toBe("line one\nline two\n");
    expect(await (await app.request("/logs/apt/history.log")).text()).toBe("installed\n");
    expect((await app.request("/logs/apt")).status).toBe(301);
    expect(await (await app.request("/logs/inside-link")).text()).toBe("line one\nline two\n");
  });

  test("nothing outside the directory: .. (plain or encoded) and symlinks that leave it are not found", async () => {
    const app = nodeLogsApp(root);
    for (const path of ["/logs/../secret", "/logs/%2e%2e/secret", "/logs/apt/%2E%2E/%2E%2E/secret", "/logs/escape", "/logs/rootlink/etc/passwd", "/logs/missing", "/logs/%00"]) {
      const res = await app.request(path);
      expect([path, res.status]).toEqual([path, 404]);
    }
    expect(resolveNodeLogPath(root, "apt/../../secret")).toBeUndefined();
    expect(resolveNodeLogPath(root, "syslog")).toBe(join(root, "syslog"));
  });
});
