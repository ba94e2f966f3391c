/**
 * Builds the volume manager for the agent: in cluster mode with the watched
 * configMap/secret cache and the token manager over the API, standalone
 * with neither (those volumes then fail with a clear reason).
 */
import type { KubeApi } from "../api/index.ts";
import { ObjectCache } from "../api/object-cache.ts";
import { noPodObjects, type PodObjects, type RequestToken } from "../api/objects.ts";
import type { Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { EventRecorder } from "../events/recorder.ts";
import type { VolumeManager } from "./index.ts";
import { PodVolumeManager } from "./manager.ts";
import { createMounter, type Mounter } from "./mount.ts";
import { TokenManager } from "./token.ts";
import { type CsiDriverLookup, CsiVolumes } from "./csi.ts";
import { checkpointedPodObjects, checkpointedTokenRequest, pruneObjectCheckpoints, type ObjectCheckpointOptions } from "../checkpoint/objects.ts";

export interface VolumeWiring {
  rootDir: string;
  api?: KubeApi;
  /** The node's allocatable amounts (cpu in millicores, bytes otherwise). */
  allocatable: { cpu: number; memory: number; "ephemeral-storage": number };
  clock: Clock;
  logger: Logger;
  mounter?: Mounter;
  /** Offline autonomy: the referenced objects and tokens are checkpointed and used while the API cannot answer. */
  checkpoint?: ObjectCheckpointOptions;
  /** This node's name and labels (a local PersistentVolume's node affinity is checked against them). */
  nodeIdentity: { name: string; labels: Record<string, string> };
  /** Events of the volume plugins (CSI node expansion). */
  recorder?: EventRecorder;
  /** The registered CSI drivers and enableControllerAttachDetach, for csi volumes. */
  csi: { drivers: CsiDriverLookup; controllerAttachDetach: boolean };
}

/** The volume manager and the PodObjects it reads (env references should read the same); disposing stops the watches. */
export interface VolumeSubsystem extends AsyncDisposable {
  podObjects: PodObjects;
  volumes: VolumeManager;
}

export async function createVolumeManager(w: VolumeWiring): Promise<VolumeSubsystem> {
  const mounter = w.mounter ?? createMounter();
  // Upstream setupDataDirs: the root directory propagates mounts, so volumes mounted below it reach
  // containers with mountPropagation HostToContainer or Bidirectional.
  try {
    if (await mounter.makeRShared(w.rootDir)) w.logger.info("made the root directory a shared mount", { rootDir: w.rootDir });
  } catch (err) {
    w.logger.warn("could not make the root directory a shared mount; mountPropagation will fail for volumes below it", { rootDir: w.rootDir, err: errorMessage(err) });
  }
  const cache = w.api ? new ObjectCache({ api: w.api, clock: w.clock, logger: w.logger }) : undefined;
  if (w.checkpoint) pruneObjectCheckpoints(w.checkpoint);
  const objects = cache && w.checkpoint ? checkpointedPodObjects(cache, w.checkpoint) : cache;
  const api = w.api;
  const requestToken: RequestToken | undefined = api
    ? async (spec) => {
        const tr = await api.createToken(spec.namespace, spec.serviceAccount, {
          audiences: spec.audiences,
          expirationSeconds: spec.expirationSeconds,
          boundObjectRef: { apiVersion: "v1", kind: "Pod", name: spec.pod.name, uid: spec.pod.uid },
        });
        return { token: tr.token, expiresAt: Date.parse(tr.expirationTimestamp), ...(tr.expirationSeconds ? { lifetimeSeconds: tr.expirationSeconds } : {}) };
      }
    : undefined;
  const tokens = requestToken ? new TokenManager({ clock: w.clock, request: w.checkpoint ? checkpointedTokenRequest(requestToken, w.checkpoint) : requestToken }) : undefined;
  const manager = new PodVolumeManager({
    rootDir: w.rootDir,
    mounter,
    objects: objects ?? noPodObjects,
    ...(tokens ? { tokens } : {}),
    node: { cpuMilli: w.allocatable.cpu, memoryBytes: w.allocatable.memory, ephemeralStorageBytes: w.allocatable["ephemeral-storage"] },
    clock: w.clock,
    logger: w.logger,
    ...(w.api ? { claims: w.api } : {}),
    nodeIdentity: w.nodeIdentity,
    csi: new CsiVolumes({
      rootDir: w.rootDir,
      drivers: w.csi.drivers,
      ...(w.api ? { api: w.api } : {}),
      nodeName: w.nodeIdentity.name,
      controllerAttachDetach: w.csi.controllerAttachDetach,
      ...(w.recorder ? { recorder: w.recorder } : {}),
      clock: w.clock,
      logger: w.logger,
    }),
  });
  if (!cache) return { podObjects: noPodObjects, volumes: manager, [Symbol.asyncDispose]: async () => {} };
  // A pod's referenced objects are watched from its first setup until its volumes are torn down.
  const volumes: VolumeManager = {
    setupPod: async (pod: Pod) => {
      cache.registerPod(pod);
      await manager.setupPod(pod);
    },
    mountsFor: (pod, container) => manager.mountsFor(pod, container),
    teardownPod: async (uid) => {
      cache.unregisterPod(uid);
      await manager.teardownPod(uid);
    },
    cleanupOrphans: (isKnown) => manager.cleanupOrphans(isKnown),
    claimVolumes: (uid) => manager.claimVolumes(uid),
    driverVolumeStats: (uid) => manager.driverVolumeStats(uid),
  };
  return { podObjects: objects ?? cache, volumes, [Symbol.asyncDispose]: () => cache[Symbol.asyncDispose]() };
}
