// Runs the agent as a real process (`bun src/main.ts`, or dist/kubelet when
// BUNLET_BINARY is set) against a harness containerd, with its own static pod
// directory, log directory and ports, so tests can edit manifests, read the
// agent's log, kill -9 it and start it again.
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { KERNEL_TUNABLES } from "../../src/node/host-checks.ts";
import type { ContainerdHandle } from "./containerd.ts";

const repoRoot = resolve(import.meta.dir, "../..");

/**
 * The agent's kernel tunables (protectKernelDefaults: false writes upstream's
 * values, as upstream) in a directory of `dir` holding the host's current
 * values, named by BUNLET_SYSCTL_ROOT: this machine is shared, and every agent
 * a test starts would otherwise change its panic and overcommit behaviour.
 */
export function sysctlSandbox(dir: string): { BUNLET_SYSCTL_ROOT: string } {
  const root = join(dir, "sysctl");
  for (const [flag] of KERNEL_TUNABLES) {
    mkdirSync(join(root, dirname(flag)), { recursive: true });
    writeFileSync(join(root, flag), readFileSync(join("/proc/sys", flag), "utf8"));
  }
  return { BUNLET_SYSCTL_ROOT: root };
}

export interface AgentHandle {
  dir: string;
  manifests: string;
  podLogsDir: string;
  logFile: string;
  healthzPort: number;
  readOnlyPort: number;
  /** The agent's log so far. */
  log(): string;
  /** The running agent's process id, if it runs. */
  pid(): number | undefined;
  /** Starts the agent process (again). */
  start(): void;
  /** Sends a signal and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<number | null>;
  /** Waits for the running process to exit on its own (--runonce); its exit code. */
  exited(): Promise<number | null>;
  /** For a failed test's report: whether the agent runs, and its last warnings and errors. */
  describe(lines?: number): string;
  /** GET on the read-only port; the parsed JSON. */
  pods(): Promise<{
    items: {
      metadata: { name: string; uid: string };
      status: { phase: string; podIP?: string; containerStatuses: { name: string; restartCount: number; ready: boolean; state: Record<string, unknown> }[] };
    }[];
  }>;
}

export async function freePort(): Promise<number> {
  return await new Promise((res, rej) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => res(port));
    });
    srv.on("error", rej);
  });
}

/** Where `startAgent` with this name keeps its directories: another kubelet can be pointed at the same node state. */
export function agentPaths(ctd: ContainerdHandle, name = "a"): { dir: string; manifests: string; podLogsDir: string; rootDir: string } {
  const dir = join(ctd.dir, `agent-${name}`);
  return { dir, manifests: join(dir, "manifests"), podLogsDir: join(dir, "pod-logs"), rootDir: join(dir, "root") };
}

export async function startAgent(
  ctd: ContainerdHandle,
  opts: { name?: string; nodeName?: string; extraConfig?: Record<string, unknown>; extraArgs?: string[]; env?: Record<string, string> } = {},
): Promise<AgentHandle> {
  const { dir, manifests, podLogsDir, rootDir } = agentPaths(ctd, opts.name);
  mkdirSync(manifests, { recursive: true });
  mkdirSync(podLogsDir, { recursive: true });
  const healthzPort = await freePort();
  const readOnlyPort = await freePort();
  // 10250 is always served (self-signed when no certificate files are given): each agent gets its own port.
  const kubeletPort = await freePort();
  const configFile = join(dir, "kubelet.yaml");
  const config = {
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    staticPodPath: manifests,
    containerRuntimeEndpoint: ctd.endpoint,
    podLogsDir,
    cgroupRoot: ctd.cgroupParent,
    fileCheckFrequency: "5s",
    healthzPort,
    healthzBindAddress: "127.0.0.1",
    readOnlyPort,
    port: kubeletPort,
    address: "127.0.0.1",
    failSwapOn: false,
    // No KUBE-IPTABLES-HINT / KUBE-FIREWALL chains in the shared host's tables (as the upstream kubelet's harness);
    // agent-settings.test.ts turns it on and removes them after.
    makeIPTablesUtilChains: false,
    ...opts.extraConfig,
  };
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  const sysctl = sysctlSandbox(dir);
  const logFile = join(dir, "agent.log");
  writeFileSync(logFile, "");
  let proc: Subprocess | undefined;
  const cmd = process.env.BUNLET_BINARY ? [process.env.BUNLET_BINARY] : [process.execPath, join(repoRoot, "src/main.ts")];
  const handle: AgentHandle = {
    dir,
    manifests,
    podLogsDir,
    logFile,
    healthzPort,
    readOnlyPort,
    log: () => readFileSync(logFile, "utf8"),
    pid: () => proc?.pid,
    start() {
      // Appended: Bun's file writer would overwrite the previous run's log from offset 0.
      const fd = openSync(logFile, "a");
      proc = Bun.spawn(
        [
          ...cmd,
          `--config=${configFile}`,
          `--root-dir=${rootDir}`,
          `--cert-dir=${join(dir, "pki")}`,
          `--hostname-override=${opts.nodeName ?? "test-node"}`,
          "--v=2",
          ...(opts.extraArgs ?? []),
        ],
        {
          stdout: "pipe",
          stderr: "pipe",
          env: { ...process.env, ...sysctl, ...opts.env },
        },
      );
      const pump = async (stream: ReadableStream<Uint8Array>) => {
        for await (const chunk of stream) writeSync(fd, chunk);
      };
      void Promise.all([pump(proc.stdout as ReadableStream<Uint8Array>), pump(proc.stderr as ReadableStream<Uint8Array>)]).finally(() => closeSync(fd));
    },
    async kill(signal = "SIGTERM") {
      if (!proc) return null;
      proc.kill(signal);
      const code = await proc.exited;
      proc = undefined;
      return code;
    },
    async exited() {
      if (!proc) return null;
      const code = await proc.exited;
      proc = undefined;
      return code;
    },
    describe(lines = 15) {
      const state =
        proc === undefined
          ? "not running"
          : proc.exitCode === null && proc.signalCode === null
            ? `running (pid ${proc.pid})`
            : `exited (code ${proc.exitCode}, signal ${proc.signalCode})`;
      const problems = handle
        .log()
        .split("\n")
        .filter((l) => /^[WE]\d{4}-/.test(l))
        .slice(-lines)
        .map((l) => l.slice(0, 400));
      return `agent ${dir}: ${state}; its last ${problems.length} warnings and errors:\n${problems.join("\n")}`;
    },
    async pods() {
      const res = await fetch(`http://127.0.0.1:${readOnlyPort}/pods`);
      if (!res.ok) throw new Error(`/pods answered ${res.status}`);
      return (await res.json()) as Awaited<ReturnType<AgentHandle["pods"]>>;
    },
  };
  handle.start();
  process.once("exit", () => proc?.kill("SIGKILL"));
  return handle;
}

/**
 * Wraps a test body so that, when it fails, what explains the failure is
 * printed before the error: `describe()` of each handle (a process that
 * died, the end of its log). CI shows only the failed tests' output.
 */
export function explainFailure<T>(body: () => Promise<T>, ...handles: (() => { describe(): string } | undefined)[]): () => Promise<T> {
  return async () => {
    try {
      return await body();
    } catch (err) {
      for (const h of handles) console.error(`--- ${h()?.describe() ?? "(not started)"}`);
      throw err;
    }
  };
}

/** A value for a failure message: JSON, at most 200 characters. */
function shortly(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

/**
 * Polls `fn` until it returns a truthy value or `timeoutMs` passes; returns that value. The timeout's message
 * says what the last attempt did, and the last error if an earlier attempt threw one (how many attempts ago).
 */
export async function eventually<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 30_000, intervalMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: { err: unknown; attempt: number } | undefined;
  let lastValue: unknown;
  for (let attempt = 1; ; attempt++) {
    try {
      lastValue = await fn();
      if (lastValue) return lastValue as T;
    } catch (err) {
      lastError = { err, attempt };
    }
    if (Date.now() > deadline) {
      const last = lastError?.attempt === attempt ? `the last attempt threw ${String(lastError.err)}` : `the last attempt returned ${shortly(lastValue)}`;
      const earlier = lastError && lastError.attempt !== attempt ? `; attempt ${lastError.attempt} of ${attempt} threw ${String(lastError.err)}` : "";
      throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}: ${last}${earlier}`);
    }
    await Bun.sleep(intervalMs);
  }
}
