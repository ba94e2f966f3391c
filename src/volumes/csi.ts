/**
 * The CSI volume plugin (upstream pkg/volume/csi): inline `csi:` volumes
 * (the Ephemeral lifecycle mode) and PersistentVolumes with a `csi` source,
 * published by the registered driver into the pod's volume directory
 * `pods/<uid>/volumes/kubernetes.io~csi/<name>/mount`. A driver with
 * STAGE_UNSTAGE_VOLUME first stages a persistent volume once per node in
 * `plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/globalmount`,
 * unstaged when the last pod using it is gone. What was published is
 * recorded beside it in `vol_data.json` (upstream's file), so teardown after
 * an agent restart knows the driver and the volume handle.
 *
 * The CSIDriver object decides: attachRequired (the VolumeAttachment the
 * attach/detach controller makes must be attached first; its
 * attachmentMetadata is the publish context), podInfoOnMount (the pod's
 * name, namespace, UID and service account in volume_context, with
 * `csi.storage.k8s.io/ephemeral`), fsGroupPolicy, and whether inline use
 * (volumeLifecycleModes: Ephemeral) is allowed.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ApiObject, KubeApi } from "../api/index.ts";
import type { CsiNodeClient } from "../csi/index.ts";
import type { VolumeCapability } from "../csi/gen/csi/csi.ts";
import { podUid } from "../pods/identity.ts";
import type { Pod } from "../pods/schema.ts";
import type { VolumeSpec } from "../pods/volume-schema.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { setVolumeOwnership, type FsGroupChangePolicy } from "./ownership.ts";
import { failedPatch, finishedPatch, inProgressPatch, INFEASIBLE_CODES, planExpansion } from "./csi-expand.ts";
import { podEventRef, type EventRecorder } from "../events/recorder.ts";
import { intValue } from "../cgroups/values.ts";
import type { Clock } from "../util/clock.ts";
import type { MeasuredVolume } from "./index.ts";

export const CSI_PLUGIN = "kubernetes.io/csi";
const PLUGIN_DIR = "kubernetes.io~csi";
const EPHEMERAL_KEY = "csi.storage.k8s.io/ephemeral";

/** The registered drivers (csi/drivers.ts CsiDrivers); throws CsiDriverNotFoundError for one that is not. */
export interface CsiDriverLookup {
  client(driver: string): CsiNodeClient;
}

export interface CsiVolumeOptions {
  rootDir: string;
  drivers: CsiDriverLookup;
  /** CSIDriver, VolumeAttachment and secrets; standalone there is none and CSI volumes fail with why. */
  api?: KubeApi;
  nodeName: string;
  /** enableControllerAttachDetach: the attach/detach controller attaches volumes (the agent only waits for it). */
  controllerAttachDetach: boolean;
  /** Node expansion's events (FileSystemResizeSuccessful, VolumeResizeFailed) on the pod and the claim. */
  recorder?: EventRecorder;
  clock: Clock;
  logger: Logger;
}

/** One CSI volume's usage as its driver reported it, by its directory's name: an inline volume's name or a PersistentVolume's (upstream fills what the driver left out with 0). */
export type CsiVolumeStats = Omit<MeasuredVolume, "pvcRef">;

/** What upstream writes to vol_data.json. */
interface VolData {
  driverName: string;
  volumeHandle: string;
  specVolumeID: string;
  volumeLifecycleMode: "Ephemeral" | "Persistent";
  nodeName: string;
  attachmentID?: string;
}

interface DriverPolicy {
  attachRequired: boolean;
  podInfoOnMount: boolean;
  fsGroupPolicy: "ReadWriteOnceWithFSType" | "File" | "None";
  lifecycleModes: string[];
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** Upstream makeVolumeHandle: the handle of an inline volume. */
export const inlineVolumeHandle = (podUid: string, volumeName: string) => `csi-${sha256(podUid + volumeName)}`;
/** Upstream getAttachmentName: the VolumeAttachment the attach/detach controller makes. */
export const attachmentName = (volumeHandle: string, driver: string, nodeName: string) => `csi-${sha256(volumeHandle + driver + nodeName)}`;

/**
 * A PV access mode as csi.v1 VolumeCapability.AccessMode.Mode, by upstream's
 * two mappers: a driver with the SINGLE_NODE_MULTI_WRITER node capability
 * gets SINGLE_NODE_MULTI_WRITER (7) for ReadWriteOnce and
 * SINGLE_NODE_SINGLE_WRITER (6) for ReadWriteOncePod; any other driver gets
 * SINGLE_NODE_WRITER (1) for both.
 */
export function csiAccessMode(pvAccessMode: string, driverCaps: ReadonlySet<string>): number {
  const multiWriter = driverCaps.has("SINGLE_NODE_MULTI_WRITER");
  switch (pvAccessMode) {
    case "ReadWriteOnce":
      return multiWriter ? 7 : 1;
    case "ReadOnlyMany":
      return 3;
    case "ReadWriteMany":
      return 5;
    case "ReadWriteOncePod":
      return multiWriter ? 6 : 1;
    default:
      return 0;
  }
}

interface Fs {
  fsGroup?: number;
  changePolicy?: FsGroupChangePolicy;
}

function fsOf(pod: Pod): Fs {
  const sc = (pod.spec.securityContext ?? {}) as { fsGroup?: unknown; fsGroupChangePolicy?: unknown };
  return {
    ...(typeof sc.fsGroup === "number" && Number.isInteger(sc.fsGroup) ? { fsGroup: sc.fsGroup } : {}),
    ...(sc.fsGroupChangePolicy === "OnRootMismatch" || sc.fsGroupChangePolicy === "Always" ? { changePolicy: sc.fsGroupChangePolicy } : {}),
  };
}

export class CsiVolumes {
  /** `<uid>/<volume>` whose expansion the driver refused with FAILED_PRECONDITION: not tried again while it stays mounted (upstream MarkForInUseExpansionError). */
  private readonly inUseExpansionErrors = new Set<string>();

  constructor(private readonly opts: CsiVolumeOptions) {}

  private volumeDir(uid: string, name: string) {
    return join(this.opts.rootDir, "pods", uid, "volumes", PLUGIN_DIR, name);
  }

  /** The directory containers bind: the driver publishes there. */
  mountPath(uid: string, name: string): string {
    return join(this.volumeDir(uid, name), "mount");
  }

  private stagingPath(driver: string, volumeHandle: string) {
    return join(this.opts.rootDir, "plugins", CSI_PLUGIN, driver, sha256(volumeHandle), "globalmount");
  }

  /** Published for this pod (by this process or, before a restart, by an earlier one). */
  isPublished(uid: string, name: string): boolean {
    return existsSync(join(this.volumeDir(uid, name), "vol_data.json"));
  }

  /**
   * The directory of a PersistentVolume in the pod: named after the PV, as
   * upstream's (so a takeover finds the upstream kubelet's publications),
   * unless an earlier version of this agent published it under the pod's
   * volume name, which a running container still binds.
   */
  private persistentDirName(uid: string, volumeName: string, pvName: string): string {
    if (volumeName === pvName || !this.isPublished(uid, volumeName)) return pvName;
    try {
      const data = JSON.parse(readFileSync(join(this.volumeDir(uid, volumeName), "vol_data.json"), "utf8")) as VolData;
      return data.volumeLifecycleMode === "Persistent" && data.specVolumeID === pvName ? volumeName : pvName;
    } catch {
      return pvName;
    }
  }

  private async policyOf(driver: string): Promise<DriverPolicy> {
    const api = this.opts.api;
    if (!api) throw new Error(`CSI volumes need an API server (the CSIDriver object of ${driver}); this node runs standalone`);
    let obj: ApiObject | undefined;
    try {
      obj = await api.getCSIDriver(driver);
    } catch (err) {
      throw new Error(`failed to get CSIDriver ${driver}: ${errorMessage(err)}`);
    }
    // Without a CSIDriver object upstream assumes attach is required and only the Persistent mode.
    const spec = (obj?.spec ?? {}) as { attachRequired?: boolean; podInfoOnMount?: boolean; fsGroupPolicy?: string; volumeLifecycleModes?: string[] };
    const fsGroupPolicy = spec.fsGroupPolicy === "File" || spec.fsGroupPolicy === "None" ? spec.fsGroupPolicy : "ReadWriteOnceWithFSType";
    return {
      attachRequired: spec.attachRequired !== false,
      podInfoOnMount: spec.podInfoOnMount === true,
      fsGroupPolicy,
      lifecycleModes: spec.volumeLifecycleModes?.length ? spec.volumeLifecycleModes : ["Persistent"],
    };
  }

  private podInfo(pod: Pod, ephemeral: boolean): Record<string, string> {
    return {
      "csi.storage.k8s.io/pod.name": pod.metadata.name ?? "",
      "csi.storage.k8s.io/pod.namespace": pod.metadata.namespace ?? "default",
      "csi.storage.k8s.io/pod.uid": podUid(pod),
      "csi.storage.k8s.io/serviceAccount.name": (pod.spec as { serviceAccountName?: string }).serviceAccountName ?? "",
      [EPHEMERAL_KEY]: String(ephemeral),
    };
  }

  private async secretData(namespace: string, name: string): Promise<Record<string, string>> {
    const api = this.opts.api!;
    const list = await api.listObjects("secrets", namespace, `metadata.name=${name}`);
    const secret = list.items[0];
    if (!secret) throw new Error(`failed to get secret ${namespace}/${name}: not found`);
    const data = (secret.data ?? {}) as Record<string, string>;
    return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]));
  }

  /** An inline `csi:` volume: published with its attributes (and the pod's, when the driver asks). Returns the mount path. */
  async setUpInline(pod: Pod, vol: VolumeSpec): Promise<string> {
    const src = vol.csi!;
    const uid = podUid(pod);
    const target = this.mountPath(uid, vol.name);
    if (this.isPublished(uid, vol.name)) return target;
    const policy = await this.policyOf(src.driver);
    if (!policy.lifecycleModes.includes("Ephemeral")) {
      throw new Error(`volume mode "Ephemeral" not supported by driver ${src.driver} (only supports ${JSON.stringify(policy.lifecycleModes)})`);
    }
    const client = this.opts.drivers.client(src.driver);
    const fsType = src.fsType ?? "";
    const volumeContext = { ...(src.volumeAttributes ?? {}), ...(policy.podInfoOnMount ? this.podInfo(pod, true) : {}) };
    const secrets = src.nodePublishSecretRef?.name ? await this.secretData(pod.metadata.namespace ?? "default", src.nodePublishSecretRef.name) : {};
    await this.publish(pod, client, policy, {
      name: vol.name,
      data: { driverName: src.driver, volumeHandle: inlineVolumeHandle(uid, vol.name), specVolumeID: vol.name, volumeLifecycleMode: "Ephemeral", nodeName: this.opts.nodeName },
      // Inline volumes are always published ReadWriteOnce, as upstream.
      accessMode: "ReadWriteOnce",
      fsType,
      mountFlags: [],
      volumeContext,
      publishContext: {},
      secrets,
      readOnly: src.readOnly === true,
      fsGroupSupported: fsType !== "",
      staging: "",
    });
    return target;
  }

  /** A PersistentVolume with a `csi` source: attached (waited for), staged when the driver stages, then published. Returns the mount path. */
  async setUpPersistent(pod: Pod, volumeName: string, pv: ApiObject, claimReadOnly: boolean): Promise<string> {
    const uid = podUid(pod);
    const pvName = String(pv.metadata?.name);
    const dirName = this.persistentDirName(uid, volumeName, pvName);
    const target = this.mountPath(uid, dirName);
    if (this.isPublished(uid, dirName)) return target;
    const spec = pv.spec as {
      csi: {
        driver: string;
        volumeHandle: string;
        readOnly?: boolean;
        fsType?: string;
        volumeAttributes?: Record<string, string>;
        nodeStageSecretRef?: { name?: string; namespace?: string };
        nodePublishSecretRef?: { name?: string; namespace?: string };
      };
      accessModes?: string[];
      mountOptions?: string[];
    };
    const src = spec.csi;
    const policy = await this.policyOf(src.driver);
    if (!policy.lifecycleModes.includes("Persistent")) {
      throw new Error(`volume mode "Persistent" not supported by driver ${src.driver} (only supports ${JSON.stringify(policy.lifecycleModes)})`);
    }
    const client = this.opts.drivers.client(src.driver);
    let publishContext: Record<string, string> = {};
    let attachmentID: string | undefined;
    if (policy.attachRequired) {
      attachmentID = attachmentName(src.volumeHandle, src.driver, this.opts.nodeName);
      publishContext = await this.attached(attachmentID, src.volumeHandle, src.driver);
    }
    const accessModes = spec.accessModes ?? [];
    const caps = await client.capabilities();
    const accessMode = accessModes[0] ?? "ReadWriteOnce";
    const fsType = src.fsType ?? "";
    const secret = async (ref: { name?: string; namespace?: string } | undefined) => (ref?.name ? this.secretData(ref.namespace ?? "default", ref.name) : {});
    const capability = (mountGroup: string): VolumeCapability => ({
      accessType: { oneofKind: "mount", mount: { fsType, mountFlags: spec.mountOptions ?? [], volumeMountGroup: mountGroup } },
      accessMode: { mode: csiAccessMode(accessMode, caps) },
    });
    const volumeContext = { ...(src.volumeAttributes ?? {}) };
    let staging = "";
    if (caps.has("STAGE_UNSTAGE_VOLUME")) {
      staging = this.stagingPath(src.driver, src.volumeHandle);
      const marker = join(dirname(staging), "vol_data.json");
      if (!existsSync(marker)) {
        mkdirSync(staging, { recursive: true, mode: 0o750 });
        writeFileSync(marker, JSON.stringify({ driverName: src.driver, volumeHandle: src.volumeHandle }));
        try {
          await client.stage({
            volumeId: src.volumeHandle,
            stagingTargetPath: staging,
            publishContext,
            volumeContext,
            secrets: await secret(src.nodeStageSecretRef),
            capability: capability(""),
          });
        } catch (err) {
          rmSync(marker, { force: true });
          throw new Error(`MountVolume.MountDevice failed for volume "${pvName}": rpc error: ${errorMessage(err)}`);
        }
        this.opts.logger.info("CSI volume staged", { driver: src.driver, volumeHandle: src.volumeHandle, staging });
      }
    }
    const rwo = accessModes.length === 1 && (accessModes[0] === "ReadWriteOnce" || accessModes[0] === "ReadWriteOncePod");
    await this.publish(pod, client, policy, {
      name: dirName,
      data: {
        driverName: src.driver,
        volumeHandle: src.volumeHandle,
        specVolumeID: pvName,
        volumeLifecycleMode: "Persistent",
        nodeName: this.opts.nodeName,
        ...(attachmentID ? { attachmentID } : {}),
      },
      accessMode,
      fsType,
      mountFlags: spec.mountOptions ?? [],
      volumeContext: { ...volumeContext, ...(policy.podInfoOnMount ? this.podInfo(pod, false) : {}) },
      publishContext,
      secrets: await secret(src.nodePublishSecretRef),
      readOnly: claimReadOnly || src.readOnly === true,
      fsGroupSupported: fsType !== "" && rwo,
      staging,
    });
    return target;
  }

  /**
   * Node expansion of a published CSI PersistentVolume (csi-expand.ts says
   * when and how the claim is marked): NodeExpandVolume on the pod's target
   * path with the staging path, when the driver has EXPAND_VOLUME. Called on
   * every sync of the pod with the claim and PV just read. Throws on a failed
   * expansion (the pod gets VolumeResizeFailed; the claim a NodeResizeError).
   */
  async expandIfNeeded(pod: Pod, volumeName: string, pv: ApiObject, pvc: ApiObject, readOnly: boolean): Promise<void> {
    const uid = podUid(pod);
    const key = `${uid}/${volumeName}`;
    const pvName = String(pv.metadata?.name);
    const dirName = this.persistentDirName(uid, volumeName, pvName);
    if (!this.isPublished(uid, dirName) || this.inUseExpansionErrors.has(key)) return;
    const plan = planExpansion(pv, pvc, readOnly);
    if (plan.kind === "none") return;
    if (plan.kind === "wait") {
      this.opts.logger.v(3).info("node expansion waits", { pod: pod.metadata.name, volume: volumeName, reason: plan.reason });
      return;
    }
    const api = this.opts.api!;
    const ns = String(pvc.metadata?.namespace ?? pod.metadata.namespace ?? "default");
    const claimName = String(pvc.metadata?.name);
    const src = (pv.spec as { csi: { driver: string; volumeHandle: string; fsType?: string; nodeExpandSecretRef?: { name?: string; namespace?: string } } }).csi;
    const client = this.opts.drivers.client(src.driver);
    const caps = await client.capabilities();
    if (!caps.has("EXPAND_VOLUME")) {
      // Upstream: NodeExpand is not supported by the driver; the volume counts as resized (the controller did it all).
      this.opts.logger.v(4).info("NodeExpandVolume not supported by the CSI driver", { driver: src.driver, volume: volumeName });
      return;
    }
    let claim = pvc;
    if (plan.markInProgress) claim = await api.patchPersistentVolumeClaimStatus(ns, claimName, inProgressPatch(claim));
    const spec = pv.spec as { accessModes?: string[]; mountOptions?: string[] };
    const secrets = src.nodeExpandSecretRef?.name ? await this.secretData(src.nodeExpandSecretRef.namespace ?? "default", src.nodeExpandSecretRef.name) : {};
    const target = this.mountPath(uid, dirName);
    try {
      await client.expand({
        volumeId: src.volumeHandle,
        volumePath: target,
        stagingTargetPath: this.stagingPath(src.driver, src.volumeHandle),
        requiredBytes: plan.newSize.bytes,
        capability: {
          accessType: { oneofKind: "mount", mount: { fsType: src.fsType ?? "", mountFlags: spec.mountOptions ?? [], volumeMountGroup: "" } },
          accessMode: { mode: csiAccessMode(spec.accessModes?.[0] ?? "ReadWriteOnce", caps) },
        },
        secrets,
      });
    } catch (err) {
      const code = String((err as { code?: unknown }).code ?? "UNKNOWN");
      const message = `Expander.NodeExpand failed to expand the volume : rpc error: code = ${grpcCodeName(code)} desc = ${errorMessage(err)}`;
      if (plan.recovery) {
        const now = new Date(this.opts.clock.now()).toISOString().replace(/\.\d{3}Z$/, "Z");
        await api
          .patchPersistentVolumeClaimStatus(ns, claimName, failedPatch(claim, message, INFEASIBLE_CODES.has(code), now))
          .catch((patchErr: unknown) => this.opts.logger.error("failed to mark node expansion as failed", { claim: `${ns}/${claimName}`, err: errorMessage(patchErr) }));
      }
      if (code === "FAILED_PRECONDITION") {
        this.inUseExpansionErrors.add(key);
        this.opts.logger.error("NodeExpandVolume failed: the volume is in use; tried again once it is mounted again", { pod: pod.metadata.name, volume: volumeName, err: message });
        return;
      }
      const failure = `NodeExpandVolume.NodeExpandVolume failed for volume ${JSON.stringify(pvName)} : ${message}`;
      this.opts.recorder?.event(podEventRef(pod), "Warning", "VolumeResizeFailed", failure);
      throw new Error(failure);
    }
    const success = `MountVolume.NodeExpandVolume succeeded for volume ${JSON.stringify(pvName)} ${pod.spec.nodeName ?? this.opts.nodeName}`;
    this.opts.recorder?.event(podEventRef(pod), "Normal", "FileSystemResizeSuccessful", success);
    this.opts.recorder?.event(
      { kind: "PersistentVolumeClaim", name: claimName, namespace: ns, uid: String(pvc.metadata?.uid ?? "") },
      "Normal",
      "FileSystemResizeSuccessful",
      success,
    );
    this.opts.logger.info("CSI volume expanded on the node", { pod: pod.metadata.name, volume: volumeName, size: plan.newSize.text });
    const statusCap = (claim.status as { capacity?: Record<string, string> } | undefined)?.capacity?.storage;
    // The legacy path leaves a claim whose status already says the size; the recovery path one marked by another node.
    if (plan.alreadyUpdated || (!plan.recovery && statusCap !== undefined && intValue(statusCap) >= plan.newSize.bytes)) return;
    await api.patchPersistentVolumeClaimStatus(ns, claimName, finishedPatch(claim, plan.newSize.text));
  }

  /** Forgets a pod's volumes' in-use expansion errors once its volumes are torn down. */
  private forgetExpansionErrors(uid: string): void {
    for (const k of this.inUseExpansionErrors) if (k.startsWith(`${uid}/`)) this.inUseExpansionErrors.delete(k);
  }

  /** The VolumeAttachment's attachment metadata once attached; throws (the pod retries) until then. */
  private async attached(name: string, volumeHandle: string, driver: string): Promise<Record<string, string>> {
    if (!this.opts.controllerAttachDetach) {
      throw new Error(
        `volume ${volumeHandle} of CSI driver ${driver} requires attach, and attaching by the node agent (enableControllerAttachDetach: false) is not supported by this node`,
      );
    }
    const va = await this.opts.api!.getVolumeAttachment(name);
    const status = (va?.status ?? {}) as { attached?: boolean; attachmentMetadata?: Record<string, string>; attachError?: { message?: string } };
    if (!va) throw new Error(`waiting for VolumeAttachment ${name} (volume ${volumeHandle}) to be created by the attach/detach controller`);
    if (status.attachError?.message) throw new Error(`attachment ${name} failed: ${status.attachError.message}`);
    if (status.attached !== true) throw new Error(`waiting for external-attacher of ${driver} CSI driver to attach volume ${volumeHandle} (VolumeAttachment ${name})`);
    return { ...(status.attachmentMetadata ?? {}) };
  }

  private async publish(
    pod: Pod,
    client: CsiNodeClient,
    policy: DriverPolicy,
    p: {
      name: string;
      data: VolData;
      /** The PV's first access mode (ReadWriteOnce for inline volumes), mapped for the driver (csiAccessMode). */
      accessMode: string;
      fsType: string;
      mountFlags: string[];
      volumeContext: Record<string, string>;
      publishContext: Record<string, string>;
      secrets: Record<string, string>;
      readOnly: boolean;
      fsGroupSupported: boolean;
      staging: string;
    },
  ): Promise<void> {
    const uid = podUid(pod);
    const dir = this.volumeDir(uid, p.name);
    const target = this.mountPath(uid, p.name);
    const { fsGroup, changePolicy } = fsOf(pod);
    // fsGroupPolicy: None never changes ownership; File always; ReadWriteOnceWithFSType only for a ReadWriteOnce volume with an fsType.
    const applyFsGroup = fsGroup !== undefined && policy.fsGroupPolicy !== "None" && (policy.fsGroupPolicy === "File" || p.fsGroupSupported);
    // A driver with VOLUME_MOUNT_GROUP applies the group itself when it mounts.
    const caps = await client.capabilities();
    const byDriver = applyFsGroup && caps.has("VOLUME_MOUNT_GROUP");
    // Upstream creates the target's parent; the driver creates the target (the runtime makes it when it does not).
    mkdirSync(dir, { recursive: true, mode: 0o750 });
    const dataFile = join(dir, "vol_data.json");
    writeFileSync(dataFile, JSON.stringify(p.data));
    try {
      await client.publish({
        volumeId: p.data.volumeHandle,
        stagingTargetPath: p.staging,
        targetPath: target,
        publishContext: p.publishContext,
        volumeContext: p.volumeContext,
        secrets: p.secrets,
        capability: {
          accessType: { oneofKind: "mount", mount: { fsType: p.fsType, mountFlags: p.mountFlags, volumeMountGroup: byDriver ? String(fsGroup) : "" } },
          accessMode: { mode: csiAccessMode(p.accessMode, caps) },
        },
        readonly: p.readOnly,
      });
    } catch (err) {
      rmSync(dataFile, { force: true });
      throw new Error(`rpc error: NodePublishVolume of ${p.data.driverName}: ${errorMessage(err)}`);
    }
    if (applyFsGroup && !byDriver && existsSync(target)) setVolumeOwnership(target, fsGroup, { readOnly: p.readOnly, ...(changePolicy ? { policy: changePolicy } : {}) });
    this.opts.logger.info("CSI volume published", { pod: pod.metadata.name, volume: p.name, driver: p.data.driverName, volumeHandle: p.data.volumeHandle, target });
  }

  /**
   * Usage of the pod's published CSI volumes as their drivers report it
   * (upstream metricsCsi: NodeGetVolumeStats with the volume id and the
   * published path, only when the driver has GET_VOLUME_STATS). Volumes of a
   * driver without it, not registered (a transient state), or whose call
   * fails or reports no usage are left out, as upstream leaves them out of
   * the summary. Named by directory: an inline volume's name, a
   * PersistentVolume's name (the volume manager maps it to the pod's volume).
   */
  async volumeStats(uid: string): Promise<CsiVolumeStats[]> {
    const root = join(this.opts.rootDir, "pods", uid, "volumes", PLUGIN_DIR);
    let names: string[];
    try {
      names = readdirSync(root);
    } catch {
      return [];
    }
    const out: CsiVolumeStats[] = [];
    for (const name of names) {
      let data: VolData;
      try {
        data = JSON.parse(readFileSync(join(root, name, "vol_data.json"), "utf8")) as VolData;
      } catch {
        continue; // not published
      }
      try {
        const client = this.opts.drivers.client(data.driverName);
        if (!(await client.capabilities()).has("GET_VOLUME_STATS")) continue;
        const stats = await client.volumeStats(data.volumeHandle, join(root, name, "mount"));
        // Upstream: without volume conditions (CSIVolumeHealth, off by default) a reply without usage is an error.
        if (!stats.bytes && !stats.inodes) throw new Error("failed to get usage from response. usage is nil");
        out.push({
          name,
          capacityBytes: stats.bytes?.total ?? 0,
          availableBytes: stats.bytes?.available ?? 0,
          usedBytes: stats.bytes?.used ?? 0,
          inodes: stats.inodes?.total ?? 0,
          inodesFree: stats.inodes?.available ?? 0,
          inodesUsed: stats.inodes?.used ?? 0,
        });
      } catch (err) {
        this.opts.logger.v(4).info("failed to calculate volume metrics", { uid, volume: name, driver: data.driverName, err: errorMessage(err) });
      }
    }
    return out;
  }

  /** Unpublishes every CSI volume of the pod (and unstages those no other pod uses). Throws when a driver call fails: the pod's directory stays and teardown is retried. */
  async tearDownPod(uid: string): Promise<void> {
    this.forgetExpansionErrors(uid);
    const root = join(this.opts.rootDir, "pods", uid, "volumes", PLUGIN_DIR);
    let names: string[];
    try {
      names = readdirSync(root);
    } catch {
      return;
    }
    const errors: string[] = [];
    for (const name of names) {
      const dataFile = join(root, name, "vol_data.json");
      let data: VolData;
      try {
        data = JSON.parse(readFileSync(dataFile, "utf8")) as VolData;
      } catch {
        continue; // never published (or already unpublished)
      }
      try {
        const client = this.opts.drivers.client(data.driverName);
        await client.unpublish(data.volumeHandle, join(root, name, "mount"));
        rmSync(dataFile, { force: true });
        this.opts.logger.info("CSI volume unpublished", { uid, volume: name, driver: data.driverName, volumeHandle: data.volumeHandle });
        if (data.volumeLifecycleMode === "Persistent") await this.unstageIfUnused(client, data);
      } catch (err) {
        errors.push(`UnmountVolume.TearDown failed for volume ${JSON.stringify(name)} (driver ${data.driverName}): ${errorMessage(err)}`);
      }
    }
    if (errors.length) throw new Error(errors.join("; "));
  }

  private async unstageIfUnused(client: CsiNodeClient, data: VolData): Promise<void> {
    const staging = this.stagingPath(data.driverName, data.volumeHandle);
    const marker = join(dirname(staging), "vol_data.json");
    if (!existsSync(marker) || this.publishedElsewhere(data)) return;
    await client.unstage(data.volumeHandle, staging);
    rmSync(dirname(staging), { recursive: true, force: true });
    this.opts.logger.info("CSI volume unstaged", { driver: data.driverName, volumeHandle: data.volumeHandle });
  }

  /** Some pod still has this volume published. */
  private publishedElsewhere(data: VolData): boolean {
    const pods = join(this.opts.rootDir, "pods");
    let uids: string[] = [];
    try {
      uids = readdirSync(pods);
    } catch {
      return false;
    }
    for (const uid of uids) {
      const dir = join(pods, uid, "volumes", PLUGIN_DIR);
      let names: string[] = [];
      try {
        names = readdirSync(dir);
      } catch {
        continue;
      }
      for (const name of names) {
        try {
          const other = JSON.parse(readFileSync(join(dir, name, "vol_data.json"), "utf8")) as VolData;
          if (other.driverName === data.driverName && other.volumeHandle === data.volumeHandle) return true;
        } catch {
          // not published
        }
      }
    }
    return false;
  }
}

/** protobuf-ts's status name (INVALID_ARGUMENT) as Go's codes.Code prints it (InvalidArgument). */
function grpcCodeName(code: string): string {
  if (code === "OK") return "OK";
  return code
    .toLowerCase()
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("");
}
