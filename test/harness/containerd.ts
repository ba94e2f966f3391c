// A private, real containerd for integration tests. The work is done by
// scripts/containerd.sh (one implementation for tests and humans); this file
// picks a directory and a cgroup parent, runs the script, and hands back what
// a test needs to point the agent at that runtime.
//
// Which containerd: BUNLET_RUNTIME=containerd2 runs containerd 2.x and runc
// built from Go modules (scripts/containerd2/build.sh, cached), anything else
// (default containerd16) Debian's 1.6 from PATH.
//
//   requireRoot();
//   const ctd = await startContainerd({ name: "pods" });
//   try { ... agent with endpoint=ctd.endpoint, cgroupRoot=ctd.cgroupParent ... }
//   finally { await ctd.stop(); }      // or: await using ctd = await startContainerd()
import { existsSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join, resolve } from "node:path";
import { cleanupAtExit } from "./exit-cleanup.ts";

/** Names the images get from scripts/images.sh (same strings as there). */
export const PAUSE_IMAGE = "localhost/bunlet/pause:1.0";
export const BUSYBOX_IMAGE = "localhost/bunlet/busybox:1.0";

const repoRoot = resolve(import.meta.dir, "../..");
const script = join(repoRoot, "scripts/containerd.sh");
const imagesDir = join(repoRoot, ".cache/images");
const cniBinDir = "/usr/lib/cni";

/** The runtime the tests run against (BUNLET_RUNTIME). */
export type RuntimeUnderTest = "containerd16" | "containerd2";
export function runtimeUnderTest(env: Record<string, string | undefined> = process.env): RuntimeUnderTest {
  const v = env["BUNLET_RUNTIME"] ?? "containerd16";
  if (v === "containerd16" || v === "containerd2") return v;
  throw new Error(`BUNLET_RUNTIME must be containerd16 or containerd2, not ${JSON.stringify(v)}`);
}

/** Where containerd 2.x's binaries are (built or not): scripts/containerd2/build.sh --bin-dir. */
function containerd2BinDir(): string {
  const r = Bun.spawnSync(["bash", join(repoRoot, "scripts/containerd2/build.sh"), "--bin-dir"], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`scripts/containerd2/build.sh --bin-dir failed: ${r.stderr.toString()}`);
  return r.stdout.toString().trim();
}

export interface ContainerdHandle {
  /** Path of containerd's gRPC socket. */
  socket: string;
  /** The CRI endpoint form of `socket`: `unix:///...`. */
  endpoint: string;
  /** Everything of this instance lives here (see scripts/containerd.sh). */
  dir: string;
  pauseImage: string;
  busyboxImage: string;
  /** The runtime this instance runs (BUNLET_RUNTIME at its start). */
  runtime: RuntimeUnderTest;
  /** The `ctr` binary of that runtime: PATH's for 1.6, the built one for 2.x
   *  (a 1.6 ctr against 2.x mixes versions a test did not mean to). */
  ctr: string;
  /**
   * The cgroup root for the agent (cgroupfs driver, path relative to each
   * hierarchy's mount): inside the test process's own memory cgroup, so
   * test workloads count against the limits of whoever runs the tests.
   */
  cgroupParent: string;
  /** Kill containerd only and start it again on the same socket and state;
   *  containers and shims keep running. */
  restart(): Promise<void>;
  /** For a failed test's report: whether containerd runs, and the last errors of its log. */
  describe(lines?: number): string;
  /** Purge: kill containerd, every container and shim of this instance,
   *  remove its network, mounts, cgroups and `dir`. Idempotent. */
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Throws one error naming everything missing for integration tests with a
 * real runtime: root, containerd/ctr/runc/shim binaries, CNI plugins,
 * iptables, and the test images (or busybox-static to build them).
 */
export function requireRoot(): void {
  const missing: string[] = [];
  if (process.getuid?.() !== 0) missing.push("root (run the tests as uid 0)");
  const runtimeBins = ["containerd", "ctr", "containerd-shim-runc-v2", "runc"];
  if (runtimeUnderTest() === "containerd2") {
    // Built on first start if missing (minutes); Go and libseccomp are needed for that.
    const bin = containerd2BinDir();
    const built = runtimeBins.every((b) => existsSync(join(bin, b)));
    if (!built && !Bun.which("go") && !existsSync("/usr/local/go/bin/go")) missing.push(`containerd 2.x in ${bin} (or Go to build it: scripts/containerd2/build.sh)`);
    runtimeBins.length = 0;
  }
  for (const bin of [...runtimeBins, "iptables", "ip"]) {
    if (!Bun.which(bin)) missing.push(`${bin} binary`);
  }
  for (const plugin of ["bridge", "host-local", "portmap", "loopback"]) {
    if (!existsSync(join(cniBinDir, plugin))) missing.push(`CNI plugin ${cniBinDir}/${plugin}`);
  }
  const imagesBuilt = ["pause.tar", "busybox.tar"].every((f) => existsSync(join(imagesDir, f)));
  if (!imagesBuilt && !existsSync("/bin/busybox")) {
    missing.push(`test images in ${imagesDir} (and /bin/busybox from busybox-static to build them)`);
  }
  if (missing.length > 0) {
    throw new Error(`integration tests need a real runtime; missing: ${missing.join(", ")}. ` + `Run scripts/setup.sh as root on Debian 12.`);
  }
}

/**
 * The cgroup this process is in, as containerd's cgroupfs driver wants it
 * (a path relative to each hierarchy's root).
 *
 * cgroup v1 (hybrid here): every controller has its own line and its own
 * path; the memory line (`4:memory:/process_api/<id>`) is the one that
 * carries a limit on these machines, while the others are `/`. There is only
 * one cgroup_parent for all hierarchies, so the memory path is used. Measured
 * with a real CRI sandbox (RunPodSandbox with cgroup_parent
 * `/process_api/<id>/bunlet-t1`, then a busybox container with a 64 MiB
 * memory limit and cpu shares) on containerd 1.6.20 + runc 1.1.5:
 * runc creates the missing directories in every v1 hierarchy (cpu, cpuacct,
 * cpuset with cpus/mems copied from the parent, memory, devices, freezer,
 * blkio, pids, name=systemd) and in the unified mount, and the container's
 * /proc/self/cgroup shows `<parent>/<container id>` in all of them; the
 * limits land in `memory/<parent>/<id>/memory.limit_in_bytes` and
 * `cpu/<parent>/<id>/cpu.shares`. So in the non-memory hierarchies the pod
 * cgroups sit at the same path below the root, which is harmless there.
 * Pure cgroup v2: the `0::` line is used.
 */
export function ownCgroup(procSelfCgroup = readFileSync("/proc/self/cgroup", "utf8")): string {
  let unified: string | undefined;
  for (const line of procSelfCgroup.split("\n")) {
    const [, controllers, path] = line.match(/^\d+:([^:]*):(.*)$/) ?? [];
    if (controllers === undefined || path === undefined) continue;
    if (controllers.split(",").includes("memory")) return path;
    if (controllers === "") unified = path;
  }
  if (unified !== undefined) return unified;
  throw new Error("cannot find the memory or unified cgroup in /proc/self/cgroup");
}

async function run(cmd: string, dir: string, env: Record<string, string> = {}): Promise<void> {
  const proc = Bun.spawn(["bash", script, cmd, dir], {
    env: { ...process.env, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  if (code !== 0) {
    throw new Error(`scripts/containerd.sh ${cmd} ${dir} exited ${code}:\n${out}${err}`);
  }
}

function describeContainerd(dir: string, lines: number): string {
  const read = (path: string) => {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return "";
    }
  };
  const pid = read(join(dir, "containerd.pid")).trim();
  // /proc/PID/stat: "pid (comm) state ..."; a zombie (Z) has exited but was not reaped yet.
  const stat = pid === "" ? "" : read(`/proc/${pid}/stat`);
  const alive = /^\d+ \(containerd\) [^Z]/.test(stat);
  const state = pid === "" ? "no pid file" : alive ? `running (pid ${pid})` : `not running (pid ${pid} exited)`;
  const problems = read(join(dir, "containerd.log"))
    .split("\n")
    .filter((l) => /level=(error|fatal|panic)|^panic:|^fatal error:/.test(l))
    .slice(-lines)
    .map((l) => l.slice(0, 400));
  return `containerd ${dir}: ${state}; the last ${problems.length} errors of its log:\n${problems.join("\n")}`;
}

/** Starts a private containerd with the test images imported (about 0.4 s warm). */
export async function startContainerd(opts: { name?: string } = {}): Promise<ContainerdHandle> {
  const name = (opts.name ?? "t")
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 20);
  // Short and under /tmp: the socket path must fit in sun_path (108 bytes).
  const id = `bunlet-${name}-${randomBytes(3).toString("hex")}`;
  const dir = `/tmp/${id}`;
  const cgroupParent = `${ownCgroup().replace(/\/$/, "")}/${id}`;
  const atExit = cleanupAtExit(dir, ["bash", script, "purge", dir]);
  try {
    await run("start", dir, { BUNLET_CGROUP_PARENT: cgroupParent });
  } catch (e) {
    await run("purge", dir).catch(() => {});
    atExit.release();
    throw e;
  }
  const socket = join(dir, "containerd.sock");
  // scripts/containerd.sh keeps the runtime it chose in DIR/runtime.env (RUNTIME=..., RUNTIME_BIN=...).
  const chosen = Object.fromEntries(
    readFileSync(join(dir, "runtime.env"), "utf8")
      .trim()
      .split("\n")
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
  const runtime = runtimeUnderTest({ BUNLET_RUNTIME: chosen["RUNTIME"] });
  const ctr = chosen["RUNTIME_BIN"] ? join(chosen["RUNTIME_BIN"], "ctr") : "ctr";
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= run("purge", dir).then(() => {
      atExit.release();
    }));
  return {
    socket,
    endpoint: `unix://${socket}`,
    dir,
    pauseImage: PAUSE_IMAGE,
    busyboxImage: BUSYBOX_IMAGE,
    runtime,
    ctr,
    cgroupParent,
    restart: () => run("restart", dir),
    describe: (lines = 8) => describeContainerd(dir, lines),
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
