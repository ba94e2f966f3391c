// The cgroup driver the runtime reports over CRI (RuntimeConfig) against the
// one the config file names: the agent process itself, talking gRPC to a CRI
// endpoint that answers as containerd 2.x does (FakeCri behind serveCri),
// exits 2 naming both when they differ. containerd 1.6 answers Unimplemented
// (the config decides): that side runs in every containerd test, and in the
// systemd VM (systemd-node-vm.test.ts) with cgroupDriver: systemd.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { FakeCri } from "../../src/cri/fake.ts";
import { serveCri, type CriGrpcServer } from "../../src/cri/grpc-server.ts";
import { FakeClock } from "../../src/util/clock.ts";
import { sysctlSandbox } from "../harness/agent.ts";

const repoRoot = resolve(import.meta.dir, "../..");
let dir: string;
let server: CriGrpcServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "cgdriver-it-"));
  server = await serveCri(new FakeCri({ clock: new FakeClock(), cgroupDriver: "systemd", images: ["localhost/bunlet/pause:1.0"] }), join(dir, "cri.sock"));
});
afterAll(() => {
  server.kill();
  rmSync(dir, { recursive: true, force: true });
});

async function agent(config: string): Promise<{ code: number | null; stderr: string }> {
  const file = join(dir, `kubelet-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(
    file,
    `apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerRuntimeEndpoint: ${server.endpoint}\nreadOnlyPort: 0\nport: 0\nmakeIPTablesUtilChains: false\n${config}`,
  );
  const proc = Bun.spawn([process.execPath, join(repoRoot, "src/main.ts"), `--config=${file}`, `--root-dir=${join(dir, "root")}`, "--hostname-override=n1"], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...sysctlSandbox(dir) },
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
  const [, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stderr };
}

describe("cgroup driver from the runtime (RuntimeConfig)", () => {
  test("the config file says cgroupfs, the runtime says systemd: exit 2 naming both", async () => {
    const r = await agent("cgroupDriver: cgroupfs\n");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('kubelet: cgroupDriver is "cgroupfs" in the kubelet configuration but the container runtime reports cgroup driver "systemd"');
  }, 40_000);
});

describe("singleProcessOOMKill against the host's cgroup version", () => {
  test("false on a cgroup v1 host: exit 2 with upstream's message (cgroup v1 has no memory.oom.group)", async () => {
    const v2 = existsSync("/sys/fs/cgroup/cgroup.controllers");
    const r = await agent("singleProcessOOMKill: false\ncgroupDriver: systemd\n");
    if (v2) {
      // On v2 the setting is valid; the agent gets past the host checks (it may stop later for other reasons of this fake node).
      expect(r.stderr).not.toContain("singleProcessOOMKill");
    } else {
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1");
    }
  }, 40_000);
});
