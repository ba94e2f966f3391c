/** Node resources: stats, image GC, log rotation and the eviction manager that stats feed. */
import { parseQuantity } from "../config/index.ts";
import type { CriService } from "../cri/index.ts";
import type { EventRecorder } from "../events/recorder.ts";
import { createEvictionManager } from "../eviction/index.ts";
import { createImageGC, statfsBytes } from "../images/index.ts";
import { createLogRotation } from "../logs/index.ts";
import { createStatsCollector } from "../stats/index.ts";
import type { CriPodRuntime } from "../runtime/manager.ts";
import type { ActivePods, PodStopper } from "../pods/active.ts";
import type { VolumeManager } from "../volumes/index.ts";
import { sandboxImageOf } from "../cri/runtime-info.ts";
import { RuntimeImageFs } from "../images/imagefs.ts";
import type { NodeCgroups } from "./node.ts";
import type { Wiring } from "./wiring.ts";
import type { ActivePodCgroups } from "../cgroups/index.ts";

/** Node resources: stats (which feed eviction), image GC, log rotation and the eviction manager, each disposed with the stack. */
export async function buildNodeResources(
  w: Wiring,
  o: {
    node: Pick<NodeCgroups, "podsCgroupParent">;
    podCgroups: Pick<ActivePodCgroups, "podCgroupPath"> | undefined;
    pods: ActivePods & Pick<PodStopper, "evict" | "stageOf">;
    cri: CriService;
    vol: { volumes: Pick<VolumeManager, "claimVolumes" | "driverVolumeStats"> };
    recorder: EventRecorder;
    /** Its dead containers are collected before the eviction of a pod for disk. */
    runtime: Pick<CriPodRuntime, "garbageCollect">;
  },
) {
  const { config, stack, clock, logger } = w;
  const { podCgroups, pods, cri, recorder, runtime } = o;
  const { podsCgroupParent } = o.node;
  const { volumes } = o.vol;
  const k = config.kubelet;
  const stats = stack.use(
    "stats",
    createStatsCollector({
      nodeName: config.nodeName,
      rootDir: config.rootDir,
      cgroupRoot: podsCgroupParent,
      ...(podCgroups ? { podCgroups } : {}),
      cri,
      pods,
      podLogsDir: k.podLogsDir,
      volumeStatsAggPeriodMs: k.volumeStatsAggPeriod,
      volumes,
      psi: k.featureGates["KubeletPSI"] !== false, // beta, on by default in 1.34: pressure in /stats/summary (cgroup v2)
      clock,
      logger,
    }),
  );
  const pauseImage = await sandboxImageOf(cri);
  const imageGC = stack.use(
    "image GC",
    createImageGC({
      cri,
      highThresholdPercent: k.imageGCHighThresholdPercent,
      lowThresholdPercent: k.imageGCLowThresholdPercent,
      minimumAgeMs: k.imageMinimumGCAge,
      ...(k.imageMaximumGCAge ? { maximumAgeMs: k.imageMaximumGCAge } : {}),
      ...(pauseImage ? { pauseImage } : {}),
      statfs: statfsBytes,
      clock,
      logger,
      recorder,
      nodeName: config.nodeName,
    }),
  );
  const logRotation = stack.use("log rotation", createLogRotation({ cri, maxSizeBytes: parseQuantity(k.containerLogMaxSize), maxFiles: k.containerLogMaxFiles, clock, logger }));
  const eviction = stack.use(
    "eviction manager",
    createEvictionManager({
      config: k,
      stats,
      pods,
      reclaim: { containers: runtime, images: imageGC },
      imageFs: new RuntimeImageFs(cri, config.rootDir),
      clock,
      logger,
      recorder,
      nodeName: config.nodeName,
    }),
  );
  return { stats, pauseImage, imageGC, logRotation, eviction };
}
