/**
 * Local ephemeral storage limits (upstream localStorageEviction, on with
 * localStorageCapacityIsolation): a pod whose emptyDir outgrows its
 * sizeLimit, whose ephemeral storage outgrows the sum of its containers'
 * limits, or with a container whose logs (and writable layer, on a single
 * filesystem) outgrow its limit, is evicted at once, whatever the node's
 * thresholds say. Checked in that order; the first violation names the pod.
 */
import { parseQuantity } from "../config/index.ts";
import type { Pod } from "../pods/schema.ts";
import type { PodStatsLookup } from "./observations.ts";
import { podLimit, podVolumes } from "./pods.ts";
import { containerEphemeralStorageMessage, emptyDirMessage, podEphemeralStorageMessage } from "./message.ts";
import { canonicalQuantity, formatQuantity, quantityFormatOf } from "./quantity-format.ts";

export type LocalStorageSignal = "emptydirfs.limit" | "ephemeralpodfs.limit" | "ephemeralcontainerfs.limit";

export interface LocalStorageViolation {
  pod: Pod;
  /** upstream's metric label for the kind of limit exceeded. */
  signal: LocalStorageSignal;
  message: string;
}

const value = (q: string | number): number => (typeof q === "number" ? q : parseQuantity(q));

export function localStorageViolations(pods: readonly Pod[], stats: PodStatsLookup, dedicatedImageFs: boolean): LocalStorageViolation[] {
  const out: LocalStorageViolation[] = [];
  for (const pod of pods) {
    const s = stats(pod.metadata.uid);
    if (!s) continue;
    const v = emptyDirViolation(pod, s) ?? podViolation(pod, s) ?? containerViolation(pod, s, dedicatedImageFs);
    if (v) out.push({ pod, ...v });
  }
  return out;
}

type Found = Omit<LocalStorageViolation, "pod"> | undefined;
type Stats = NonNullable<ReturnType<PodStatsLookup>>;

function emptyDirViolation(pod: Pod, s: Stats): Found {
  for (const vol of podVolumes(pod)) {
    const limit = vol.emptyDir?.sizeLimit;
    if (limit === undefined || value(limit) <= 0) continue;
    const used = s.volume?.find((v) => v.name === vol.name)?.usedBytes;
    if (used !== undefined && used > value(limit)) return { signal: "emptydirfs.limit", message: emptyDirMessage(vol.name, canonicalQuantity(limit)) };
  }
  return undefined;
}

function podViolation(pod: Pod, s: Stats): Found {
  const limit = podLimit(pod, "ephemeral-storage");
  if (limit === undefined) return undefined;
  const used = s["ephemeral-storage"]?.usedBytes ?? 0;
  if (used <= limit) return undefined;
  // upstream sums quantities, keeping the first one's format.
  const first = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].map((c) => c.resources?.limits?.["ephemeral-storage"]).find((q) => q !== undefined);
  return { signal: "ephemeralpodfs.limit", message: podEphemeralStorageMessage(formatQuantity(limit, first === undefined ? "BinarySI" : quantityFormatOf(first))) };
}

function containerViolation(pod: Pod, s: Stats, dedicatedImageFs: boolean): Found {
  for (const cs of s.containers) {
    const limit = pod.spec.containers.find((c) => c.name === cs.name)?.resources?.limits?.["ephemeral-storage"];
    if (limit === undefined || value(limit) === 0) continue;
    let used = cs.logs?.usedBytes ?? 0;
    if (!dedicatedImageFs) used += cs.rootfs?.usedBytes ?? 0;
    if (used > value(limit)) return { signal: "ephemeralcontainerfs.limit", message: containerEphemeralStorageMessage(cs.name, canonicalQuantity(limit)) };
  }
  return undefined;
}
