/**
 * The program that runs inside the test VM (a real cgroup v2 kernel, see
 * scripts/vm/): runs each check of checks/index.ts in order, prints one
 * result line (protocol.ts), exits. init.sh powers the VM off afterwards.
 * Compiled with `bun build --compile` by scripts/vm/initramfs.ts.
 */
import { readFileSync } from "node:fs";
import { checks } from "./checks/index.ts";
import { numaChecks } from "./checks/numa.ts";
import { PROBE_MARKER, type CheckResult, type ProbeContext, type ProbeResult } from "./protocol.ts";

const started = performance.now();
const results: Record<string, CheckResult> = {};

const ctx: ProbeContext = {
  results,
  read: (path) => readFileSync(path, "utf8").trim(),
  async run(cmd, opts = {}) {
    const proc = Bun.spawn(cmd, { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    const timer = opts.timeoutMs ? setTimeout(() => proc.kill("SIGKILL"), opts.timeoutMs) : undefined;
    const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    await proc.exited;
    clearTimeout(timer);
    return { code: proc.exitCode, signal: proc.signalCode === null ? null : String(proc.signalCode), stdout, stderr };
  },
};

// The kernel command line picks the set: bunlet.probe=numa boots the two-NUMA-node VM (checks/numa.ts).
const cmdline = (() => {
  try {
    return readFileSync("/proc/cmdline", "utf8");
  } catch {
    return "";
  }
})();
for (const check of /\bbunlet\.probe=numa\b/.test(cmdline) ? numaChecks : checks) {
  const t0 = performance.now();
  try {
    const value = await check.run(ctx);
    results[check.name] = { ok: true, ms: Math.round(performance.now() - t0), value: value ?? null };
  } catch (e) {
    results[check.name] = { ok: false, ms: Math.round(performance.now() - t0), error: e instanceof Error ? (e.stack ?? e.message) : String(e) };
  }
}

const kernel = (() => {
  try {
    return readFileSync("/proc/sys/kernel/osrelease", "utf8").trim();
  } catch {
    return "unknown";
  }
})();
const result: ProbeResult = { kernel, ms: Math.round(performance.now() - started), checks: results };
process.stdout.write(`\n${PROBE_MARKER} ${JSON.stringify(result)}\n`);
