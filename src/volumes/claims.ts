/**
 * persistentVolumeClaim and generic ephemeral volumes: the claim and its
 * bound PersistentVolume are read from the API (upstream's desired state of
 * world populator, getPVCExtractPV / getPVSpec), with upstream's messages
 * while the claim is missing, unbound or being deleted. The volume plugins of
 * this agent for persistent volumes are the in-tree `hostPath` and `local`
 * ones, and CSI (csi.ts publishes those; here the PV is only checked): both in-tree ones bind the PV's path on the node into containers (`local` after
 * checking the PV's node affinity against this node's labels, as upstream's
 * MountVolume.NodeAffinity check). Nothing is mounted on the host for them,
 * so releasing the volume when the pod goes is dropping the record.
 */
import type { KubeApi, ApiObject } from "../api/index.ts";
import type { Pod } from "../pods/schema.ts";
import type { VolumeSpec } from "../pods/volume-schema.ts";
import { checkHostPathType } from "./host-path.ts";
import { nodeMatchesTerms, type NodeSelectorTerm } from "../pods/node-selector.ts";

export interface ClaimVolume {
  claim: string;
  namespace: string;
  pv: string;
  /** The directory containers bind. */
  path: string;
  plugin: "kubernetes.io/host-path" | "kubernetes.io/local-volume" | "kubernetes.io/csi";
  readOnly: boolean;
  /** A CSI PersistentVolume: the CSI plugin publishes it (csi.ts), and `path` is where. */
  csiPv?: ApiObject;
  /** The claim as read with it (node expansion compares its status with the PV's capacity). */
  csiPvc?: ApiObject;
}

/** A PV's required node affinity against this node: terms are ORed, requirements within one ANDed. */
export function pvFitsNode(pv: ApiObject, node: { name: string; labels: Record<string, string> }): boolean {
  const terms = (pv.spec as { nodeAffinity?: { required?: { nodeSelectorTerms?: NodeSelectorTerm[] } } } | undefined)?.nodeAffinity?.required?.nodeSelectorTerms;
  return nodeMatchesTerms(terms, node);
}

/** The claim a volume uses: its own, or `<pod>-<volume>` for a generic ephemeral volume (upstream ephemeral.VolumeClaimName). */
export function claimNameOf(pod: Pod, vol: VolumeSpec): string | undefined {
  if (vol.persistentVolumeClaim) return vol.persistentVolumeClaim.claimName;
  if (vol.ephemeral) return `${pod.metadata.name}-${vol.name}`;
  return undefined;
}

export async function resolveClaim(api: KubeApi | undefined, pod: Pod, vol: VolumeSpec, node: { name: string; labels: Record<string, string> }): Promise<ClaimVolume> {
  const ns = pod.metadata.namespace ?? "default";
  const name = claimNameOf(pod, vol)!;
  const fail = (why: string): never => {
    throw new Error(`error processing PVC ${ns}/${name}: ${why}`);
  };
  if (!api) fail("persistentVolumeClaim volumes need an API server; this node runs standalone");
  let pvc: ApiObject | undefined;
  try {
    pvc = await api!.getPersistentVolumeClaim(ns, name);
  } catch (err) {
    fail(`failed to fetch PVC from API server: ${(err as Error).message}`);
  }
  if (!pvc) fail(`failed to fetch PVC from API server: persistentvolumeclaims "${name}" not found`);
  const meta = pvc!.metadata as { uid?: string; deletionTimestamp?: string; ownerReferences?: { uid?: string; controller?: boolean }[] };
  if (vol.ephemeral && !(meta.ownerReferences ?? []).some((o) => o.controller && o.uid === pod.metadata.uid)) {
    throw new Error(`error processing PVC ${ns}/${name}: PVC ${ns}/${name} was not created for pod ${ns}/${pod.metadata.name} (pod is not owner)`);
  }
  if (meta.deletionTimestamp) throw new Error(`can't start pod because PVC ${ns}/${name} is being deleted`);
  const status = pvc!.status as { phase?: string } | undefined;
  const spec = pvc!.spec as { volumeName?: string } | undefined;
  if (status?.phase !== "Bound" || !spec?.volumeName) fail("PVC is not bound");
  const pvName = spec!.volumeName!;
  let pv: ApiObject | undefined;
  try {
    pv = await api!.getPersistentVolume(pvName);
  } catch (err) {
    fail(`failed to fetch PV ${pvName} from API server: ${(err as Error).message}`);
  }
  if (!pv) fail(`failed to fetch PV ${pvName} from API server: persistentvolumes "${pvName}" not found`);
  const claimRef = (pv!.spec as { claimRef?: { uid?: string; name?: string; namespace?: string } } | undefined)?.claimRef;
  if (!claimRef || claimRef.uid !== meta.uid) fail(`failed to fetch PV ${pvName}: claimRef does not match the PVC`);
  const pvSpec = pv!.spec as { hostPath?: { path: string; type?: string }; local?: { path: string }; csi?: { driver?: string; volumeHandle?: string }; volumeMode?: string };
  // Upstream's desired state of world populator: a raw block volume used through volumeMounts (volumeDevices are refused at admission).
  const volumeMode = pvSpec.volumeMode ?? "Filesystem";
  if (volumeMode !== "Filesystem") throw new Error(`volume ${vol.name} has volumeMode ${volumeMode}, but is specified in volumeMounts`);
  const readOnly = vol.persistentVolumeClaim?.readOnly === true;
  if (pvSpec.hostPath) {
    checkHostPathType(pvSpec.hostPath.path, (pvSpec.hostPath.type ?? "") as never);
    return { claim: name, namespace: ns, pv: pvName, path: pvSpec.hostPath.path, plugin: "kubernetes.io/host-path", readOnly };
  }
  if (pvSpec.local) {
    if (!pvFitsNode(pv!, node)) throw new Error(`MountVolume.NodeAffinity check failed for volume "${pvName}" : no matching NodeSelectorTerms`);
    return { claim: name, namespace: ns, pv: pvName, path: pvSpec.local.path, plugin: "kubernetes.io/local-volume", readOnly };
  }
  if (pvSpec.csi) {
    if (!pvSpec.csi.driver || !pvSpec.csi.volumeHandle) fail(`PersistentVolume ${pvName}: its csi source needs a driver and a volumeHandle`);
    if (!pvFitsNode(pv!, node)) throw new Error(`MountVolume.NodeAffinity check failed for volume "${pvName}" : no matching NodeSelectorTerms`);
    return { claim: name, namespace: ns, pv: pvName, path: "", plugin: "kubernetes.io/csi", readOnly, csiPv: pv!, csiPvc: pvc! };
  }
  const kind =
    Object.keys(pvSpec).find(
      (k) => !["accessModes", "capacity", "claimRef", "persistentVolumeReclaimPolicy", "storageClassName", "volumeMode", "nodeAffinity", "mountOptions"].includes(k),
    ) ?? "none";
  throw new Error(`PersistentVolume ${pvName}: volume type ${JSON.stringify(kind)} is not supported by this node (hostPath, local and csi are)`);
}
