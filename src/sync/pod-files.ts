/**
 * The files the agent itself provides to a pod's containers, under
 * <rootDir>/pods/<uid> (upstream layout): the managed /etc/hosts and one
 * termination message file per container start. Volumes live beside them
 * and are someone else's: removal touches only these files.
 */
import { mkdirSync, rmdirSync, rmSync } from "node:fs";
import { posix } from "node:path";
import type { Mount } from "../cri/index.ts";
import type { PodDirs } from "../pods/dirs.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { hostsMount, mountsOwnHosts, writeHostsFile } from "../runtime/hosts.ts";
import { terminationMessageMount } from "../runtime/termination.ts";
import { podUid } from "../pods/identity.ts";

export interface PodFilesOptions {
  dirs: PodDirs;
  /** A uniform number in [0, 1): names the termination message files. */
  random: () => number;
  clusterDomain: string;
  /** The node's hosts file, which host-network pods see (upstream /etc/hosts). */
  nodeHostsPath: string;
}

export class PodFiles {
  /** Pods whose hosts file was written for their current IPs. */
  private readonly hostsReady = new Set<string>();

  constructor(private readonly opts: PodFilesOptions) {}

  /** Before a container start: (re)writes the pod's hosts file for its IPs. Throws when it cannot be written. */
  prepare(pod: Pod, ips: string[]): void {
    const uid = podUid(pod);
    const path = this.opts.dirs.etcHosts(uid);
    mkdirSync(posix.dirname(path), { recursive: true, mode: 0o750 });
    if (writeHostsFile(path, { pod, ips, clusterDomain: this.opts.clusterDomain, nodeHostsPath: this.opts.nodeHostsPath })) this.hostsReady.add(uid);
    else this.hostsReady.delete(uid);
  }

  /** The mounts of one container start: the hosts file (unless the container mounts its own), then a new termination message file. */
  mounts(pod: Pod, spec: ContainerSpec): Mount[] {
    const uid = podUid(pod);
    const mounts: Mount[] = [];
    if (this.hostsReady.has(uid) && !mountsOwnHosts(spec)) mounts.push(hostsMount(this.opts.dirs.etcHosts(uid)));
    mounts.push(terminationMessageMount(this.opts.dirs, pod, spec, this.opts.random));
    return mounts;
  }

  /** Once the pod's containers are removed: its hosts file and termination messages, and the pod directory if nothing else is left there. Idempotent. */
  remove(uid: string): void {
    this.hostsReady.delete(uid);
    const dir = this.opts.dirs.pod(uid);
    rmSync(posix.dirname(this.opts.dirs.container(uid, "any")), { recursive: true, force: true });
    rmSync(this.opts.dirs.etcHosts(uid), { force: true });
    try {
      rmdirSync(dir); // only when empty: volumes are removed by their own manager
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
    }
  }
}
