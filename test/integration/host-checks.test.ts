/**
 * Startup checks against the real host: failSwapOn with a swapfile really
 * enabled (and off again at once), failCgroupV1 on this cgroup v1 host. The
 * agent must refuse before touching the runtime, with a message naming the
 * setting. The swapfile is 16 MiB and on for the few seconds the agent
 * takes to start and refuse. protectKernelDefaults reads and writes the
 * tunables in a directory BUNLET_SYSCTL_ROOT names, so the host's kernel
 * settings are not changed.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { sysctlSandbox } from "../harness/agent.ts";

const dir = mkdtempSync(join(tmpdir(), "bunlet-host-checks-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function startAgent(
  config: Record<string, unknown>,
  killAfterMs = 30_000,
  env?: Record<string, string>,
  wrap: (argv: string[]) => string[] = (argv) => argv,
): Promise<{ code: number; stderr: string }> {
  const file = join(dir, `kubelet-${Math.random().toString(36).slice(2)}.json`);
  // Nothing listens there: a check that let the agent through would fail later, on the runtime, with another message.
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      containerRuntimeEndpoint: `unix://${dir}/none.sock`,
      healthzPort: 0,
      enableServer: false,
      ...config,
    }),
  );
  const cmd = process.env.BUNLET_BINARY ? [process.env.BUNLET_BINARY] : [process.execPath, join(import.meta.dir, "../../src/main.ts")];
  const proc = Bun.spawn(wrap([...cmd, `--config=${file}`, `--root-dir=${join(dir, "root")}`, "--hostname-override=host-checks"]), {
    stdout: "pipe",
    stderr: "pipe",
    // The host's kernel tunables are never written: protectKernelDefaults false would (harness/agent.ts sysctlSandbox).
    env: { ...process.env, ...sysctlSandbox(dir), ...env },
  });
  const timer = setTimeout(() => proc.kill(), killAfterMs);
  const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  clearTimeout(timer);
  return { code, stderr };
}

async function run(cmd: string[]): Promise<void> {
  const p = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe" });
  if ((await p.exited) !== 0) throw new Error(`${cmd.join(" ")}: ${await new Response(p.stderr).text()}`);
}

test("failSwapOn: with a swapfile on, the agent refuses to start and names it; failSwapOn false lets it past the check", async () => {
  const swapfile = join(dir, "swapfile");
  await run(["dd", "if=/dev/zero", `of=${swapfile}`, "bs=1M", "count=16", "status=none"]);
  await run(["chmod", "600", swapfile]);
  await run(["mkswap", swapfile]);
  await run(["swapon", swapfile]);
  let refused: { code: number; stderr: string };
  let allowed: { code: number; stderr: string };
  try {
    refused = await startAgent({ failSwapOn: true });
    allowed = await startAgent({ failSwapOn: false }, 4000);
  } finally {
    await run(["swapoff", swapfile]);
  }
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain("kubelet: running with swap on is not supported, please disable swap or set --fail-swap-on flag to false");
  expect(refused.stderr).toContain(swapfile);
  // Past the swap check, the agent goes on to the (absent) runtime: it fails there, not on swap.
  expect(allowed.stderr).toContain("starting node agent");
  expect(allowed.stderr).not.toContain("swap");
}, 90_000);

test("failCgroupV1 on this cgroup v1 host: refused by name", async () => {
  const r = await startAgent({ failCgroupV1: true, failSwapOn: false });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain("kubelet is configured to not run on a host using cgroup v1");
}, 60_000);

test('makeIPTablesUtilChains (the default) with no iptables binary on PATH: past the host checks, as upstream (the chains log "no iptables support" later: src/node/iptables-chains.test.ts)', async () => {
  // /usr/sbin and /sbin hold iptables here: a PATH without them.
  const r = await startAgent({ failSwapOn: false }, 4000, { PATH: "/usr/bin:/bin" });
  expect(r.stderr).toContain("starting node agent");
  expect(r.stderr).not.toContain("makeIPTablesUtilChains");
}, 60_000);

test("protectKernelDefaults: true refuses with upstream's message for each tunable that differs; false writes them and starts, as upstream", async () => {
  // Upstream's values, but vm/overcommit_memory and kernel/panic_on_oops as a stock kernel has them.
  const values: Record<string, number> = {
    "vm/overcommit_memory": 0,
    "vm/panic_on_oom": 0,
    "kernel/panic": 10,
    "kernel/panic_on_oops": 0,
    "kernel/keys/root_maxkeys": 1000000,
    "kernel/keys/root_maxbytes": 25000000,
  };
  const root = join(dir, "kernel-tunables");
  for (const [flag, value] of Object.entries(values)) {
    mkdirSync(join(root, dirname(flag)), { recursive: true });
    writeFileSync(join(root, flag), `${value}\n`);
  }
  const env = { BUNLET_SYSCTL_ROOT: root };
  const refused = await startAgent({ failSwapOn: false, protectKernelDefaults: true }, 30_000, env);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(
    "kubelet: [invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0, invalid kernel flag: kernel/panic_on_oops, expected value: 1, actual value: 0] (protectKernelDefaults: true, --protect-kernel-defaults",
  );
  // Refused: nothing written.
  expect(readFileSync(join(root, "vm/overcommit_memory"), "utf8")).toBe("0\n");
  const allowed = await startAgent({ failSwapOn: false }, 4000, env, (argv) => [...argv, "--v=2"]);
  expect(allowed.stderr).toContain("Updating kernel flag vm/overcommit_memory: expected value 1, actual value 0");
  expect(allowed.stderr).toContain("Updating kernel flag kernel/panic_on_oops: expected value 1, actual value 0");
  expect(allowed.stderr).toContain("starting node agent");
  expect(readFileSync(join(root, "vm/overcommit_memory"), "utf8")).toBe("1");
  expect(readFileSync(join(root, "kernel/panic_on_oops"), "utf8")).toBe("1");
  expect(readFileSync(join(root, "kernel/panic"), "utf8")).toBe("10\n");
  // Now as upstream wants them: true starts.
  const protectedStart = await startAgent({ failSwapOn: false, protectKernelDefaults: true }, 4000, env);
  expect(protectedStart.stderr).toContain("starting node agent");
}, 60_000);
