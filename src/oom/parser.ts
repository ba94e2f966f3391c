/**
 * OOM kills from the kernel log, after cAdvisor's utils/oomparser (what
 * the upstream kubelet's OOM watcher reads): an OOM starts at
 * "<task> invoked oom-killer:", names the cgroups in
 * "oom-kill:constraint=...,oom_memcg=...,task_memcg=...,task=...,pid=..."
 * (kernel 4.19+) or, older, "Task in <task cgroup> killed as a result of
 * limit of <oom cgroup>", and ends with "Killed process <pid> (<name>)".
 */

export interface OomInstance {
  pid: number;
  processName: string;
  /** Microseconds since boot, from the kernel record. */
  timestampUs: number;
  /** The killed task's memory cgroup (cAdvisor's ContainerName). */
  taskCgroup: string;
  /** The cgroup whose limit was hit; "/" for a system-wide OOM (cAdvisor's VictimContainerName). */
  oomCgroup: string;
  constraint?: string;
}

export interface KmsgRecord {
  priority: number;
  seq: number;
  timestampUs: number;
  message: string;
}

/** One /dev/kmsg record: `prio,seq,usec,flags[,..];message`; continuation lines (" KEY=value") are dropped. */
export function parseKmsgRecord(raw: string): KmsgRecord | undefined {
  const semi = raw.indexOf(";");
  if (semi < 0) return undefined;
  const [priority, seq, usec] = raw.slice(0, semi).split(",");
  const message = raw.slice(semi + 1).split("\n")[0]!;
  const n = [Number(priority), Number(seq), Number(usec)];
  if (n.some((x) => !Number.isFinite(x))) return undefined;
  return { priority: n[0]!, seq: n[1]!, timestampUs: n[2]!, message };
}

const FIRST_LINE = /invoked oom-killer:/;
const OOM_KILL = /oom-kill:constraint=([^,]*),nodemask=(.*),cpuset=(.*),mems_allowed=(.*),oom_memcg=(.*),task_memcg=(.*),task=(.*),pid=(\d+),uid=(\d+)/;
const LEGACY_CONTAINER = /Task in (.*) killed as a result of limit of (.*)/;
const KILLED_PROCESS = /Killed process (\d+) \((.+?)\)/;

/** Feeds kernel records in order; returns an instance when one OOM kill is complete. */
export class OomParser {
  private current: OomInstance | undefined;

  feed(record: KmsgRecord): OomInstance | undefined {
    const { message } = record;
    if (FIRST_LINE.test(message)) {
      this.current = { pid: 0, processName: "", timestampUs: record.timestampUs, taskCgroup: "/", oomCgroup: "/" };
      return undefined;
    }
    const current = this.current;
    if (!current) return undefined;
    const full = OOM_KILL.exec(message);
    if (full) {
      current.constraint = full[1]!;
      current.oomCgroup = full[5]! || "/";
      current.taskCgroup = full[6]! || "/";
      current.processName = full[7]!;
      current.pid = Number(full[8]);
      return undefined; // "Killed process" follows and ends the instance
    }
    const legacy = LEGACY_CONTAINER.exec(message);
    if (legacy) {
      current.taskCgroup = legacy[1]!;
      current.oomCgroup = legacy[2]!;
      return undefined;
    }
    const killed = KILLED_PROCESS.exec(message);
    if (killed) {
      current.pid = Number(killed[1]);
      current.processName = killed[2]!;
      current.timestampUs = record.timestampUs;
      this.current = undefined;
      return current;
    }
    return undefined;
  }
}

/** The pod UID in a cgroupfs pod path (`.../kubepods/burstable/pod<uid>/<container>`), if it is one. */
export function podUidOfCgroup(cgroup: string): string | undefined {
  const m = /\/pod([0-9a-fA-F-]{8,})(?:\.slice)?(?:\/|$)/.exec(cgroup) ?? /kubepods(?:-[a-z]+)?-pod([0-9a-fA-F_]+)\.slice/.exec(cgroup);
  return m?.[1]?.replaceAll("_", "-");
}
