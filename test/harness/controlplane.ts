// A real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler at one pinned release) for integration tests. The work is
// done by scripts/controlplane/*.sh (one implementation for tests and
// humans); this file picks a directory, runs the scripts and hands back what
// a test needs to point the agent at the API server.
//
//   requireControlPlane();                       // binaries built? (scripts/controlplane/build.sh)
//   await using cp = await startControlPlane({ name: "nodes", nodeMonitorGracePeriod: "20s" });
//   const kubeconfig = await cp.nodeKubeconfig("n1");   // CN=system:node:n1, O=system:nodes
//   await cp.kubectl(["get", "nodes"]);                 // as the cluster admin
//   await cp.restartApiServer();                        // breaks every watch
import { existsSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join, resolve } from "node:path";
import { cleanupAtExit } from "./exit-cleanup.ts";

const repoRoot = resolve(import.meta.dir, "../..");
const scripts = join(repoRoot, "scripts/controlplane");

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ControlPlaneHandle {
  /** Everything of this instance lives here (see scripts/controlplane/lib.sh). */
  dir: string;
  /** `https://127.0.0.1:PORT`. */
  apiServerUrl: string;
  /** Kubeconfig of the cluster admin (O=system:masters). */
  adminKubeconfig: string;
  /** The cluster CA (signs the API server's serving certificate and every client). */
  caFile: string;
  /** Where etcd, kube-apiserver, ..., kubectl are. */
  binDir: string;
  /** The release the binaries report, e.g. `v1.34.12`. */
  kubernetesVersion: string;
  /** kubectl as the admin (or with `opts.kubeconfig`); `opts.stdin` for `-f -`. */
  kubectl(args: string[], opts?: { kubeconfig?: string; stdin?: string }): Promise<KubectlResult>;
  /** Makes (once) the client certificate and kubeconfig of node `nodeName`; its path. */
  nodeKubeconfig(nodeName: string): Promise<string>;
  /**
   * Stops kube-apiserver only (SIGTERM, or SIGKILL with `signal: "KILL"`),
   * keeps it down `downSeconds` (default 0), starts it with the same flags and
   * waits for /readyz. Every client's watch breaks.
   */
  restartApiServer(opts?: { downSeconds?: number; signal?: "TERM" | "KILL" }): Promise<void>;
  /** Stops every process of this instance and removes `dir`. Idempotent. */
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const BINARIES = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"];

/** The directory scripts/controlplane/build.sh builds into (builds nothing). */
export function controlPlaneBinDir(): string {
  const r = Bun.spawnSync(["bash", join(scripts, "build.sh"), "--bin-dir"], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`build.sh --bin-dir failed: ${r.stderr.toString()}`);
  return r.stdout.toString().trim();
}

/**
 * Throws one error naming what is missing for control-plane tests: the
 * binaries (a cold build takes minutes, so tests do not start one) and the
 * tools the scripts use.
 */
export function requireControlPlane(): void {
  const missing: string[] = [];
  const bin = controlPlaneBinDir();
  for (const b of BINARIES) if (!existsSync(join(bin, b))) missing.push(join(bin, b));
  for (const tool of ["openssl", "ss", "flock", "setsid"]) if (!Bun.which(tool)) missing.push(`${tool} binary`);
  if (missing.length > 0) {
    throw new Error(
      `control-plane tests need: ${missing.join(", ")}. ` + `Run \`bash scripts/controlplane/build.sh\` (minutes when cold, cached in BUNLET_CACHE, default /var/cache/bunlet).`,
    );
  }
}

async function run(argv: string[], env: Record<string, string> = {}, stdin?: string): Promise<KubectlResult> {
  const proc = Bun.spawn(argv, {
    env: { ...process.env, ...env },
    stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code, stdout, stderr };
}

async function script(name: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const r = await run(["bash", join(scripts, name), ...args], env);
  if (r.code !== 0) throw new Error(`scripts/controlplane/${name} ${args.join(" ")} exited ${r.code}:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

function readEnv(file: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const m = line.match(/^([A-Z_]+)=(.*)$/);
    if (m) env[m[1]!] = m[2]!;
  }
  return env;
}

/**
 * Starts a private control plane and waits until kube-apiserver is ready and
 * the controller-manager works (about 8 s on 2 cores). Needs the binaries of
 * scripts/controlplane/build.sh (see requireControlPlane).
 */
export async function startControlPlane(
  opts: { name?: string; nodeMonitorGracePeriod?: string; apiServerArgs?: string[]; controllerManagerArgs?: string[] } = {},
): Promise<ControlPlaneHandle> {
  requireControlPlane();
  const name = (opts.name ?? "t")
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 20);
  const dir = `/tmp/bunlet-cp-${name}-${randomBytes(3).toString("hex")}`;
  const env: Record<string, string> = {};
  if (opts.nodeMonitorGracePeriod) env.BUNLET_NODE_MONITOR_GRACE_PERIOD = opts.nodeMonitorGracePeriod;
  if (opts.apiServerArgs) env.BUNLET_APISERVER_ARGS = opts.apiServerArgs.join(" ");
  if (opts.controllerManagerArgs) env.BUNLET_CONTROLLER_MANAGER_ARGS = opts.controllerManagerArgs.join(" ");
  const atExit = cleanupAtExit(dir, ["bash", join(scripts, "down.sh"), dir]);
  try {
    await script("up.sh", [dir], env);
  } catch (e) {
    // Keep the logs in the error: down.sh removes them.
    let logs = "";
    for (const c of ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]) {
      const f = join(dir, `${c}.log`);
      if (existsSync(f)) logs += `\n--- ${c}.log (tail)\n${readFileSync(f, "utf8").split("\n").slice(-20).join("\n")}`;
    }
    await script("down.sh", [dir]).catch(() => {});
    atExit.release();
    throw new Error(`${(e as Error).message}${logs}`);
  }
  const cpEnv = readEnv(join(dir, "controlplane.env"));
  const binDir = cpEnv.BIN!;
  const adminKubeconfig = cpEnv.KUBECONFIG!;
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= script("down.sh", [dir]).then(() => {
      atExit.release();
    }));
  return {
    dir,
    apiServerUrl: cpEnv.APISERVER_URL!,
    adminKubeconfig,
    caFile: cpEnv.CA_FILE!,
    binDir,
    kubernetesVersion: cpEnv.KUBERNETES_VERSION!,
    kubectl: (args, o = {}) => run([join(binDir, "kubectl"), "--kubeconfig", o.kubeconfig ?? adminKubeconfig, ...args], {}, o.stdin),
    nodeKubeconfig: async (nodeName) => (await script("pki.sh", [dir, "node", nodeName])).trim(),
    restartApiServer: async (o = {}) => {
      await script("restart-apiserver.sh", [dir, String(o.downSeconds ?? 0)], { BUNLET_RESTART_SIGNAL: o.signal ?? "TERM" });
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/**
 * kubectl as the cluster admin for tests, resolved lazily (the handle is made
 * in beforeAll): `kubectl` throws with kubectl's stderr on failure, `tryJson`
 * is undefined for an object that does not exist, `apply` takes objects.
 */
export function adminKubectl(cp: () => ControlPlaneHandle) {
  async function kubectl(...args: string[]): Promise<string> {
    const r = await cp().kubectl(args);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  }
  return {
    kubectl,
    getJson: async <T = any>(...args: string[]): Promise<T> => JSON.parse(await kubectl("get", ...args, "-o", "json")) as T,
    tryJson: async <T = any>(...args: string[]): Promise<T | undefined> => {
      const r = await cp().kubectl(["get", ...args, "-o", "json"]);
      return r.code === 0 ? (JSON.parse(r.stdout) as T) : undefined;
    },
    apply: async (...objects: unknown[]): Promise<void> => {
      const r = await cp().kubectl(["apply", "-f", "-"], { stdin: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }) });
      if (r.code !== 0) throw new Error(`kubectl apply: ${r.stderr}`);
    },
  };
}
