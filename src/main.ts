/**
 * The kubelet command: reads flags and the config file, then runs the agent
 * until SIGTERM or SIGINT. The only place that exits the process.
 *
 * `kubelet install` / `kubelet uninstall` (install/) set a node up around
 * the binary and exit.
 *
 * Exit codes: 0 after --help, --version or a clean stop (with --runonce:
 * every static pod came up); 2 for a bad flag or config file
 * (`kubelet: <message>` on stderr), also when the container runtime reports
 * another cgroup driver than the one configured; 1 for an unexpected error,
 * a host the configuration refuses (swap on with failSwapOn, cgroup v1 with
 * failCgroupV1) or a --runonce pod that failed;
 * 128+signal when a second signal cuts a graceful stop short; 1 when
 * stopping the agent's parts took longer than its deadline (the parts
 * still stopping are logged by name).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { kubeletVersion, loadConfig, type KubeletConfiguration } from "./config/index.ts";
import { jitEnabled, planJit } from "./memory/jit.ts";
import { DEFAULT_DISPOSAL_LIMITS, StopTimeout } from "./util/disposal.ts";
import { StartupConfigError, errorMessage } from "./util/errors.ts";
import { createLogger, type Logger, Verbosity } from "./util/log.ts";
import type { ShutdownHandler } from "./shutdown/index.ts";

/** Defined by the build script (bun build --define); absent when run from source. */
declare const BUILD_VERSION: string | undefined;

const SIGNAL_NUMBERS = { SIGINT: 2, SIGTERM: 15 } as const;

/** After a signal, the process exits by then whatever still runs: the agent's own stop deadline plus 5 s. */
const EXIT_BACKSTOP_MS = DEFAULT_DISPOSAL_LIMITS.totalTimeoutMs + 5_000;

let logger: Logger | undefined;

async function main(): Promise<number> {
  const [command, ...rest] = process.argv.slice(2);
  if (command === "install" || command === "uninstall") {
    const { realInstallDeps, runInstallCommand } = await import("./install/index.ts");
    return runInstallCommand(
      command,
      rest,
      realInstallDeps((line) => process.stdout.write(`${line}\n`)),
    );
  }
  const result = loadConfig(process.argv.slice(2), {
    readFile: (path) => readFileSync(path),
    hostname,
    env: process.env,
  });
  switch (result.kind) {
    case "help":
      process.stdout.write(result.text);
      return 0;
    case "version":
      process.stdout.write(`${kubeletVersion(typeof BUILD_VERSION !== "undefined" ? BUILD_VERSION : undefined)}\n`);
      return 0;
    case "error":
      process.stderr.write(`kubelet: ${result.message}\n`);
      return 2;
    case "run":
      break;
  }
  // JavaScriptCore's interpreter only (memory/jit.ts): returns only if the execve failed.
  const jit = planJit({
    env: process.env,
    execPath: process.execPath,
    argv: process.argv,
    argv0: process.argv0,
    execArgv: process.execArgv,
    compiled: import.meta.path.startsWith("/$bunfs/"),
  });
  let jitError: string | undefined;
  if (jit.kind === "reexec") {
    // maxOpenFiles goes through bun:ffi, which needs the JIT: set it here, the limit survives the execve (util/rlimit.ts).
    const { OPEN_FILE_LIMIT_ERROR, setOpenFileLimit } = await import("./util/rlimit.ts");
    const limitError = (() => {
      try {
        setOpenFileLimit(result.config.kubelet.maxOpenFiles);
        return undefined;
      } catch (err) {
        return errorMessage(err);
      }
    })();
    try {
      if (!process.execve) throw new Error("this runtime has no process.execve");
      process.execve(jit.file, jit.args, limitError === undefined ? jit.env : { ...jit.env, [OPEN_FILE_LIMIT_ERROR]: limitError });
    } catch (err) {
      jitError = errorMessage(err);
    }
  }

  // A closed log pipe (a restarted log collector, a reader that went away)
  // must not stop the agent: pods keep being managed, logs are lost.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
  // One verbosity for every logger: PUT /debug/flags/v on the kubelet API changes it (enableDebugFlagsHandler).
  const verbosity = new Verbosity(result.config.verbosity);
  const log = (logger = createLogger({ verbosity }));
  for (const warning of result.warnings) log.warn(warning);
  if (jitError) log.warn("could not restart without the JIT; running with it", { err: jitError });
  // Bun's inspector (BUN_INSPECT, or `bun --inspect` from source) lets whoever reaches it run code in the agent: say so.
  if (process.env["BUN_INSPECT"]) log.warn("the runtime's inspector is listening; anyone who can connect to it can run code in the agent", { address: process.env["BUN_INSPECT"] });

  // Upstream's container manager checks before any pod: swap, cgroup v1, the agent's own oom_score_adj and open file limit (node/host-checks.ts).
  const [{ checkHost }, { detectCgroupLayout, nodeCgroupFs }, { applyOpenFileLimit, setOpenFileLimit, OPEN_FILE_LIMIT_ERROR }] = await Promise.all([
    import("./node/host-checks.ts"),
    import("./cgroups/index.ts"),
    import("./util/rlimit.ts"),
  ]);
  const host = checkHost(result.config.kubelet, {
    procRoot: "/proc",
    // The kernel tunables: /proc/sys, or the directory BUNLET_SYSCTL_ROOT names (the test harness's, so a shared test
    // host's kernel settings are not changed by every agent it starts).
    sysctlRoot: process.env[SYSCTL_ROOT_ENV] || "/proc/sys",
    readFile: (path) => readFileSync(path, "utf8"),
    writeFile: (path, data) => writeFileSync(path, data),
    cgroupVersion: () => detectCgroupLayout("/", nodeCgroupFs).version,
    setOpenFileLimit: (limit) =>
      applyOpenFileLimit(limit, {
        jit: jitEnabled(process.env),
        set: setOpenFileLimit,
        inheritedError: process.env[OPEN_FILE_LIMIT_ERROR],
        limits: () => readFileSync("/proc/self/limits", "utf8"),
      }),
  });
  if (!host.ok) {
    process.stderr.write(`kubelet: ${host.problem}\n`);
    return host.invalidConfig ? 2 : 1;
  }
  for (const line of host.info) log.v(2).info(line);
  for (const warning of host.warnings) log.warn(warning);

  const controller = new AbortController();
  const onSignal = (name: keyof typeof SIGNAL_NUMBERS) => {
    if (controller.signal.aborted) {
      log.warn("second signal during shutdown; exiting now", { signal: name });
      process.exit(128 + SIGNAL_NUMBERS[name]);
    }
    log.info("shutting down", { signal: name });
    controller.abort(new Error(`received ${name}`));
    // Stopping the agent's parts is bounded (runAgent rejects with StopTimeout past DEFAULT_DISPOSAL_LIMITS); this is
    // for what is not one of them (a step of the start that does not heed the signal): the agent exits regardless.
    setTimeout(() => {
      log.error("the agent did not stop in time; exiting anyway", { afterMs: EXIT_BACKSTOP_MS, stillRunning: "the start or the stop of the agent" });
      void exit(1);
    }, EXIT_BACKSTOP_MS).unref();
  };
  // Graceful node shutdown (shutdown/index.ts): logind with systemd, as upstream; without it, SIGTERM means the node
  // is going down, so pods are stopped by priority before the agent exits; SIGINT still stops only the agent.
  const systemBus = existsSync("/run/systemd/system") || !!process.env["DBUS_SYSTEM_BUS_ADDRESS"];
  const logind = shutdownConfigured(result.config.kubelet) && systemBus ? await logindTrigger(result.config.kubelet, log) : undefined;
  const nodeShutdown = shutdownConfigured(result.config.kubelet) && !systemBus ? nodeShutdownBySignal() : undefined;
  let shuttingDownNode = false;
  process.on("SIGTERM", () => {
    if (!nodeShutdown || shuttingDownNode || controller.signal.aborted) return onSignal("SIGTERM");
    shuttingDownNode = true;
    log.info("SIGTERM: the node is shutting down; stopping pods before exiting");
    void nodeShutdown.fire().finally(() => onSignal("SIGTERM"));
  });
  process.on("SIGINT", () => onSignal("SIGINT"));

  // Loaded only now, so that --help and --version do not load the agent.
  const { runAgent } = await import("./agent.ts");
  const trigger = logind ?? nodeShutdown;
  const report = await runAgent(result.config, {
    logger: log,
    verbosity,
    signal: controller.signal,
    version: kubeletVersion(typeof BUILD_VERSION !== "undefined" ? BUILD_VERSION : undefined),
    ...(trigger ? { nodeShutdown: trigger } : {}),
  }).finally(() => logind?.close()); // the lock's holder and the monitor are child processes: never leave them behind
  if (!report) return 0;
  // --runonce: one line per pod, and a failure status when any pod did not come up (upstream: "runonce failed: ...", exit 1).
  for (const r of report.results) process.stdout.write(`${r.ok ? "started" : "failed"} pod ${r.pod}: ${r.detail}\n`);
  if (!report.error) return 0;
  process.stderr.write(`kubelet: runonce failed: ${report.error}\n`);
  return 1;
}

/** Where the kernel tunables are read and written instead of /proc/sys (tests). */
const SYSCTL_ROOT_ENV = "BUNLET_SYSCTL_ROOT";

const shutdownConfigured = (k: KubeletConfiguration): boolean => k.shutdownGracePeriod > 0 || k.shutdownGracePeriodByPodPriority.length > 0;

async function logindTrigger(k: KubeletConfiguration, log: Logger) {
  const { LogindShutdownTrigger, logindTools } = await import("./shutdown/logind.ts");
  // Groups stop one after the other: the whole shutdown needs their sum (upstream shutdownGracePeriodRequested).
  const byPriority = k.shutdownGracePeriodByPodPriority.reduce((sum, g) => sum + g.shutdownGracePeriodSeconds * 1000, 0);
  return new LogindShutdownTrigger({ inhibitor: logindTools({ logger: log }), gracePeriodMs: byPriority || k.shutdownGracePeriod, logger: log });
}

/** The SIGTERM-driven node shutdown, when a shutdown grace period is configured and there is no systemd. */
function nodeShutdownBySignal() {
  const handlers: ShutdownHandler[] = [];
  return {
    onShutdown: (handler: ShutdownHandler) => void handlers.push(handler),
    fire: async () => void (await Promise.allSettled(handlers.map((h) => h.shutdown()))),
  };
}

/** Exits once stdout and stderr have taken what was written, so no output is lost on a pipe. */
async function exit(code: number): Promise<never> {
  await Promise.all([process.stdout, process.stderr].map((s) => new Promise<void>((resolve) => s.write("", () => resolve()))));
  process.exit(code);
}

main().then(exit, (err: unknown) => {
  if (err instanceof StartupConfigError) {
    process.stderr.write(`kubelet: ${err.message}\n`);
    return exit(2);
  }
  if (err instanceof StopTimeout) {
    (logger ?? createLogger({ verbosity: 0 })).error("the agent did not stop in time; exiting anyway", {
      stillStopping: err.stuck.join(", "),
      ...(err.unreached.length ? { stoppedWithoutWaiting: err.unreached.join(", ") } : {}),
    });
    return exit(1);
  }
  (logger ?? createLogger({ verbosity: 0 })).error("unexpected error", { err: errorMessage(err), stack: err instanceof Error ? err.stack : undefined });
  return exit(1);
});
