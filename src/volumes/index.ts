/**
 * The volume manager's edge: what the runtime manager calls to get a pod's
 * volumes ready before anything of the pod starts, the mounts of each
 * container, and the teardown once the pod's containers are gone.
 * manager.ts is the implementation; `noVolumes` is for runtimes in tests
 * that do not exercise volumes.
 */
import type { Mount } from "../cri/index.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { DriverVolume } from "../stats/volumes.ts";

export interface VolumeManager {
  /**
   * Sets up every volume of the pod, or refreshes it (configMap, secret,
   * downwardAPI and projected content, tokens near expiry). Called on every
   * sync of a running pod; idempotent, and reuses what an earlier run (or an
   * earlier agent process) set up. Throws VolumeSetupError listing the
   * volumes that could not be set up or refreshed; the others are ready.
   */
  setupPod(pod: Pod): Promise<void>;
  /**
   * The CRI mounts of one container, subPaths resolved safely. Called before
   * each container start. Throws VolumeMountError (the container config
   * cannot be made: CreateContainerConfigError).
   */
  mountsFor(pod: Pod, container: ContainerSpec): Promise<Mount[]>;
  /** Unmounts and removes everything of the pod below its directory; called once its containers are removed. Idempotent. */
  teardownPod(uid: string): Promise<void>;
  /** Pod directories of pods neither the agent nor the runtime knows: unmounted and removed. */
  cleanupOrphans(isKnown: (uid: string) => boolean): Promise<void>;
  /** The pod's volumes backed by a claim whose PV is `local`, set up and where they are: volume stats report their file system by claim (hostPath PVs report nothing, CSI ones come from their driver). */
  claimVolumes(uid: string): ClaimedVolume[];
  /**
   * The pod's volumes whose plugin measures them itself (CSI drivers with
   * GET_VOLUME_STATS), asked now; volumes not measured this way are absent.
   */
  driverVolumeStats(uid: string): Promise<MeasuredVolume[]>;
}

/**
 * A volume's usage as its plugin reported it (upstream volume.Metrics), by
 * the pod's volume name and with its claim: the shape the stats collector
 * takes (stats/volumes.ts, whose MeasuredFs holds the six usage fields
 * once; agent.ts hands driverVolumeStats to the collector). stats imports
 * nothing of volumes, so this edge makes no cycle.
 */
export type MeasuredVolume = DriverVolume;

export interface ClaimedVolume {
  name: string;
  path: string;
  pvcRef: { name: string; namespace: string };
}

/** One volume that failed to set up, with upstream's wording of why. */
export interface VolumeFailure {
  volume: string;
  message: string;
  /**
   * The volume was set up before (a refresh failed: the configMap is gone,
   * the API is down): containers keep its last content and the pod goes on
   * syncing. False when it never was: nothing of the pod may start.
   */
  mounted: boolean;
}

export class VolumeSetupError extends Error {
  override readonly name = "VolumeSetupError";
  constructor(readonly failures: VolumeFailure[]) {
    super(failures.map((f) => `MountVolume.SetUp failed for volume ${JSON.stringify(f.volume)} : ${f.message}`).join("; "));
  }
}

/** A container's mounts cannot be made (missing volume, unsafe subPath); the container is not created. */
export class VolumeMountError extends Error {
  override readonly name = "VolumeMountError";
}
