// What scripts/setup.sh installs: the demo's selection holds only what the
// demo uses (no kernel, no emulator, no cross libc, no systemd), the tests'
// selection holds the demo's and never a kernel package (the VM test's kernel
// is unpacked into the cache instead), and the demo asks for its selection.
// `--print-packages` prints a selection and installs nothing: no root needed.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

const repoRoot = resolve(import.meta.dir, "../..");
const setup = join(repoRoot, "scripts/setup.sh");

function selection(...args: string[]): string[] {
  const r = Bun.spawnSync(["bash", setup, "--print-packages", ...args], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`setup.sh --print-packages ${args.join(" ")}: ${r.stderr.toString()}`);
  return r.stdout.toString().trim().split("\n");
}

// A kernel, an emulator, a foreign libc, an init system: none is for the demo.
const NOT_FOR_THE_DEMO = [/^linux-image/, /^linux-headers/, /^qemu/, /-cross$/, /^systemd/, /^dbus/, /^python3/, /^golang/, /^protobuf/];

describe("scripts/setup.sh package selection", () => {
  test("--demo: what the demo uses, and no kernel, emulator, cross libc or systemd", () => {
    const demo = selection("--demo");
    for (const p of ["containerd", "runc", "containernetworking-plugins", "iptables", "iproute2", "busybox-static", "gcc", "libc6-dev", "curl"]) expect(demo).toContain(p);
    expect(demo.filter((p) => NOT_FOR_THE_DEMO.some((re) => re.test(p)))).toEqual([]);
  });

  test("the tests' selection is the demo's and more, and installs no kernel (the VM kernel is unpacked into the cache)", () => {
    const demo = selection("--demo");
    const tests = selection();
    for (const p of demo) expect(tests).toContain(p);
    expect(tests).toContain("qemu-system-x86");
    expect(tests).toContain("qemu-user-static");
    expect(tests.filter((p) => /^linux-image/.test(p))).toEqual([]);
  });

  test("the selection is printed, not installed, and unknown arguments are refused", () => {
    const r = Bun.spawnSync(["bash", setup, "--print-packages", "--demo"], { stdout: "pipe", stderr: "pipe" });
    expect(r.stdout.toString()).not.toContain("setup:"); // nothing of the install steps ran
    const bad = Bun.spawnSync(["bash", setup, "--nope"], { stdout: "pipe", stderr: "pipe" });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr.toString()).toContain("usage:");
  });

  test("scripts/demo.sh sets up with --demo", () => {
    expect(readFileSync(join(repoRoot, "scripts/demo.sh"), "utf8")).toMatch(/^bash scripts\/setup\.sh --demo$/m);
  });
});
