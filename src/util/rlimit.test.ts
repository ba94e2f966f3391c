import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { applyOpenFileLimit, parseOpenFileLimit } from "./rlimit.ts";

/** Whether this process may raise a hard limit: CAP_SYS_RESOURCE (bit 24) in its effective capabilities. */
const capSysResource = () => (BigInt(`0x${/CapEff:\s*([0-9a-f]+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1] ?? "0"}`) >> 24n) & 1n;

// In a child process: the limit set there must not shrink the test runner's own.
test("setOpenFileLimit sets the soft and hard RLIMIT_NOFILE of the process; raising the hard limit without CAP_SYS_RESOURCE fails with EPERM", () => {
  const script = `
    import { setOpenFileLimit } from ${JSON.stringify(join(import.meta.dir, "rlimit.ts"))};
    import { readFileSync } from "node:fs";
    setOpenFileLimit(1234);
    console.log(readFileSync("/proc/self/limits", "utf8").split("\\n").find((l) => l.startsWith("Max open files")));
    try { setOpenFileLimit(1235); console.log("raised"); } catch (e) { console.log(String(e)); }
  `;
  const r = Bun.spawnSync([process.execPath, "-e", script]);
  const out = r.stdout.toString().split("\n");
  expect(out[0]).toMatch(/^Max open files\s+1234\s+1234\s+files/);
  if (capSysResource()) expect(out[1]).toBe("raised");
  else expect(out[1]).toBe("Error: setrlimit(RLIMIT_NOFILE, 1235) failed: EPERM (raising the hard limit needs CAP_SYS_RESOURCE)");
});

test("setOpenFileLimit under BUN_JSC_useJIT=0 (how the agent runs) fails: bun:ffi needs the JIT, which is why main sets the limit before its execve", () => {
  const script = `
    import { setOpenFileLimit } from ${JSON.stringify(join(import.meta.dir, "rlimit.ts"))};
    try { setOpenFileLimit(1234); console.log("set"); } catch (e) { console.log(String(e)); }
  `;
  const r = Bun.spawnSync([process.execPath, "-e", script], { env: { ...process.env, BUN_JSC_useJIT: "0" } });
  expect(r.stdout.toString()).toContain("requires the JIT");
});

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max processes             63704                63704                processes
Max open files            4096                 8192                 files
Max locked memory         8388608              8388608              bytes
`;

test("parseOpenFileLimit reads soft and hard Max open files of /proc/PID/limits", () => {
  expect(parseOpenFileLimit(LIMITS)).toEqual({ soft: 4096, hard: 8192 });
  expect(parseOpenFileLimit("Max open files            unlimited            unlimited            files\n")).toEqual({
    soft: Number.POSITIVE_INFINITY,
    hard: Number.POSITIVE_INFINITY,
  });
  expect(() => parseOpenFileLimit("Max processes 1 1 processes\n")).toThrow("no Max open files line");
});

test("applyOpenFileLimit: with the JIT it sets; without, it reports the failure inherited across the execve, or checks the limit", () => {
  const set: number[] = [];
  const deps = { jit: true, set: (n: number) => void set.push(n), inheritedError: undefined, limits: () => LIMITS };
  applyOpenFileLimit(4096, deps);
  expect(set).toEqual([4096]);
  const noJit = { ...deps, jit: false };
  expect(() => applyOpenFileLimit(4096, { ...noJit, inheritedError: "setrlimit(RLIMIT_NOFILE, 4096) failed: EPERM" })).toThrow("setrlimit(RLIMIT_NOFILE, 4096) failed: EPERM");
  const both = LIMITS.replace("4096                 8192", "8192                 8192");
  expect(() => applyOpenFileLimit(8192, { ...noJit, limits: () => both })).not.toThrow();
  expect(() => applyOpenFileLimit(4096, noJit)).toThrow("the JIT was turned off outside the agent (BUN_JSC_useJIT); the limit stays soft 4096, hard 8192");
  expect(set).toEqual([4096]);
});
