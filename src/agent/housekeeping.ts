/** What housekeeping runs besides the syncLoop's own: heap pacing, pod cgroups, orphaned pod directories. */
import type { DeviceManager } from "../devices/index.ts";
import type { PodCgroups } from "../cgroups/index.ts";
import type { Pleg } from "../pleg/generic.ts";
import type { AllocationManager } from "../allocation/index.ts";
import type { PodConfig } from "../sources/podconfig.ts";
import type { PodWorkers } from "../sync/podworkers.ts";
import { GcPacer, type Heap } from "../memory/gc-pacer.ts";
import type { Wiring } from "./wiring.ts";
import { podUid } from "../pods/identity.ts";
import type { VolumeManager } from "../volumes/index.ts";
import { everyMs } from "../util/every.ts";
import { errorMessage } from "../util/errors.ts";
import type { PodUserNamespaces } from "../userns/index.ts";
import { podCgroupHousekeeping } from "../cgroups/housekeeping.ts";

/** What housekeeping runs besides the syncLoop's own (orphans, mirror pods, GC): heap pacing, pod cgroups, orphaned pod directories. */
export function housekeepingTasks(
  w: Pick<Wiring, "clock" | "logger">,
  o: {
    heap: Heap;
    node: { podCgroups: PodCgroups | undefined };
    workers: PodWorkers;
    pleg: Pleg;
    podConfig: PodConfig;
    vol: { volumes: Pick<VolumeManager, "cleanupOrphans"> };
    allocation: AllocationManager | undefined;
    devices: Pick<DeviceManager, "removeOrphans">;
    userNamespaces: Pick<PodUserNamespaces, "cleanupOrphans">;
  },
): (() => void)[] {
  const { clock, logger } = w;
  const { workers, pleg, podConfig, allocation, devices, userNamespaces } = o;
  const { podCgroups } = o.node;
  const { volumes } = o.vol;
  // Garbage is collected by heap growth, as Go's GOGC does, not by the machine's RAM (memory/gc-pacer.ts).
  const gcPacer = new GcPacer({ heap: o.heap, clock, logger });
  // Whether a pod UID is still known here (a worker, the runtime, a source): undefined until the PLEG relisted and every
  // source delivered, since before that a pod still loading would look orphaned.
  const knownPods = (): ((uid: string) => boolean) | undefined => {
    if (!pleg.hasRelisted() || !podConfig.allSourcesReady()) return undefined;
    const known = new Set([...pleg.runtimePods().map((p) => p.uid), ...podConfig.desiredPods().map((p) => podUid(p))]);
    return (uid) => workers.has(uid) || known.has(uid);
  };
  return [
    () => gcPacer.tick(),
    ...(podCgroups ? [everyMs(60_000, clock, () => podCgroupHousekeeping(podCgroups, workers, pleg, logger))] : []),
    // Directories (and mounts) of pods gone from the agent and the runtime, as upstream cleanupOrphanedPodDirs.
    // Only once every source delivered its pods: a restarted node must not lose emptyDirs of pods still loading.
    // User namespace slots of pods gone (no source wants them, none runs) or whose directory is gone: every pass, as
    // upstream's HandlePodCleanups (CleanupOrphanedPodUsernsAllocations), once every source delivered its pods.
    () => {
      const known = knownPods();
      if (!known) return;
      try {
        const released = userNamespaces.cleanupOrphans(known);
        if (released.length) logger.v(2).info("released user namespaces of orphaned pods", { pods: released });
      } catch (err) {
        logger.error("Failed cleaning up orphaned pod user namespaces allocations", { err: errorMessage(err) });
      }
    },
    everyMs(60_000, clock, async () => {
      const known = knownPods();
      if (!known) return;
      await volumes.cleanupOrphans(known);
      allocation?.removeOrphans(known);
      devices.removeOrphans(known);
    }),
  ];
}
