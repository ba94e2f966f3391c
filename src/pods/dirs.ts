/**
 * Where a pod's files live under the agent's root directory, laid out as
 * upstream's kubelet does (`<rootDir>/pods/<uid>/...`), so operators' tools
 * and habits carry over and a restarted agent finds what it wrote.
 */
import { posix } from "node:path";
import type { PodRef } from "./identity.ts";

export interface PodDirs {
  /** <rootDir>/pods/<uid> */
  pod(uid: string): string;
  /** <rootDir>/pods/<uid>/volumes/<plugin with / as ~>/<volume>, e.g. kubernetes.io~empty-dir. */
  volume(uid: string, plugin: string, volume: string): string;
  /** <rootDir>/pods/<uid>/volume-subpaths/<volume>/<container>/<mount index> */
  subPath(uid: string, volume: string, container: string, index: number): string;
  /** <rootDir>/pods/<uid>/containers/<container> (termination message files live below) */
  container(uid: string, container: string): string;
  /** <rootDir>/pods/<uid>/etc-hosts */
  etcHosts(uid: string): string;
  /** <rootDir>/pods: every pod directory, for cleanup of pods that are gone. */
  readonly podsRoot: string;
}

export function podDirs(rootDir: string): PodDirs {
  const podsRoot = posix.join(rootDir, "pods");
  const pod = (uid: string) => posix.join(podsRoot, uid);
  return {
    podsRoot,
    pod,
    volume: (uid, plugin, volume) => posix.join(pod(uid), "volumes", plugin.replaceAll("/", "~"), volume),
    subPath: (uid, volume, container, index) => posix.join(pod(uid), "volume-subpaths", volume, container, String(index)),
    container: (uid, container) => posix.join(pod(uid), "containers", container),
    etcHosts: (uid) => posix.join(pod(uid), "etc-hosts"),
  };
}

/** Upstream BuildPodLogsDirectory: <podLogsDir>/<namespace>_<name>_<uid>. */
export const podLogDirectory = (podLogsDir: string, pod: PodRef): string => posix.join(podLogsDir, `${pod.namespace}_${pod.name}_${pod.uid}`);
