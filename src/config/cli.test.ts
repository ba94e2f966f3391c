/**
 * The CLI entry end to end: spawns `bun src/main.ts` and checks output and
 * exit codes (0 for --help and --version, 2 for a bad flag).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../main.ts", import.meta.url));

/**
 * A directory holding the host's kernel tunables, for BUNLET_SYSCTL_ROOT: an
 * agent started here with protectKernelDefaults false writes upstream's values
 * there, not into the shared test machine's /proc/sys.
 */
function sysctlSandbox(): { BUNLET_SYSCTL_ROOT: string } {
  const root = mkdtempSync(join(tmpdir(), "cli-sysctl-"));
  for (const flag of ["vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"]) {
    mkdirSync(join(root, dirname(flag)), { recursive: true });
    writeFileSync(join(root, flag), readFileSync(join("/proc/sys", flag), "utf8"));
  }
  return { BUNLET_SYSCTL_ROOT: root };
}
const SYSCTL = sysctlSandbox();
afterAll(() => rmSync(SYSCTL.BUNLET_SYSCTL_ROOT, { recursive: true, force: true }));

async function kubelet(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, MAIN, ...args], { stdout: "pipe", stderr: "pipe", env: { ...process.env, ...SYSCTL } });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/** Starts `bun src/main.ts` against an absent runtime; resolves once it logged "starting node agent" (stderr up to there). */
async function startAgentProcess(args: string[], env?: Record<string, string | undefined>) {
  const proc = Bun.spawn([process.execPath, MAIN, "--container-runtime-endpoint=unix:///nonexistent/cri.sock", "--healthz-port=0", "--hostname-override=cli-test", ...args], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...(env ?? process.env), ...SYSCTL },
  });
  const decoder = new TextDecoder();
  let stderr = "";
  for await (const chunk of proc.stderr) {
    stderr += decoder.decode(chunk);
    if (stderr.includes("starting node agent")) break; // closes the pipe
  }
  return { proc, stderr };
}

describe("bun src/main.ts", () => {
  test("--version prints the version and exits 0", async () => {
    const r = await kubelet("--version");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Kubernetes v1\.34\.0-bunlet\+[0-9A-Za-z.-]+\n$/);
  });

  test("--help prints grouped usage with defaults and exits 0", async () => {
    const r = await kubelet("--help");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage:\n  kubelet [flags]");
    expect(r.stdout).toContain("Kubelet server and authentication flags:");
    expect(r.stdout).toContain("(default 10250; config: port)");
  });

  test("--help lists the subcommands, every line within 100 columns", async () => {
    const r = await kubelet("--help");
    expect(r.stdout).toContain("\n  kubelet install [--dry-run] [--prefix DIR] ");
    expect(r.stdout).toContain("\n  kubelet uninstall [--dry-run] [--prefix DIR] ");
    const long = r.stdout.split("\n").filter((l) => l.length > 100);
    expect(long).toEqual([]);
  });

  test("an argument that is not a flag is exit 2 with a message naming the subcommands", async () => {
    const r = await kubelet("instal");
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('kubelet: unexpected argument "instal": the kubelet takes flags, and the subcommands install and uninstall as its first argument (kubelet --help)\n');
  });

  test("install --help and a bad install argument print install's usage, with --prefix DIR", async () => {
    const help = await kubelet("install", "--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("usage: kubelet install [--dry-run] [--prefix DIR]");
    expect(help.stdout.split("\n").filter((l) => l.length > 100)).toEqual([]);
    const bad = await kubelet("uninstall", "--prefix");
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe("kubelet uninstall: flag --prefix needs a value (DIR)\n");
  });

  test("a bad flag prints `kubelet: <message>` on stderr and exits 2", async () => {
    const r = await kubelet("--max-pods=many");
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe('kubelet: flag --max-pods: expected an integer (int32), got "many"\n');
  });

  test("a YAML syntax error in the config file exits 2 with its line and column", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cli-yaml-"));
    const file = join(dir, "kubelet.yaml");
    writeFileSync(file, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  anonymous:\n    enabled: false\n   webhook:\n");
    const r = await kubelet(`--config=${file}`);
    rmSync(dir, { recursive: true, force: true });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`kubelet: config file ${file}: invalid YAML at line 6, column 4: bad indentation of a mapping entry\n`);
  });

  test("a missing config file exits 2 naming the path", async () => {
    const r = await kubelet("--config=/nonexistent/kubelet.yaml");
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("kubelet: config file /nonexistent/kubelet.yaml: no such file\n");
  });

  test("run: SIGTERM stops the agent and exits 0", async () => {
    const { proc, stderr } = await startAgentProcess(["--read-only-port=0"]);
    expect(stderr).toContain("node=cli-test");
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
  }, 20_000);

  test("run: the agent replaces itself once (same PID) with JavaScriptCore's JIT off; an operator's setting is kept", async () => {
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^BUN_JSC_use\w*JIT$/.test(k)));
    const startAndReadEnv = async (env: Record<string, string>) => {
      const { proc } = await startAgentProcess(["--read-only-port=0"], { ...inherited, ...env });
      const environ = (await Bun.file(`/proc/${proc.pid}/environ`).text()).split("\0");
      proc.kill("SIGTERM");
      expect(await proc.exited).toBe(0);
      return environ.filter((e) => e.startsWith("BUN_JSC_use"));
    };
    expect(await startAndReadEnv({})).toEqual(["BUN_JSC_useJIT=0"]);
    expect(await startAndReadEnv({ BUN_JSC_useJIT: "1" })).toEqual(["BUN_JSC_useJIT=1"]);
  }, 20_000);

  test("run: a closed log pipe does not stop the agent", async () => {
    // The agent keeps logging (the runtime is unreachable) after its reader went away.
    const { proc } = await startAgentProcess(["--v=5"]);
    await Bun.sleep(2500);
    expect(proc.exitCode).toBeNull();
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
  }, 20_000);
});
