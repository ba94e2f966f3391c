import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

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
