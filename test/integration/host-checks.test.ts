/**
 * Startup checks against the real host: failSwapOn with a swapfile really
 * enabled (and off again at once), failCgroupV1 on this cgroup v1 host. The
 * agent must refuse before touching the runtime, with a message naming the
 * setting. The swapfile is 16 MiB and on for the few seconds the agent
 * takes to start and refuse.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "bunlet-host-checks-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function startAgent(config: Record<string, unknown>, killAfterMs = 30_000, env?: Record<string, string>): Promise<{ code: number; stderr: string }> {
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
  const proc = Bun.spawn([...cmd, `--config=${file}`, `--root-dir=${join(dir, "root")}`, "--hostname-override=host-checks"], {
    stdout: "pipe",
    stderr: "pipe",
    ...(env ? { env: { ...process.env, ...env } } : {}),
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

test("makeIPTablesUtilChains (the default) with no iptables binary on PATH: refused by name; off: past the check", async () => {
  // /usr/sbin and /sbin hold iptables here: a PATH without them.
  const noSbin = { PATH: "/usr/bin:/bin" };
  const refused = await startAgent({ failSwapOn: false }, 30_000, noSbin);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain("kubelet: makeIPTablesUtilChains: true (the default) needs the iptables binary");
  const allowed = await startAgent({ failSwapOn: false, makeIPTablesUtilChains: false }, 4000, noSbin);
  expect(allowed.stderr).toContain("starting node agent");
  expect(allowed.stderr).not.toContain("makeIPTablesUtilChains");
}, 60_000);
