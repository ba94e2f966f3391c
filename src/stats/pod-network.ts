/**
 * A pod's network counters, read as cAdvisor reads them for the upstream
 * kubelet: `/proc/<pid>/net/dev` of one of the pod's processes shows the
 * interfaces of the pod's network namespace.
 *
 * Not from the CRI's ListPodSandboxStats: containerd 1.6 before 1.6.22
 * (Debian 12 ships 1.6.20) stores each answer in its sandbox map while
 * holding only a read lock, so a CRI call reading that map at the same
 * moment (the PLEG's ListPodSandbox, every second) makes the Go runtime end
 * containerd: "fatal error: concurrent map iteration and map write", seen
 * here within 26 to 143 calls beside a busy reader with 20 sandboxes
 * (scripts/containerd-sandbox-stats-crash.ts). The upstream kubelet does not
 * call it unless PodAndContainerStatsFromCRI is on.
 */
import { readlinkSync } from "node:fs";
import { join } from "node:path";
import { readIfExists } from "./cgroup-reader.ts";
import { reportedInterfaces } from "./procfs.ts";
import type { NetworkStats } from "./types.ts";

/** The interface reported as the pod's own (upstream network.DefaultInterfaceName). */
export const POD_DEFAULT_INTERFACE = "eth0";

/** The network namespace of `pid` ("self": this agent's, the host's), as /proc names it: `net:[inode]`. */
export function netnsOf(fsRoot: string, pid: number | "self"): string | undefined {
  try {
    return readlinkSync(join(fsRoot, "proc", String(pid), "ns/net"));
  } catch {
    return undefined;
  }
}

/**
 * The counters of the network namespace of the first of `pids` that still
 * exists. Undefined without such a process, and for a pod on the host's
 * network (`hostNetns`, read once per pass): those counters are the node's,
 * reported once, as the node's.
 */
export function podNetwork(fsRoot: string, pids: readonly number[], hostNetns: string | undefined, time: string): NetworkStats | undefined {
  for (const pid of pids) {
    const netns = netnsOf(fsRoot, pid);
    if (netns === undefined) continue; // exited since cgroup.procs was read
    if (netns === hostNetns) return undefined;
    const text = readIfExists(join(fsRoot, "proc", String(pid), "net/dev"));
    if (text === undefined) continue;
    const interfaces = reportedInterfaces(text);
    const def = interfaces.find((i) => i.name === POD_DEFAULT_INTERFACE) ?? interfaces[0];
    return { time, ...(def ?? {}), interfaces };
  }
  return undefined;
}
