/**
 * kubeletCgroups and systemCgroups, as upstream's container manager
 * (pkg/kubelet/cm/container_manager_linux.go: the system containers of
 * setupNode, ensured by a loop of Start at once and then every minute):
 * - systemCgroups: every process of the root cgroup but pid 1 and kernel
 *   threads (no /proc/<pid>/exe) is moved into it, in up to 11 passes until
 *   none is left (ensureSystemCgroups). The root's processes are read where
 *   upstream reads them: the "devices" hierarchy on cgroup v1, the unified
 *   root on v2. "/" is refused (upstream: system container cannot be root).
 * - kubeletCgroups: the agent's own process is moved into it when
 *   /proc/<pid>/cgroup shows it elsewhere, and its oom_score_adj is set again
 *   (ensureProcessInContainerWithOOMScore). Unset, only the oom_score_adj is
 *   set again, every 5 minutes (upstream's periodic task).
 * A cgroup is created when missing, as libcontainer's fs managers do: v1 in
 * every mounted hierarchy and the hybrid cgroup2 mount (cpuset levels get
 * their parent's cpus and mems), v2 with the controllers enabled down the
 * path. The names are cgroupfs paths whatever the cgroupDriver: upstream
 * makes these managers with Systemd: false, so "/system.slice/kubelet.service"
 * is a path, not a unit. A process outside the host's PID namespace (the
 * agent in a container) is left where it is, as upstream.
 */
import { join, posix } from "node:path";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { CgroupBackend } from "./backend.ts";
import type { CgroupLayout, Hierarchy } from "./detect.ts";
import { hierarchyDir } from "./detect.ts";
import type { CgroupFs } from "./fs.ts";
import { readFileSync, readlinkSync, writeFileSync } from "node:fs";

/** What is read and written under /proc. */
export interface ProcFs {
  readFile(path: string): string;
  writeFile(path: string, data: string): void;
  /** Throws a Node fs error (with `code`) when the link cannot be read. */
  readlink(path: string): string;
}

/** The host's /proc files, read and written as they are. */
export const nodeProcFs: ProcFs = {
  readFile: (p) => readFileSync(p, "utf8"),
  writeFile: (p, data) => writeFileSync(p, data),
  readlink: (p) => readlinkSync(p),
};

export interface SystemCgroupsOptions {
  /** kubeletCgroups; "" for none. */
  kubeletCgroups: string;
  /** systemCgroups; "" for none. */
  systemCgroups: string;
  oomScoreAdj: number;
  /** The agent's pid. */
  pid: number;
  /** The host's layout and its cgroupfs writer (v1.ts, v2.ts: creates a cgroup, names its directories); needed with either name set. */
  cgroups?: { layout: CgroupLayout; backend: CgroupBackend; fs: CgroupFs };
  proc: ProcFs;
  /** "/proc" on a real host. */
  procRoot: string;
  clock: Clock;
  logger: Logger;
}

/** Upstream's periods: the system containers' ensure loop, and the kubelet's oom_score_adj without kubeletCgroups. */
export const ENSURE_PERIOD_MS = 60_000;
export const OOM_SCORE_PERIOD_MS = 5 * 60_000;
/** ensureSystemCgroups tries 11 times (i <= 10). */
const SYSTEM_PASSES = 11;

/** An absolute, clean cgroupfs path: upstream's managers take the name below parent "/". */
export function cgroupName(name: string): string {
  const path = posix.join("/", name);
  return path.length > 1 ? path.replace(/\/+$/, "") : path;
}

/** /proc/<pid>/cgroup: hierarchy controllers (sorted, "" for cgroup2) → path. */
export function parseProcCgroup(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (m) out.set(m[1]!.split(",").sort().join(","), m[2]!);
  }
  return out;
}

const key = (h: Hierarchy) => [...h.controllers].sort().join(",");

export class SystemCgroups implements Disposable {
  private readonly kubelet: string | undefined;
  private readonly system: string | undefined;
  private readonly cancels: (() => void)[] = [];
  private disposed = false;

  constructor(private readonly o: SystemCgroupsOptions) {
    this.kubelet = o.kubeletCgroups ? cgroupName(o.kubeletCgroups) : undefined;
    this.system = o.systemCgroups ? cgroupName(o.systemCgroups) : undefined;
    // Validated at start (validate.ts); a guard for other callers.
    if (this.system === "/") throw new Error('systemCgroups: system container cannot be root ("/")');
    if ((this.kubelet || this.system) && !o.cgroups) throw new Error("kubeletCgroups, systemCgroups: no cgroup layout given");
  }

  /** Every hierarchy a process joins: the v1 ones and the hybrid cgroup2 mount, or the v2 root. */
  private hierarchies(): Hierarchy[] {
    const l = this.cg().layout;
    return l.version === "v2" ? [l.unified] : l.unified ? [...l.hierarchies, l.unified] : l.hierarchies;
  }

  /**
   * Whether `pid` is in the PID namespace of init (upstream
   * isProcessRunningInHost: /proc/1/ns/pid and /proc/<pid>/ns/pid name the
   * same namespace). Where init's link cannot be read (EACCES: measured on
   * hosts whose pid 1 is protected from root without its capabilities), the
   * same question is answered by /proc/<pid>/status: one NSpid entry means
   * the process is in the namespace this /proc shows, the one of its pid 1.
   * Throws when neither can tell.
   */
  private inHostPidNamespace(pid: number): boolean {
    const { proc, procRoot } = this.o;
    let init: string;
    try {
      init = proc.readlink(join(procRoot, "1/ns/pid"));
    } catch (err) {
      const status = (() => {
        try {
          return proc.readFile(join(procRoot, String(pid), "status"));
        } catch {
          return "";
        }
      })();
      const nspid = /^NSpid:\s*(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/);
      if (!nspid) throw new Error(`failed to find pid namespace of init process: ${errorMessage(err)}`);
      return nspid.length === 1;
    }
    return init === proc.readlink(join(procRoot, String(pid), "ns/pid"));
  }

  private cg(): NonNullable<SystemCgroupsOptions["cgroups"]> {
    return this.o.cgroups!; // checked in the constructor
  }

  /** Creates `path` when missing and writes `pid` into its cgroup.procs in every hierarchy (libcontainer Apply). */
  private async move(pid: number, path: string): Promise<void> {
    const { backend, fs } = this.cg();
    await backend.ensure(path);
    for (const dir of backend.dirs(path)) await fs.writeFile(join(dir, "cgroup.procs"), String(pid));
  }

  /** The pids of the root cgroup (upstream GetPids("/"): the devices hierarchy on v1). */
  private async rootPids(): Promise<number[]> {
    const l = this.cg().layout;
    const h = l.version === "v2" ? l.unified : l.hierarchies.find((x) => x.controllers.includes("devices"));
    if (!h) throw new Error("no devices cgroup hierarchy is mounted to list the root cgroup's processes");
    const text = await this.cg().fs.readFile(join(hierarchyDir(h, "/"), "cgroup.procs"));
    return text
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "")
      .map(Number);
  }

  /** Kernel threads have no executable (upstream isKernelPid). */
  private isKernelPid(pid: number): boolean {
    try {
      this.o.proc.readlink(join(this.o.procRoot, String(pid), "exe"));
      return false;
    } catch (err) {
      return (err as { code?: string }).code === "ENOENT";
    }
  }

  /** upstream ensureSystemCgroups: moves the root's non-kernel processes but pid 1; the last pass's error is returned. */
  async ensureSystem(): Promise<void> {
    const path = this.system;
    if (!path) return;
    let last: Error | undefined;
    for (let i = 0; i < SYSTEM_PASSES; i++) {
      let all: number[];
      try {
        all = await this.rootPids();
      } catch (err) {
        last = new Error(`failed to list PIDs for root: ${errorMessage(err)}`);
        continue;
      }
      const pids = all.filter((pid) => pid !== 1 && !this.isKernelPid(pid));
      if (pids.length === 0) return;
      this.o.logger.v(3).info("moving non-kernel processes", { pids, systemCgroups: path });
      for (const pid of pids) {
        try {
          await this.move(pid, path);
        } catch (err) {
          // A process that exited meanwhile (ESRCH) is gone from the root as well: the next pass does not see it.
          last = new Error(`failed to move PID ${pid} into the system container ${JSON.stringify(path)}: ${errorMessage(err)}`);
        }
      }
    }
    if (last) throw last;
  }

  /** upstream ensureProcessInContainerWithOOMScore for the agent: into kubeletCgroups when it is elsewhere, then its oom_score_adj. */
  async ensureKubelet(): Promise<void> {
    const { pid, proc, procRoot, logger } = this.o;
    if (!this.inHostPidNamespace(pid)) {
      logger.v(2).info("PID is not running in the host namespace", { pid });
      return;
    }
    const errors: string[] = [];
    const path = this.kubelet;
    if (path) {
      let current = new Map<string, string>();
      try {
        current = parseProcCgroup(proc.readFile(join(procRoot, String(pid), "cgroup")));
      } catch (err) {
        errors.push(`failed to find container of PID ${pid}: ${errorMessage(err)}`);
      }
      const elsewhere = this.hierarchies().filter((h) => current.get(key(h)) !== path);
      if (elsewhere.length > 0) {
        try {
          await this.move(pid, path);
          logger.info("moved the agent into kubeletCgroups", { pid, kubeletCgroups: path, from: [...new Set(elsewhere.map((h) => current.get(key(h)) ?? "?"))].join(", ") });
        } catch (err) {
          errors.push(`failed to move PID ${pid} to ${JSON.stringify(path)}: ${errorMessage(err)}`);
        }
      }
    }
    try {
      proc.writeFile(join(procRoot, String(pid), "oom_score_adj"), String(this.o.oomScoreAdj));
    } catch (err) {
      errors.push(`failed to apply oom score ${this.o.oomScoreAdj} to PID ${pid}: ${errorMessage(err)}`);
    }
    if (errors.length) throw new Error(errors.length === 1 ? errors[0] : `[${errors.join(", ")}]`);
  }

  /** One pass of the system containers' loop: systemCgroups, then kubeletCgroups (upstream's order); failures are logged, as upstream. */
  async ensure(): Promise<void> {
    if (this.system) await this.logged(this.system, () => this.ensureSystem());
    if (this.kubelet) await this.logged(this.kubelet, () => this.ensureKubelet());
  }

  private async logged(containerName: string, step: () => Promise<void>): Promise<void> {
    try {
      await step();
    } catch (err) {
      this.o.logger.info("Failed to ensure state", { containerName, err: errorMessage(err) });
    }
  }

  /**
   * Upstream's two loops: the system containers at once and every minute
   * (when either is set), and without kubeletCgroups the agent's
   * oom_score_adj every 5 minutes (the host checks set it at start).
   */
  async start(): Promise<void> {
    /** Runs `fn` every `period`, first after `firstAfter` (0: at once, awaited). */
    const every = async (period: number, firstAfter: number, fn: () => Promise<void>) => {
      let cancel: (() => void) | undefined;
      this.cancels.push(() => cancel?.());
      const tick = async () => {
        await fn();
        if (!this.disposed) cancel = this.o.clock.setTimer(period, () => void tick());
      };
      if (firstAfter > 0) cancel = this.o.clock.setTimer(firstAfter, () => void tick());
      else await tick();
    };
    if (!this.kubelet) await every(OOM_SCORE_PERIOD_MS, OOM_SCORE_PERIOD_MS, () => this.logged("(the agent's oom_score_adj)", () => this.ensureKubelet()));
    if (this.kubelet || this.system) await every(ENSURE_PERIOD_MS, 0, () => this.ensure());
  }

  [Symbol.dispose](): void {
    this.disposed = true;
    for (const cancel of this.cancels.splice(0)) cancel();
  }
}
