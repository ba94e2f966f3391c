import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeMounter } from "./mount.ts";
import { prepareSubPath, safeMakeDir, safeOpen, SubPathError } from "./subpath.ts";
import { closeSync } from "node:fs";

let root: string;
let vol: string;
let mounter: FakeMounter;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "subpath-"));
  vol = join(root, "vol");
  mkdirSync(join(vol, "data/inner"), { recursive: true });
  writeFileSync(join(vol, "data/file"), "x");
  mkdirSync(join(root, "outside"));
  mounter = new FakeMounter();
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const prepare = (subPath: string, target = join(root, "subpaths/0")) => prepareSubPath({ volumePath: vol, subPath, target, mounter, pid: 4242 });

describe("prepareSubPath", () => {
  test("a directory inside the volume is bind-mounted from an open descriptor onto the target", async () => {
    const target = await prepare("data/inner");
    expect(statSync(target).isDirectory()).toBe(true);
    const m = mounter.mounts.get(target);
    expect(m?.kind).toBe("bind");
    expect((m as { source: string }).source).toMatch(/^\/proc\/4242\/fd\/\d+$/);
  });

  test("a file subPath gets a file target", async () => {
    const target = await prepare("data/file");
    expect(statSync(target).isFile()).toBe(true);
  });

  test("missing directories are made inside the volume", async () => {
    await prepare("new/deeper");
    expect(statSync(join(vol, "new/deeper")).isDirectory()).toBe(true);
  });

  test("symlinks that stay inside the volume are followed", async () => {
    symlinkSync("data/inner", join(vol, "alias"));
    await prepare("alias");
    expect(mounter.mounts.size).toBe(1);
  });

  test("a symlink to / or out of the volume is refused (CVE-2017-1002101), nothing is mounted or made outside", async () => {
    symlinkSync("/", join(vol, "root"));
    symlinkSync(join(root, "outside"), join(vol, "out"));
    symlinkSync("../outside", join(vol, "rel"));
    for (const sub of ["root", "out", "rel", "out/made-through-link", "root/etc"]) {
      let error: unknown;
      try {
        await prepare(sub);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(SubPathError);
    }
    expect(mounter.mounts.size).toBe(0);
    expect(existsSync(join(root, "outside/made-through-link"))).toBe(false);
  });

  test("a stale bind mount on the target is replaced, so every start checks again", async () => {
    const target = await prepare("data/inner");
    await prepare("data/inner", target);
    expect(mounter.calls.filter((c) => c.startsWith("unmount"))).toEqual([`unmount ${target}`]);
    expect(mounter.mounts.size).toBe(1);
  });

  test("safeOpen refuses a symlink component even when it points inside (a swap after the check)", () => {
    symlinkSync("data", join(vol, "swapped"));
    expect(() => safeOpen(join(vol, "swapped/inner"), vol)).toThrow(SubPathError);
    const fd = safeOpen(join(vol, "data/inner"), vol);
    expect(readlinkSync(`/proc/self/fd/${fd}`)).toBe(join(vol, "data/inner"));
    closeSync(fd);
  });

  test("safeMakeDir does not create through a link leaving the base", () => {
    symlinkSync(join(root, "outside"), join(vol, "link"));
    expect(() => safeMakeDir(vol, "link/x", 0o755)).toThrow(SubPathError);
    expect(existsSync(join(root, "outside/x"))).toBe(false);
  });
});
