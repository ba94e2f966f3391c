/**
 * What upstream's container manager checks and sets on the host before any
 * pod runs (cmd/kubelet/app/server.go run, pkg/kubelet/cm NewContainerManager):
 * - failSwapOn: refuse to start while swap is on (/proc/swaps lists a device);
 * - failCgroupV1: refuse to start on a cgroup v1 host;
 * - singleProcessOOMKill: false is refused on a cgroup v1 host (it has no
 *   memory.oom.group; upstream's validation);
 * - oomScoreAdj: the agent's own /proc/self/oom_score_adj (a failure to set
 *   it is a warning, as upstream logs it and goes on);
 * - maxOpenFiles: the agent's own RLIMIT_NOFILE, soft and hard (upstream
 *   rlimit.SetNumFiles; a failure is a warning, as upstream logs it);
 * - protectKernelDefaults: upstream's six kernel tunables (KERNEL_TUNABLES,
 *   setupKernelTunables); true: one that differs stops the agent, with
 *   upstream's message for each; false: each that differs is written
 *   ("Updating kernel flag"), and one that cannot be written stops the agent,
 *   unless the agent runs in a user namespace with the KubeletInUserNamespace
 *   gate (then it is logged and ignored), as upstream. A tunable that cannot
 *   be read stops the agent either way, as upstream.
 * Every path is below `procRoot` and `sysctlRoot`, so tests use directory trees.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";

/** The NUMA node numbers under `dir` (/sys/devices/system/node: node0, node1, ...); a kernel without NUMA has none: one node. */
export function numaNodes(dir: string, list: (dir: string) => string[] = readdirSync): number[] {
  let names: string[];
  try {
    names = list(dir);
  } catch {
    return [0];
  }
  const nodes = names
    .map((n) => /^node(\d+)$/.exec(n)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
  return nodes.length ? nodes : [0];
}

/**
 * Upstream's setupKernelTunables (pkg/kubelet/cm): each /proc/sys path and the
 * value the kubelet wants, in upstream's names (component-helpers' sysctl).
 */
export const KERNEL_TUNABLES: readonly (readonly [string, number])[] = [
  ["vm/overcommit_memory", 1],
  ["vm/panic_on_oom", 0],
  ["kernel/panic", 10],
  ["kernel/panic_on_oops", 1],
  ["kernel/keys/root_maxkeys", 1_000_000],
  ["kernel/keys/root_maxbytes", 25_000_000],
];

/** The tunables that differ from upstream's values, or the errors reading them (as upstream, an error whatever the mode). */
function kernelTunables(deps: Pick<HostCheckDeps, "sysctlRoot" | "readFile">): {
  errors: string[];
  differ: { flag: string; path: string; expected: number; actual: number }[];
} {
  const errors: string[] = [];
  const differ: { flag: string; path: string; expected: number; actual: number }[] = [];
  for (const [flag, expected] of KERNEL_TUNABLES) {
    const path = join(deps.sysctlRoot, flag);
    let text: string;
    try {
      text = deps.readFile(path);
    } catch (err) {
      errors.push(`reading ${path}: ${(err as Error).message}`);
      continue;
    }
    const actual = Number.parseInt(text.trim(), 10);
    if (Number.isNaN(actual)) errors.push(`${path}: not a number: ${JSON.stringify(text.trim())}`);
    else if (actual !== expected) differ.push({ flag, path, expected, actual });
  }
  return { errors, differ };
}

/** libcontainer's RunningInUserNS: any uid_map but the initial namespace's "0 0 4294967295". */
export function runningInUserNamespace(uidMap: string): boolean {
  const lines = uidMap.trim().split("\n");
  return !(lines.length === 1 && /^0\s+0\s+4294967295$/.test(lines[0]!.trim()));
}

/** Go's utilerrors.NewAggregate text: one error alone, several in brackets. */
const aggregate = (errors: string[]) => (errors.length === 1 ? errors[0]! : `[${errors.join(", ")}]`);

export interface HostCheckDeps {
  /** "/proc" on a real host. */
  procRoot: string;
  /** Where the kernel tunables are read and written: "/proc/sys" on a real host. */
  sysctlRoot: string;
  readFile(path: string): string;
  writeFile(path: string, data: string): void;
  /** The host's cgroup version (cgroups/detect.ts). */
  cgroupVersion(): "v1" | "v2";
  /** setrlimit(RLIMIT_NOFILE) of the agent, soft and hard (util/rlimit.ts); throws why it could not. */
  setOpenFileLimit(limit: number): void;
}

export interface HostCheckSettings {
  failSwapOn: boolean;
  failCgroupV1: boolean;
  /** As written in the config file: unset means the host's default. */
  singleProcessOOMKill?: boolean;
  oomScoreAdj: number;
  maxOpenFiles: number;
  protectKernelDefaults: boolean;
  featureGates: Readonly<Record<string, boolean>>;
}

export type HostCheckResult =
  /** The agent must not start: `problem` says why, for the operator; `invalidConfig` when a setting is wrong for this host (exit 2). */
  { ok: false; problem: string; invalidConfig?: true } | { ok: true; warnings: string[]; info: string[] };

/** The swap devices /proc/swaps lists (its first line is a header). */
export function swapDevices(swapsText: string): string[] {
  return swapsText
    .split("\n")
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => l !== "")
    .map((l) => l.split(/\s+/)[0] as string);
}

export function checkHost(s: HostCheckSettings, deps: HostCheckDeps): HostCheckResult {
  if (s.failSwapOn) {
    const path = join(deps.procRoot, "swaps");
    let text: string;
    try {
      text = deps.readFile(path);
    } catch (err) {
      // Upstream: an unreadable /proc/swaps is an error when failSwapOn is set.
      return { ok: false, problem: `failSwapOn: cannot read ${path} to check for swap: ${(err as Error).message}` };
    }
    const devices = swapDevices(text);
    if (devices.length > 0)
      return {
        ok: false,
        problem: `running with swap on is not supported, please disable swap or set --fail-swap-on flag to false (failSwapOn: true; ${path} lists ${devices.join(", ")})`,
      };
  }
  if (s.failCgroupV1 && deps.cgroupVersion() === "v1")
    return {
      ok: false,
      problem: "kubelet is configured to not run on a host using cgroup v1 (failCgroupV1: true, --fail-cgroupv1): this host has cgroup v1",
    };
  if (s.singleProcessOOMKill === false && deps.cgroupVersion() === "v1")
    return { ok: false, problem: "invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1", invalidConfig: true };
  const tunables = kernelTunables(deps);
  const info: string[] = [];
  const tunableErrors = [...tunables.errors];
  for (const d of tunables.differ) {
    if (s.protectKernelDefaults) {
      tunableErrors.push(`invalid kernel flag: ${d.flag}, expected value: ${d.expected}, actual value: ${d.actual}`);
      continue;
    }
    // Upstream's KernelTunableModify.
    info.push(`Updating kernel flag ${d.flag}: expected value ${d.expected}, actual value ${d.actual}`);
    try {
      deps.writeFile(d.path, String(d.expected));
    } catch (err) {
      const error = `write ${d.path}: ${(err as Error).message}`;
      const inUserns = (() => {
        try {
          return runningInUserNamespace(deps.readFile(join(deps.procRoot, "self/uid_map")));
        } catch {
          return false;
        }
      })();
      if (inUserns && s.featureGates["KubeletInUserNamespace"] === true) {
        info.push(`Updating kernel flag failed (running in UserNS, ignoring): ${d.flag}: ${error}`);
        continue;
      }
      tunableErrors.push(inUserns ? `${error} (Hint: enable KubeletInUserNamespace feature flag to ignore the error)` : error);
    }
  }
  if (tunableErrors.length)
    return {
      ok: false,
      problem: `${aggregate(tunableErrors)}${
        s.protectKernelDefaults && tunables.differ.length
          ? " (protectKernelDefaults: true, --protect-kernel-defaults: the kernel tunables must be set as the kubelet expects)"
          : !s.protectKernelDefaults && tunables.differ.length
            ? " (protectKernelDefaults: false, --protect-kernel-defaults: the kubelet sets these kernel tunables)"
            : ""
      }`,
    };
  const warnings: string[] = [];
  const oomPath = join(deps.procRoot, "self/oom_score_adj");
  try {
    deps.writeFile(oomPath, String(s.oomScoreAdj));
  } catch (err) {
    warnings.push(`oomScoreAdj: could not set the agent's ${oomPath} to ${s.oomScoreAdj}: ${(err as Error).message}`);
  }
  try {
    deps.setOpenFileLimit(s.maxOpenFiles);
  } catch (err) {
    warnings.push(`maxOpenFiles: could not set the agent's open file limit to ${s.maxOpenFiles}: ${(err as Error).message}`);
  }
  return { ok: true, warnings, info };
}
