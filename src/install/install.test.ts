import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../config/index.ts";
import { runInstallCommand, type InstallDeps } from "./index.ts";
import { CONFIG, PATHS, planInstall, planUninstall, type DiskView } from "./plan.ts";

function setup(opts: { systemd?: boolean } = {}) {
  const prefix = mkdtempSync(join(tmpdir(), "install-"));
  const exe = join(prefix, "..", `${prefix.split("/").pop()}-kubelet`);
  writeFileSync(exe, "binary v1");
  const lines: string[] = [];
  const runs: string[][] = [];
  const deps: InstallDeps = {
    executable: exe,
    out: (l) => lines.push(l),
    systemdPresent: () => opts.systemd ?? false,
    run: (argv) => (runs.push(argv), { status: 0, stderr: "" }),
  };
  return { prefix, exe, lines, runs, deps, at: (p: string) => join(prefix, p) };
}

describe("kubelet install / uninstall", () => {
  test("install writes the binary, unit, flags file, config and directories, with their modes; the config loads", () => {
    const s = setup();
    expect(runInstallCommand("install", [`--prefix=${s.prefix}`], s.deps)).toBe(0);
    expect(readFileSync(s.at(PATHS.binary), "utf8")).toBe("binary v1");
    expect(statSync(s.at(PATHS.binary)).mode & 0o777).toBe(0o755);
    expect(readFileSync(s.at(PATHS.unit), "utf8")).toContain("ExecStart=/usr/bin/kubelet --config=/etc/kubernetes/kubelet.yaml $KUBELET_ARGS");
    expect(statSync(s.at(PATHS.rootDir)).mode & 0o777).toBe(0o700);
    for (const d of [PATHS.manifests, PATHS.certDir, PATHS.podLogs]) expect(statSync(s.at(d)).isDirectory()).toBe(true);
    expect(s.lines).toContain(`write ${s.at(PATHS.unit)} (the systemd unit)`);
    const loaded = loadConfig([`--config=${s.at(PATHS.config)}`], { readFile: (p) => readFileSync(p), hostname: () => "n1", env: {} });
    expect(loaded.kind).toBe("run");
  });

  test("a second install changes nothing; a new binary is replaced; an edited config is kept", () => {
    const s = setup();
    runInstallCommand("install", [`--prefix=${s.prefix}`], s.deps);
    s.lines.length = 0;
    expect(runInstallCommand("install", [`--prefix=${s.prefix}`], s.deps)).toBe(0);
    expect(s.lines.at(-1)).toBe("nothing to do: already installed");
    writeFileSync(s.exe, "binary v2");
    writeFileSync(s.at(PATHS.config), CONFIG + "maxPods: 50\n");
    s.lines.length = 0;
    runInstallCommand("install", [`--prefix=${s.prefix}`], s.deps);
    expect(readFileSync(s.at(PATHS.binary), "utf8")).toBe("binary v2");
    expect(s.lines).toContain(`write ${s.at(PATHS.binary)} (the kubelet binary: updated)`);
    expect(s.lines).toContain(`keep ${s.at(PATHS.config)} (the default config file: exists and was edited; left as it is)`);
    expect(readFileSync(s.at(PATHS.config), "utf8")).toContain("maxPods: 50");
  });

  test("--dry-run prints the plan with the paths below the prefix and writes nothing", () => {
    const s = setup();
    expect(runInstallCommand("install", [`--prefix=${s.prefix}`, "--dry-run"], s.deps)).toBe(0);
    expect(s.lines).toContain(`would write ${s.prefix}/usr/bin/kubelet (the kubelet binary)`);
    expect(s.lines).toContain(`would create directory ${s.prefix}/var/lib/kubelet (700)`);
    // Every path printed is below the prefix.
    const paths = s.lines.map((l) => /^(?:would (?:write|create directory)) (\S+)/.exec(l)?.[1]).filter((p) => p !== undefined);
    expect(paths.length).toBeGreaterThan(5);
    for (const p of paths) expect(p).toStartWith(`${s.prefix}/`);
    expect(existsSync(s.at(PATHS.binary))).toBe(false);
    expect(existsSync(s.at("/etc"))).toBe(false);
  });

  test("--prefix DIR (space form) works as --prefix=DIR does; without a value it is exit 2", () => {
    const s = setup();
    expect(runInstallCommand("install", ["--prefix", s.prefix, "--dry-run"], s.deps)).toBe(0);
    expect(s.lines).toContain(`would write ${s.prefix}/usr/bin/kubelet (the kubelet binary)`);
    expect(runInstallCommand("install", ["--dry-run", "--prefix", s.prefix], s.deps)).toBe(0);
    expect(runInstallCommand("install", ["--prefix", s.prefix], s.deps)).toBe(0);
    expect(readFileSync(s.at(PATHS.binary), "utf8")).toBe("binary v1");
    expect(runInstallCommand("uninstall", ["--prefix", s.prefix], s.deps)).toBe(0);
    expect(existsSync(s.at(PATHS.binary))).toBe(false);
    expect(runInstallCommand("install", ["--prefix"], s.deps)).toBe(2);
    expect(s.lines.at(-1)).toBe("kubelet install: flag --prefix needs a value (DIR)");
  });

  test("directories: only the kubelet's own are restrictive; the parents it creates are ordinary 0755", () => {
    const s = setup();
    const old = process.umask(0o077); // a strict umask must not leak into /var or /etc either
    try {
      expect(runInstallCommand("install", ["--prefix", s.prefix], s.deps)).toBe(0);
    } finally {
      process.umask(old);
    }
    const mode = (p: string) => statSync(s.at(p)).mode & 0o777;
    for (const d of ["/var", "/var/lib", "/var/log", "/etc", "/etc/kubernetes", "/usr", "/usr/bin", "/etc/systemd/system"]) expect([d, mode(d)]).toEqual([d, 0o755]);
    expect(mode(PATHS.rootDir)).toBe(0o700);
    expect(mode(PATHS.certDir)).toBe(0o700);
    expect(mode(PATHS.manifests)).toBe(0o755);
    expect(mode(PATHS.podLogs)).toBe(0o755);
  });

  test("uninstall removes what install wrote, keeps an edited config and node data", () => {
    const s = setup();
    runInstallCommand("install", [`--prefix=${s.prefix}`], s.deps);
    writeFileSync(s.at(PATHS.config), CONFIG + "maxPods: 50\n");
    mkdirSync(s.at("/var/lib/kubelet/pods/u1"), { recursive: true });
    s.lines.length = 0;
    expect(runInstallCommand("uninstall", [`--prefix=${s.prefix}`], s.deps)).toBe(0);
    for (const p of [PATHS.binary, PATHS.unit, PATHS.defaults]) expect(existsSync(s.at(p))).toBe(false);
    expect(existsSync(s.at(PATHS.config))).toBe(true);
    expect(existsSync(s.at("/var/lib/kubelet/pods/u1"))).toBe(true);
    expect(s.lines).toContain(`keep ${s.at(PATHS.rootDir)} (node data (pods, certificates, logs, manifests))`);
    s.lines.length = 0;
    runInstallCommand("uninstall", [`--prefix=${s.prefix}`], s.deps);
    expect(s.lines.filter((l) => !l.startsWith("keep"))).toEqual(["nothing to do: already uninstalled"]);
  });

  test("with systemd on /: daemon-reload after a new unit, disable --now before removing it", () => {
    const disk: DiskView = { read: () => undefined, isDir: () => false };
    const steps = planInstall(disk, { prefix: "/", binary: new Uint8Array([1]), systemd: true });
    expect(steps.at(-1)).toEqual({ kind: "run", argv: ["systemctl", "daemon-reload"], why: "systemd reads the new unit" });
    const installed: DiskView = { read: (p) => (p === PATHS.unit || p === PATHS.binary ? new Uint8Array([1]) : undefined), isDir: () => false };
    const removal = planUninstall(installed, { systemd: true }).filter((s) => s.kind !== "keep");
    expect(removal.map((s) => (s.kind === "run" ? s.argv.join(" ") : `${s.kind} ${s.path}`))).toEqual([
      "systemctl disable --now kubelet.service",
      `remove ${PATHS.binary}`,
      `remove ${PATHS.unit}`,
      "systemctl daemon-reload",
    ]);
  });

  test("bad usage is exit 2 with the reason; install from source is refused", () => {
    const s = setup();
    expect(runInstallCommand("install", ["--prefix=relative"], s.deps)).toBe(2);
    expect(s.lines.at(-1)).toBe("kubelet install: --prefix must be an absolute path");
    expect(runInstallCommand("install", ["--force"], s.deps)).toBe(2);
    expect(s.lines.at(-1)).toStartWith('kubelet install: unknown argument "--force"');
    expect(runInstallCommand("install", [], { ...s.deps, executable: undefined })).toBe(2);
    expect(s.lines.at(-1)).toContain("run it from the compiled binary");
  });
});
