/**
 * The pod cgroup tree of the cgroupfs driver, named as upstream names it:
 *
 *   <cgroupRoot>/kubepods                   node allocatable (Guaranteed pods live here)
 *   <cgroupRoot>/kubepods/pod<uid>          a Guaranteed pod
 *   <cgroupRoot>/kubepods/burstable/pod<uid>
 *   <cgroupRoot>/kubepods/besteffort/pod<uid>
 *
 * When the agent calls what (after upstream's container manager and syncPod):
 *   start            setupNode
 *   before a pod's   updateQos(active pods incl. the new one) if the pod has no
 *   first sandbox    cgroup yet, then ensurePod → cgroup_parent for RunPodSandbox
 *   every minute     updateQos(active pods)
 *   pod finished     removePod once the runtime has no container of it left
 *   housekeeping     listPodUids → removePod for UIDs no source wants
 */
import { join } from "node:path";
import type { Pod } from "../pods/schema.ts";
import type { Logger } from "../util/log.ts";
import { CgroupError, fromErrno, isCgroupError } from "./errors.ts";
import type { CgroupFs } from "./fs.ts";
import type { CgroupBackend } from "./backend.ts";
import { podQosClass } from "./qos.ts";
import { nodeResourceConfig, podResourceConfig, qosResourceConfigs, type NodeAllocatable } from "./resources.ts";

export interface PodCgroups {
  /** Creates kubepods and the QoS cgroups, and enforces node allocatable on kubepods when enforceNodeAllocatable includes "pods". Idempotent; called at start. */
  setupNode(opts: { allocatable: NodeAllocatable; enforce: boolean }): Promise<void>;
  /** Creates or updates the pod's cgroup with its limits; returns the cgroup parent to hand to containerd (a cgroupfs path like /kubepods/burstable/pod<uid>, relative to the hierarchy root). Idempotent. */
  ensurePod(pod: Pod): Promise<string>;
  /** The path ensurePod would return, without touching the filesystem. */
  podCgroupPath(pod: Pod): string;
  /** Removes the pod cgroup once its containers are gone (rmdir of empty dirs, children first; v1: in every hierarchy). Idempotent; never kills processes. */
  removePod(uid: string): Promise<void>;
  /** Recomputes QoS-level values (burstable/besteffort cpu shares, memory where applicable) from the active pods. */
  updateQos(activePods: Pod[]): Promise<void>;
  /** UIDs of pods that have a cgroup (orphan cleanup). */
  listPodUids(): Promise<string[]>;
  readonly version: "v1" | "v2";
}

export interface PodCgroupsDeps {
  backend: CgroupBackend;
  fs: CgroupFs;
  logger: Logger;
  cgroupRoot: string;
  podPidsLimit: number;
  cpuCFSQuota: boolean;
  cpuCFSQuotaPeriodUs: number;
  memoryQoS: boolean;
  qosReservedMemoryPercent?: number;
}

const POD_PREFIX = "pod";
/** A UID becomes a path element: refuse anything that could leave the QoS directory. */
const SAFE_UID = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

function checkUid(uid: string | undefined): string {
  if (uid === undefined || !SAFE_UID.test(uid)) {
    throw new CgroupError("Invalid", "name", String(uid), "pod UID missing or not usable as a cgroup name");
  }
  return uid;
}

export function createPodCgroupsOn(deps: PodCgroupsDeps): PodCgroups {
  const { backend, fs, logger } = deps;
  const root = join("/", deps.cgroupRoot || "/");
  const kubepods = join(root, "kubepods");
  const qosDir = { Guaranteed: kubepods, Burstable: join(kubepods, "burstable"), BestEffort: join(kubepods, "besteffort") } as const;
  const qosDirs = Object.values(qosDir);
  let allocatableMemory: number | undefined;

  const podPath = (pod: Pod) => join(qosDir[podQosClass(pod)], POD_PREFIX + checkUid(pod.metadata.uid));

  async function listDirs(dir: string): Promise<string[]> {
    try {
      return await fs.listDirs(dir);
    } catch (e) {
      throw fromErrno("list", dir, e);
    }
  }

  /** rmdir children first; a cgroup with processes stays (Busy). */
  async function removeTree(dir: string): Promise<void> {
    for (const child of await listDirs(dir)) await removeTree(join(dir, child));
    try {
      await fs.rmdir(dir);
    } catch (e) {
      if ((e as { code?: string }).code === "ENOENT") return;
      throw fromErrno("rmdir", dir, e);
    }
  }

  return {
    version: backend.version,
    podCgroupPath: podPath,

    async setupNode({ allocatable, enforce }) {
      allocatableMemory = allocatable.memoryBytes;
      await backend.ensure(kubepods);
      await backend.apply(kubepods, nodeResourceConfig(allocatable, enforce));
      // Burstable keeps the kernel default until updateQos knows the pods
      // (upstream creates it with no values too); BestEffort is always minimal.
      await backend.ensure(qosDir.Burstable);
      await backend.ensure(qosDir.BestEffort);
      await backend.apply(qosDir.BestEffort, { cpuShares: 2 });
      logger.v(2).info("node cgroups ready", { version: backend.version, kubepods, enforce, ...allocatable });
    },

    async updateQos(activePods) {
      const c = qosResourceConfigs(activePods, {
        memoryQoS: deps.memoryQoS && backend.version === "v2",
        ...(deps.qosReservedMemoryPercent !== undefined ? { qosReservedMemoryPercent: deps.qosReservedMemoryPercent } : {}),
        ...(allocatableMemory !== undefined ? { allocatableMemoryBytes: allocatableMemory } : {}),
      });
      await backend.ensure(qosDir.Burstable);
      await backend.ensure(qosDir.BestEffort);
      if (Object.keys(c.guaranteed).length > 0) await backend.apply(kubepods, c.guaranteed);
      await backend.apply(qosDir.Burstable, c.burstable);
      await backend.apply(qosDir.BestEffort, c.besteffort);
      logger.v(4).info("QoS cgroups updated", { pods: activePods.length, burstableShares: c.burstable.cpuShares });
    },

    async ensurePod(pod) {
      const path = podPath(pod);
      await backend.ensure(path);
      const config = podResourceConfig(pod, {
        cpuCFSQuota: deps.cpuCFSQuota,
        cpuCFSQuotaPeriodUs: deps.cpuCFSQuotaPeriodUs,
        podPidsLimit: deps.podPidsLimit,
        memoryQoS: deps.memoryQoS && backend.version === "v2",
      });
      await backend.apply(path, config);
      logger.v(3).info("pod cgroup ensured", { pod: pod.metadata.name, uid: pod.metadata.uid, path, ...config });
      return path;
    },

    async removePod(uid) {
      const name = POD_PREFIX + checkUid(uid);
      const failures: CgroupError[] = [];
      for (const q of qosDirs) {
        for (const dir of backend.dirs(join(q, name))) {
          try {
            await removeTree(dir);
          } catch (e) {
            failures.push(isCgroupError(e) ? e : fromErrno("rmdir", dir, e));
          }
        }
      }
      if (failures.length > 0) {
        const first = failures[0]!;
        throw new CgroupError(first.kind, "remove", name, failures.map((f) => f.message).join("; "), { cause: first });
      }
      logger.v(3).info("pod cgroup removed", { uid });
    },

    async listPodUids() {
      const uids = new Set<string>();
      for (const q of qosDirs) {
        for (const dir of backend.dirs(q)) {
          for (const name of await listDirs(dir)) {
            if (name.startsWith(POD_PREFIX) && name.length > POD_PREFIX.length) uids.add(name.slice(POD_PREFIX.length));
          }
        }
      }
      return [...uids].sort();
    },
  };
}
