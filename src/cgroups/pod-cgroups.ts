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
 *
 * With the systemd driver the same levels are slices (systemd.ts):
 *   /kubepods.slice, /kubepods.slice/kubepods-pod<uid>.slice,
 *   /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice, ...
 * (the UID with "-" replaced by "_"), and the CRI gets that path too.
 */
import { join } from "node:path";
import type { Pod } from "../pods/schema.ts";
import type { Logger } from "../util/log.ts";
import { CgroupError, fromErrno, isCgroupError } from "./errors.ts";
import type { CgroupFs } from "./fs.ts";
import type { CgroupBackend } from "./backend.ts";
import { podQosClass, type QosClass } from "./qos.ts";
import { parseSystemdName, systemdCgroupPath } from "./systemd.ts";
import { nodeResourceConfig, podResourceConfig, qosResourceConfigs, unboundedHugePages, type NodeAllocatable, type ResourceConfig } from "./resources.ts";
import { podUid } from "../pods/identity.ts";

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
  /**
   * Writes `config` to an existing cgroup outside the pod tree (systemReservedCgroup,
   * kubeReservedCgroup), named as the driver names cgroups: a cgroupfs path, or a
   * slice (`system.slice`, `/system.slice`) with the systemd driver, whose unit
   * properties are set too. Throws CgroupError NotFound when it does not exist
   * (upstream's Validate); never creates it. Returns its cgroupfs path.
   */
  enforceExisting(name: string, config: ResourceConfig): Promise<string>;
  readonly version: "v1" | "v2";
  /** The cgroupfs path of kubepods (/kubepods, or /kubepods.slice with the systemd driver), below cgroupRoot. */
  readonly kubepods: string;
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
  /** How cgroup names become paths: cgroupfs ("/kubepods/burstable/pod<uid>") or systemd slices. Default cgroupfs. */
  driver?: "cgroupfs" | "systemd";
  /** The host's huge page sizes in bytes: the QoS levels get each unbounded. Default none. */
  hugePageSizesBytes?: readonly number[];
}

/** upstream's CgroupName: components from the root, turned into a path by the driver. */
interface Naming {
  path(components: readonly string[]): string;
  /** upstream's CgroupName of a configured cgroup (cgroupfs: split on "/"; systemd: ParseSystemdToCgroupName). */
  parse(name: string): string[];
  /** The pod UID of a directory entry below a QoS level, if it is a pod's. */
  uidOf(qos: readonly string[], entry: string): string | undefined;
}

const cgroupfsNaming: Naming = {
  path: (components) => join("/", ...components),
  parse: (name) => join("/", name).split("/").filter(Boolean),
  uidOf: (_qos, entry) => (entry.startsWith(POD_PREFIX) && entry.length > POD_PREFIX.length ? entry.slice(POD_PREFIX.length) : undefined),
};

const systemdNaming: Naming = {
  path: systemdCgroupPath,
  parse: parseSystemdName,
  uidOf(qos, entry) {
    if (!entry.endsWith(".slice")) return undefined;
    const parts = parseSystemdName(entry);
    const last = parts.at(-1) ?? "";
    const sameParent = parts.length === qos.length + 1 && qos.every((q, i) => parts[i] === q);
    return sameParent && last.startsWith(POD_PREFIX) && last.length > POD_PREFIX.length ? last.slice(POD_PREFIX.length) : undefined;
  },
};

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
  const naming = deps.driver === "systemd" ? systemdNaming : cgroupfsNaming;
  const rootComponents = join("/", deps.cgroupRoot || "/")
    .split("/")
    .filter(Boolean);
  const kubepodsName = [...rootComponents, "kubepods"];
  const qosName: Record<QosClass, string[]> = { Guaranteed: kubepodsName, Burstable: [...kubepodsName, "burstable"], BestEffort: [...kubepodsName, "besteffort"] };
  const kubepods = naming.path(kubepodsName);
  const qosDir = { Guaranteed: kubepods, Burstable: naming.path(qosName.Burstable), BestEffort: naming.path(qosName.BestEffort) } as const;
  let allocatableMemory: number | undefined;
  const qosHugePages = unboundedHugePages(deps.hugePageSizesBytes ?? []);

  const podPathOf = (qos: QosClass, uid: string) => naming.path([...qosName[qos], POD_PREFIX + checkUid(uid)]);
  const podPath = (pod: Pod) => podPathOf(podQosClass(pod), podUid(pod));

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
    kubepods,
    podCgroupPath: podPath,

    async setupNode({ allocatable, enforce }) {
      allocatableMemory = allocatable.memoryBytes;
      await backend.ensure(kubepods);
      await backend.apply(kubepods, nodeResourceConfig(allocatable, enforce));
      // Burstable keeps the kernel default until updateQos knows the pods
      // (upstream creates it with no values too); BestEffort is always minimal.
      await backend.ensure(qosDir.Burstable);
      await backend.ensure(qosDir.BestEffort);
      // Both QoS levels: huge pages unbounded (upstream setHugePagesUnbounded), so only kubepods and the pods bound them.
      await backend.apply(qosDir.Burstable, { hugePageLimits: qosHugePages });
      await backend.apply(qosDir.BestEffort, { cpuShares: 2, hugePageLimits: qosHugePages });
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
      await backend.apply(qosDir.Burstable, { ...c.burstable, hugePageLimits: qosHugePages });
      await backend.apply(qosDir.BestEffort, { ...c.besteffort, hugePageLimits: qosHugePages });
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
      for (const qos of ["Guaranteed", "Burstable", "BestEffort"] as const) {
        const path = podPathOf(qos, uid);
        if (backend.release && backend.dirs(path).some((d) => fs.existsSync(d))) {
          try {
            await backend.release(path);
          } catch (e) {
            failures.push(isCgroupError(e) ? e : fromErrno("release", path, e));
            continue;
          }
        }
        for (const dir of backend.dirs(path)) {
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

    async enforceExisting(name, config) {
      const components = naming.parse(name);
      if (components.length === 0 || components.some((c) => c === "." || c === "..")) throw new CgroupError("Invalid", "name", name, "not a cgroup below the root");
      const path = naming.path(components);
      const missing = backend.dirs(path).filter((d) => !fs.existsSync(d));
      if (missing.length > 0) throw new CgroupError("NotFound", "enforce", path, `the cgroup does not exist (${missing.join(", ")}); it is not created`);
      await backend.apply(path, config);
      logger.v(2).info("reserved cgroup limits enforced", { name, path, ...config });
      return path;
    },

    async listPodUids() {
      const uids = new Set<string>();
      for (const qos of ["Guaranteed", "Burstable", "BestEffort"] as const) {
        for (const dir of backend.dirs(qosDir[qos])) {
          for (const name of await listDirs(dir)) {
            const uid = naming.uidOf(qosName[qos], name);
            if (uid !== undefined) uids.add(uid);
          }
        }
      }
      return [...uids].sort();
    },
  };
}
