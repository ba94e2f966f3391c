// The release binaries as a user gets them: built for every target with
// SHA256SUMS, the arm64 one run under qemu-user-static (with Debian's arm64
// glibc), the musl ones checked for what they need from Alpine, and
// `kubelet install` / `uninstall` done by the compiled binary itself.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const repoRoot = resolve(import.meta.dir, "../..");
let out: string;

const run = (argv: string[], opts: { cwd?: string } = {}) => {
  const r = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe", ...(opts.cwd ? { cwd: opts.cwd } : {}) });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
};
const arm64 = (...args: string[]) => run(["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu", join(out, "kubelet-linux-arm64"), ...args]);

beforeAll(() => {
  out = mkdtempSync(join(tmpdir(), "release-"));
  const r = run([process.execPath, join(repoRoot, "scripts/build-release.ts"), `--outdir=${out}`, "--version=9.9.9-test"], { cwd: repoRoot });
  if (r.code !== 0) throw new Error(`build-release failed: ${r.stderr}${r.stdout}`);
}, 300_000);

afterAll(() => rmSync(out, { recursive: true, force: true }));

describe("release binaries", () => {
  test("four binaries with SHA256SUMS that sha256sum verifies", () => {
    const sums = readFileSync(join(out, "SHA256SUMS"), "utf8").trim().split("\n");
    expect(sums.map((l) => l.split("  ")[1])).toEqual(["kubelet-linux-x64", "kubelet-linux-arm64", "kubelet-linux-x64-musl", "kubelet-linux-arm64-musl"]);
    const check = run(["sha256sum", "-c", "SHA256SUMS"], { cwd: out });
    expect(check.code).toBe(0);
    expect(
      check.stdout
        .trim()
        .split("\n")
        .every((l) => l.endsWith(": OK")),
    ).toBe(true);
  });

  test("x64 and arm64 (under qemu) print the version and help from an empty directory", () => {
    expect(run([join(out, "kubelet-linux-x64"), "--version"], { cwd: "/" }).stdout).toBe("Kubernetes v1.34.0-bunlet+9.9.9-test\n");
    const version = arm64("--version");
    expect(version.code).toBe(0);
    expect(version.stdout).toBe("Kubernetes v1.34.0-bunlet+9.9.9-test\n");
    const help = arm64("--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--bootstrap-kubeconfig");
  }, 60_000);

  test("arm64 validates a config file as x64 does: a bad field is exit 2 naming it", () => {
    const dir = mkdtempSync(join(tmpdir(), "cfg-"));
    writeFileSync(join(dir, "bad.yaml"), "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: lots\n");
    const r = arm64(`--config=${join(dir, "bad.yaml")}`);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("maxPods");
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  test("musl binaries are for Alpine's loader and need only its libstdc++ besides libc (documented)", () => {
    for (const [file, loader] of [
      ["kubelet-linux-x64-musl", "ld-musl-x86_64.so.1"],
      ["kubelet-linux-arm64-musl", "ld-musl-aarch64.so.1"],
    ] as const) {
      const headers = run(["readelf", "-l", "-d", join(out, file)]).stdout;
      expect(headers).toContain(`[Requesting program interpreter: /lib/${loader}]`);
      const needed = [...headers.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]).sort();
      expect(needed.filter((n) => !/^libc\.musl-|^libstdc\+\+|^libgcc_s/.test(n!))).toEqual([]);
    }
  });

  test("the compiled binary installs itself below a prefix, idempotently, and uninstalls", () => {
    const prefix = mkdtempSync(join(tmpdir(), "prefix-"));
    const bin = join(out, "kubelet-linux-x64");
    const dry = run([bin, "install", "--prefix", prefix, "--dry-run"]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`would write ${prefix}/usr/bin/kubelet (the kubelet binary)`);
    expect(existsSync(join(prefix, "usr/bin/kubelet"))).toBe(false);
    expect(run([bin, "install", "--prefix", prefix]).code).toBe(0);
    expect(statSync(join(prefix, "var/lib")).mode & 0o777).toBe(0o755);
    expect(statSync(join(prefix, "var/lib/kubelet")).mode & 0o777).toBe(0o700);
    expect(Bun.hash(readFileSync(join(prefix, "usr/bin/kubelet")))).toBe(Bun.hash(readFileSync(bin)));
    // The installed binary runs and takes the installed config.
    expect(run([join(prefix, "usr/bin/kubelet"), "--version"]).code).toBe(0);
    const again = run([bin, "install", `--prefix=${prefix}`]);
    expect(again.stdout.trim().split("\n").at(-1)).toBe("nothing to do: already installed");
    expect(run([bin, "uninstall", `--prefix=${prefix}`]).code).toBe(0);
    expect(existsSync(join(prefix, "usr/bin/kubelet"))).toBe(false);
    expect(existsSync(join(prefix, "etc/systemd/system/kubelet.service"))).toBe(false);
    rmSync(prefix, { recursive: true, force: true });
  }, 60_000);
});
