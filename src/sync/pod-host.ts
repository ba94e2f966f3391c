/**
 * A pod's host side, outside the container runtime: its volumes, its pod
 * cgroup, its own files (hosts file, termination messages) and its log
 * directory. The pod syncer sets volumes up before each runtime step and
 * tears everything down after the runtime removed the pod; the runtime asks
 * for the cgroup, the mounts and the log directories while it starts the pod
 * (PodHostResources, runtime/index.ts).
 */
import { mkdirSync, rmSync } from "node:fs";
import { posix } from "node:path";
import type { Mount } from "../cri/index.ts";
import { podEventRef, type EventRecorder } from "../events/recorder.ts";
import { podLogDirectory, type PodDirs } from "../pods/dirs.ts";
import { type PodRef, podUid } from "../pods/identity.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { PodHostResources, SyncResult } from "../runtime/index.ts";
import type { NodeSettings } from "../runtime/cri-config.ts";
import { errorMessage } from "../util/errors.ts";
import { VolumeSetupError, type VolumeManager } from "../volumes/index.ts";
import { PodFiles } from "./pod-files.ts";

export interface PodCgroupHooks {
  /** Creates or updates the pod cgroup; returns the cgroup parent for the runtime. Idempotent. */
  ensurePod(pod: Pod): Promise<string>;
  /** Removes the pod cgroup once nothing of the pod runs. Idempotent. */
  removePod(uid: string): Promise<void>;
}

export interface PodHostOptions {
  /** Root of pod log directories (podLogsDir). */
  podLogsDir: string;
  /** Where pod cgroups go without cgroup hooks (a fixed parent path); "" lets the runtime place them. */
  podsCgroupParent: string;
  clusterDomain: string;
  /** FailedMount events; none without it. */
  recorder?: EventRecorder;
  /** Pod cgroups (created with their limits before the sandbox, removed with the pod); without them, a fixed parent path. */
  cgroups?: PodCgroupHooks;
  /** Volumes: set up (and refreshed) on every sync before anything starts, torn down with the pod. */
  volumes?: VolumeManager;
  /** Where pod files live (<rootDir>/pods); with it, containers get the managed /etc/hosts and a termination message file. */
  podDirs?: PodDirs;
  /** Uniform in [0, 1); names termination message files. Default Math.random. */
  random?: () => number;
  /** The node's hosts file, for host-network pods (default /etc/hosts). */
  nodeHostsPath?: string;
  /** User namespaces of hostUsers: false pods: the pod's slot is freed with its cgroup, as upstream's SyncTerminatedPod. */
  userNamespaces?: { release(uid: string): void };
}

/** Volumes a sync could not set up: nothing of the pod starts; sync again after `retryAfterMs`. */
export interface VolumesNotReady {
  result: SyncResult;
  retryAfterMs: number;
}

export class PodHost implements PodHostResources {
  /** Consecutive volume setup failures per pod UID: the retry comes sooner for the first ones. */
  private readonly mountFailures = new Map<string, number>();
  private readonly podFiles: PodFiles | undefined;

  constructor(private readonly opts: PodHostOptions) {
    this.podFiles = opts.podDirs
      ? new PodFiles({ dirs: opts.podDirs, random: opts.random ?? Math.random, clusterDomain: opts.clusterDomain, nodeHostsPath: opts.nodeHostsPath ?? "/etc/hosts" })
      : undefined;
  }

  /** A host for the runtime's node settings (its log root, cgroup parent and cluster domain) and what else is given. */
  static forNode(node: Pick<NodeSettings, "podLogsDir" | "podsCgroupParent" | "clusterDomain">, opts: Omit<PodHostOptions, keyof NodeSettings> = {}): PodHost {
    return new PodHost({ podLogsDir: node.podLogsDir, podsCgroupParent: node.podsCgroupParent, clusterDomain: node.clusterDomain, ...opts });
  }

  /**
   * Upstream WaitForAttachAndMount: nothing of the pod starts (or restarts)
   * until its volumes are ready; each volume that fails is a FailedMount
   * event, and the sync is retried.
   */
  async setupVolumes(pod: Pod): Promise<VolumesNotReady | undefined> {
    const uid = podUid(pod);
    try {
      await this.opts.volumes?.setupPod(pod);
      this.mountFailures.delete(uid);
      return undefined;
    } catch (err) {
      const failures = err instanceof VolumeSetupError ? err.failures : [{ volume: "", message: errorMessage(err), mounted: false }];
      for (const f of failures)
        this.opts.recorder?.event(podEventRef(pod), "Warning", "FailedMount", `MountVolume.SetUp failed for volume ${JSON.stringify(f.volume)} : ${f.message}`);
      // A failed refresh of a volume the containers already have does not stop the pod (upstream remounts in the background).
      if (failures.every((f) => f.mounted)) return undefined;
      const message = `unmounted volumes=[${failures.map((f) => f.volume).join(" ")}]: ${errorMessage(err)}`;
      // Soon at first, as upstream's volume manager retries within a second: a fresh pod's token or
      // configMap is often refused only until the API server's node authorizer has seen the binding.
      const attempt = this.mountFailures.get(uid) ?? 0;
      this.mountFailures.set(uid, attempt + 1);
      return { result: { action: "CreatePodSandbox", target: uid, error: { reason: "FailedMount", message } }, retryAfterMs: Math.min(10_000, 500 * 2 ** attempt) };
    }
  }

  cgroupParent(pod: Pod): string {
    const root = this.opts.podsCgroupParent;
    return root ? posix.join(root, `pod${pod.metadata.uid}`) : "";
  }

  async ensureCgroup(pod: Pod): Promise<string> {
    return this.opts.cgroups ? this.opts.cgroups.ensurePod(pod) : this.cgroupParent(pod);
  }

  ensureLogDirectory(path: string): void {
    mkdirSync(path, { recursive: true, mode: 0o755 });
  }

  async containerMounts(pod: Pod, container: ContainerSpec, podIPs: string[]): Promise<Mount[]> {
    this.podFiles?.prepare(pod, podIPs);
    return [...((await this.opts.volumes?.mountsFor(pod, container)) ?? []), ...(this.podFiles?.mounts(pod, container) ?? [])];
  }

  /**
   * Once the runtime removed the pod's containers and sandboxes: its cgroup,
   * then its volumes, then its log directory and files, each only when what
   * came before is gone. Idempotent; one result per failure.
   */
  async teardown(ref: PodRef): Promise<SyncResult[]> {
    if (this.opts.cgroups) {
      try {
        await this.opts.cgroups.removePod(ref.uid);
      } catch (err) {
        return [{ action: "RemovePodSandbox", target: ref.uid, error: { reason: "RemovePodCgroupError", message: errorMessage(err) } }];
      }
    }
    this.opts.userNamespaces?.release(ref.uid);
    if (this.opts.volumes) {
      try {
        await this.opts.volumes.teardownPod(ref.uid);
      } catch (err) {
        return [{ action: "RemovePodSandbox", target: ref.uid, error: { reason: "UnmountVolumeError", message: errorMessage(err) } }];
      }
    }
    // Upstream removes a deleted pod's log directory with its containers.
    rmSync(podLogDirectory(this.opts.podLogsDir, ref), { recursive: true, force: true });
    this.podFiles?.remove(ref.uid);
    this.mountFailures.delete(ref.uid);
    return [];
  }
}
