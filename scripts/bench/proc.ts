// A process's figures from /proc, for the benchmarks (compare, soak, memory).
import { readdirSync, readFileSync } from "node:fs";

/** sysconf(_SC_CLK_TCK) (USER_HZ) on Linux x86_64 and arm64. */
export const CLK_TCK = 100;

/** The command name and utime + stime (clock ticks) of a /proc/PID/stat or /proc/PID/task/TID/stat text. */
export function parseStat(stat: string): { comm: string; ticks: number } {
  // The command name sits in parentheses and may hold spaces and ')'; after it, state is field 3, utime 14
  // and stime 15 (1-based over the whole line).
  const close = stat.lastIndexOf(")");
  const fields = stat.slice(close + 2).split(" ");
  return { comm: stat.slice(stat.indexOf("(") + 1, close), ticks: Number(fields[11]) + Number(fields[12]) };
}

/** utime + stime of `pid` in clock ticks (its own, not its children's). */
export function cpuTicks(pid: number): number {
  return parseStat(readFileSync(`/proc/${pid}/stat`, "utf8")).ticks;
}

/** A `kB` field of /proc/<pid>/status text (VmRSS, RssAnon, RssFile, ...) in MiB; NaN when absent. */
export function statusMiB(status: string, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
  return m ? Number(m[1]) / 1024 : NaN;
}

export function rssMiB(pid: number): number {
  return statusMiB(readFileSync(`/proc/${pid}/status`, "utf8"), "VmRSS");
}

/** The machine's busy and total CPU time in clock ticks, from the first line of /proc/stat. */
export function machineTicks(): { busy: number; total: number } {
  const fields = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already counted in user and nice)
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - fields[3]! - fields[4]!, total };
}

/**
 * utime + stime in clock ticks, summed over the running processes whose
 * command name (/proc/PID/comm, at most 15 characters) is one of `names`.
 * Long-lived processes only: one that exits between two calls takes its
 * ticks with it.
 */
export function ticksOfCommands(names: readonly string[]): number {
  let ticks = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // exited while listing
    }
    const parsed = parseStat(stat);
    if (names.includes(parsed.comm)) ticks += parsed.ticks;
  }
  return ticks;
}
