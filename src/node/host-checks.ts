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
 * - makeIPTablesUtilChains: the iptables binary must be there to create the
 *   chains (iptables-chains.ts); without it the agent does not start.
 * Every path is below `procRoot`, so tests use a directory tree.
 */
import { join } from "node:path";

export interface HostCheckDeps {
  /** "/proc" on a real host. */
  procRoot: string;
  readFile(path: string): string;
  writeFile(path: string, data: string): void;
  /** The host's cgroup version (cgroups/detect.ts). */
  cgroupVersion(): "v1" | "v2";
  /** setrlimit(RLIMIT_NOFILE) of the agent, soft and hard (util/rlimit.ts); throws why it could not. */
  setOpenFileLimit(limit: number): void;
  /** Whether an iptables or ip6tables binary is on PATH. */
  iptablesBinary(): boolean;
}

export interface HostCheckSettings {
  failSwapOn: boolean;
  failCgroupV1: boolean;
  /** As written in the config file: unset means the host's default. */
  singleProcessOOMKill?: boolean;
  oomScoreAdj: number;
  maxOpenFiles: number;
  makeIPTablesUtilChains: boolean;
}

export type HostCheckResult =
  /** The agent must not start: `problem` says why, for the operator; `invalidConfig` when a setting is wrong for this host (exit 2). */
  { ok: false; problem: string; invalidConfig?: true } | { ok: true; warnings: string[] };

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
  if (s.makeIPTablesUtilChains && !deps.iptablesBinary())
    return {
      ok: false,
      problem:
        "makeIPTablesUtilChains: true (the default) needs the iptables binary to create the KUBE-IPTABLES-HINT and KUBE-FIREWALL chains, and neither iptables nor ip6tables is on PATH: install iptables, or set makeIPTablesUtilChains: false (--make-iptables-util-chains=false)",
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
  return { ok: true, warnings };
}
