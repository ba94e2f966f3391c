/** Checkpoints, offline autonomy, CSI drivers and the volume manager. */
import { posix } from "node:path";
import { CSI_PLUGIN_TYPE, CsiDrivers, PluginWatcher } from "../csi/index.ts";
import type { allocatableAmounts } from "../node/status.ts";
import type { EventRecorder } from "../events/recorder.ts";
import { offlineCheckpoint } from "../sources/pod-checkpoint.ts";
import { FileCheckpointStore } from "../checkpoint/index.ts";
import { createVolumeManager } from "../volumes/wire.ts";
import type { Mounter } from "../volumes/mount.ts";
import type { NodeRegistration } from "../node/registration.ts";
import type { Wiring } from "./wiring.ts";
import type { Cluster } from "./cluster.ts";

/**
 * Volumes: the local checkpoint store (one node key for what is encrypted:
 * <rootDir>/checkpoints), offline autonomy's checkpoints of API pods and what
 * they reference (cluster mode), the CSI plugin watcher (started once the
 * node controller has), and the volume manager below <rootDir>/pods with the
 * configMaps and secrets pods reference.
 */
export async function buildVolumes(
  w: Wiring,
  o: {
    cluster: Cluster | undefined;
    mounter: Mounter | undefined;
    nodeAllocatable: ReturnType<typeof allocatableAmounts>;
    nodeLabels: Record<string, string>;
    nodeRegistration: NodeRegistration;
    /** Events of the volume plugins (CSI node expansion). */
    recorder: EventRecorder;
  },
) {
  const { config, stack, clock, logger } = w;
  const { cluster, mounter, nodeAllocatable, nodeLabels, nodeRegistration, recorder } = o;
  const k = config.kubelet;
  // configMaps and secrets pods reference (watched in cluster mode), and their volumes below rootDir/pods.
  // Offline autonomy (cluster mode): API pods, and the objects and tokens they reference, checkpointed locally.
  // One store for every local checkpoint (one node key for what is encrypted): <rootDir>/checkpoints.
  const checkpoints = new FileCheckpointStore({ dir: posix.join(config.rootDir, "checkpoints"), clock, logger });
  const autonomy = cluster ? offlineCheckpoint(k.offlineAutonomy, checkpoints, logger) : undefined;
  // CSI drivers register through <rootDir>/plugins_registry (node-driver-registrar); the watcher starts once the node controller has.
  const csiDrivers = new CsiDrivers({ nodeName: config.nodeName, ...(cluster ? { api: cluster.api } : {}), node: nodeRegistration, clock, logger });
  stack.defer("CSI drivers", () => csiDrivers.close());
  const pluginWatcher = stack.use(
    "plugin watcher",
    new PluginWatcher({ dir: posix.join(config.rootDir, "plugins_registry"), handlers: { [CSI_PLUGIN_TYPE]: csiDrivers }, clock, logger }),
  );
  const { volumes, podObjects } = stack.use(
    "volume manager",
    await createVolumeManager({
      rootDir: config.rootDir,
      ...(mounter ? { mounter } : {}),
      ...(cluster ? { api: cluster.api } : {}),
      ...(autonomy ? { checkpoint: { ...autonomy, clock, logger } } : {}),
      allocatable: nodeAllocatable,
      nodeIdentity: { name: config.nodeName, labels: nodeLabels },
      csi: { drivers: csiDrivers, controllerAttachDetach: k.enableControllerAttachDetach },
      recorder,
      clock,
      logger,
    }),
  );
  return { checkpoints, autonomy, csiDrivers, pluginWatcher, volumes, podObjects };
}
