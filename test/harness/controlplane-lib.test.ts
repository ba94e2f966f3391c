// scripts/controlplane/lib.sh's start_component, in bash: a component is
// recognised as running as soon as start_component returns, even when the
// child needed time before its exec (the race behind one CI run's
// "kube-apiserver exited" with an empty log).
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const lib = resolve(import.meta.dir, "../../scripts/controlplane/lib.sh");
const root = mkdtempSync(join(tmpdir(), "cp-lib-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

test("start_component returns only once the child runs as the component: running_pid finds it at once", async () => {
  const dir = join(root, "cp");
  const bin = join(root, "bin");
  mkdirSync(dir);
  mkdirSync(bin);
  // No exec: the process keeps its own command line, as a real component does.
  writeFileSync(join(bin, "fake-component"), "#!/bin/sh\ntrap 'exit 0' TERM\nwhile :; do sleep 0.1; done\n", { mode: 0o755 });
  writeFileSync(join(dir, "fake-component.args"), `--dir=${dir}/x\n`);
  // A setsid that takes 0.5 s before its exec: the background child stays this shell (its cmdline bash's) that long,
  // the window a loaded machine opens by chance.
  const script = `
    set -euo pipefail
    source ${JSON.stringify(lib)}
    setsid() { sleep 0.5; exec /usr/bin/setsid "$@"; }
    start_component ${JSON.stringify(dir)} ${JSON.stringify(bin)} fake-component
    if running_pid ${JSON.stringify(dir)} fake-component >/dev/null; then echo running; else echo "not running"; fi
    kill "$(cat ${JSON.stringify(join(dir, "fake-component.pid"))})"
  `;
  const proc = Bun.spawn(["bash", "-c", script], { stdout: "pipe", stderr: "pipe" });
  const [out, err] = [await new Response(proc.stdout).text(), await new Response(proc.stderr).text()];
  expect(await proc.exited, err).toBe(0);
  expect(out.trim()).toBe("running");
});
