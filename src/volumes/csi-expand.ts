/**
 * Node expansion of a mounted CSI PersistentVolume, as a 1.34 kubelet decides
 * and records it (pkg/kubelet/volumemanager populator checkVolumeFSResize,
 * operation_generator nodeExpandVolume, node_expander.go, resize_util.go;
 * RecoverVolumeExpansionFailure is GA and locked on in 1.34):
 * - a volume the pod mounts read-only is never expanded;
 * - expansion is due when the PV's capacity is above the claim's
 *   status.capacity (the resizer grew the volume);
 * - with a resizer that records allocatedResources/allocatedResourceStatuses
 *   the size is allocatedResources.storage, and the node proceeds only while
 *   the status is NodeResizePending or NodeResizeInProgress (or, for a
 *   ReadWriteMany claim already updated, on every other node); it first marks
 *   NodeResizeInProgress; an older resizer (neither field) gets the legacy
 *   path with the PV's capacity;
 * - success: status.capacity = the new size, the storage entry of
 *   allocatedResourceStatuses and the resize conditions are removed;
 *   failure: a NodeResizeError condition, and NodeResizeInfeasible for
 *   InvalidArgument, OutOfRange and NotFound.
 * Pure decisions and patches here; csi.ts calls the driver and the API.
 */
import type { ApiObject } from "../api/index.ts";
import { intValue } from "../cgroups/values.ts";

export const NODE_EXPANSION_NOT_REQUIRED = "volume.kubernetes.io/node-expansion-not-required";
const RESIZE_CONDITIONS = new Set(["FileSystemResizePending", "Resizing", "ControllerResizeError", "NodeResizeError"]);

interface ClaimStatus {
  capacity?: Record<string, string>;
  allocatedResources?: Record<string, string>;
  allocatedResourceStatuses?: Record<string, string>;
  conditions?: { type?: string; status?: string; [k: string]: unknown }[];
}

export type ExpansionPlan =
  /** Nothing to expand. */
  | { kind: "none" }
  /** Expansion is due but not this node's turn yet (the resizer is not done); looked at again on the next sync. */
  | { kind: "wait"; reason: string }
  | {
      kind: "expand";
      /** The size to ask the driver for, and its text as the API wrote it (status.capacity gets the same). */
      newSize: { bytes: number; text: string };
      /** The claim's status already says the new size (ReadWriteMany on a further node): no status update. */
      alreadyUpdated: boolean;
      /** Patch allocatedResourceStatuses.storage to NodeResizeInProgress first. */
      markInProgress: boolean;
      /** The resizer records allocatedResources (failures are then recorded on the claim). */
      recovery: boolean;
    };

const statusOf = (pvc: ApiObject) => (pvc.status ?? {}) as ClaimStatus;

export function planExpansion(pv: ApiObject, pvc: ApiObject, readOnly: boolean): ExpansionPlan {
  if (readOnly) return { kind: "none" };
  const pvCapText = (pv.spec as { capacity?: Record<string, string> } | undefined)?.capacity?.storage;
  const status = statusOf(pvc);
  const statusCapText = status.capacity?.storage;
  if (!pvCapText || !statusCapText) return { kind: "none" };
  const pvCap = intValue(pvCapText);
  const statusCap = intValue(statusCapText);
  if (!(pvCap > statusCap)) return { kind: "none" };
  const resizeStatus = status.allocatedResourceStatuses?.storage ?? "";
  if (resizeStatus === "" && status.allocatedResources === undefined) {
    // An older resizer: the legacy path expands to the PV's capacity.
    return { kind: "expand", newSize: { bytes: pvCap, text: pvCapText }, alreadyUpdated: false, markInProgress: false, recovery: false };
  }
  const allocatedText = status.allocatedResources?.storage;
  if (!allocatedText) return { kind: "wait", reason: "the claim's allocatedResources has no storage size" };
  const newSize = { bytes: intValue(allocatedText), text: allocatedText };
  const alreadyUpdated = statusCap >= newSize.bytes && resizeStatus === "";
  const accessModes = ((pvc.spec as { accessModes?: string[] } | undefined)?.accessModes ?? []) as string[];
  const annotations = ((pvc.metadata as { annotations?: Record<string, string> } | undefined)?.annotations ?? {}) as Record<string, string>;
  if (alreadyUpdated && accessModes.includes("ReadWriteMany") && !(NODE_EXPANSION_NOT_REQUIRED in annotations)) {
    return { kind: "expand", newSize, alreadyUpdated: true, markInProgress: false, recovery: true };
  }
  if (resizeStatus !== "NodeResizePending" && resizeStatus !== "NodeResizeInProgress") {
    return { kind: "wait", reason: `NodeExpandVolume is not allowed to proceed with resizeStatus ${JSON.stringify(resizeStatus)}` };
  }
  return { kind: "expand", newSize, alreadyUpdated, markInProgress: !alreadyUpdated, recovery: true };
}

/** The claim's resourceVersion, so that a patch made from a stale read is refused (upstream's addResourceVersionCheck). */
const versioned = (pvc: ApiObject) => ({ resourceVersion: String(pvc.metadata?.resourceVersion ?? "") });

/** MarkNodeExpansionInProgress. */
export function inProgressPatch(pvc: ApiObject): object {
  return { metadata: versioned(pvc), status: { allocatedResourceStatuses: { storage: "NodeResizeInProgress" } } };
}

/** MarkNodeExpansionFinishedWithRecovery / MarkFSResizeFinished: capacity set, storage status and resize conditions gone. */
export function finishedPatch(pvc: ApiObject, newSizeText: string): object {
  const status = statusOf(pvc);
  const others = Object.keys(status.allocatedResourceStatuses ?? {}).filter((k) => k !== "storage");
  return {
    metadata: versioned(pvc),
    status: {
      capacity: { storage: newSizeText },
      allocatedResourceStatuses: others.length ? { storage: null } : null,
      conditions: (status.conditions ?? []).filter((c) => !RESIZE_CONDITIONS.has(c.type ?? "")),
    },
  };
}

/** MarkNodeExpansionFailedCondition, and MarkNodeExpansionInfeasible for an infeasible request (no resourceVersion check, as upstream). */
export function failedPatch(pvc: ApiObject, message: string, infeasible: boolean, now: string): object {
  const status = statusOf(pvc);
  const conditions = status.conditions ?? [];
  const condition = { type: "NodeResizeError", status: "True", lastTransitionTime: now, message: `failed to expand pvc with ${message}` };
  // MergeResizeConditionOnPVC keeping old conditions: one already True stays as it is, in its place.
  const merged = conditions.some((c) => c.type === "NodeResizeError")
    ? conditions.map((c) => (c.type === "NodeResizeError" && c.status !== "True" ? condition : c))
    : [...conditions, condition];
  return {
    status: {
      ...(infeasible ? { allocatedResourceStatuses: { storage: "NodeResizeInfeasible" } } : {}),
      conditions: merged,
    },
  };
}

/** gRPC codes upstream treats as an infeasible node expansion. */
export const INFEASIBLE_CODES = new Set(["INVALID_ARGUMENT", "OUT_OF_RANGE", "NOT_FOUND"]);
