/**
 * Eviction and admission messages with upstream's exact wording (helpers.go
 * nodeLowMessageFmt, thresholdMetMessageFmt, containerMessageFmt, ...):
 * every sentence ends in ". ", the trailing space included, because
 * upstream concatenates them.
 */
import { parseQuantity } from "../config/index.ts";
import type { Pod } from "../pods/schema.ts";
import type { PodStatsLookup } from "./observations.ts";
import { containerRequestRaw } from "./pods.ts";
import { canonicalQuantity, formatQuantity } from "./quantity-format.ts";
import { formatThresholdQuantity } from "./thresholds.ts";
import { SIGNAL_TO_RESOURCE, type NodeConditionType, type Observations, type StarvedResource, type Threshold } from "./types.ts";

/** Keys of the annotations upstream puts on the Evicted event. */
export const OFFENDING_CONTAINERS_KEY = "offending_containers";
export const OFFENDING_CONTAINERS_USAGE_KEY = "offending_containers_usage";
export const STARVED_RESOURCE_KEY = "starved_resource";

/**
 * upstream evictionMessage: "The node was low on resource: memory. ",
 * the first met threshold for that resource ("Threshold quantity: 100Mi,
 * available: 50Mi. "), then each container using more than it requests
 * ("Container app was using 90Mi, request is 0, has larger consumption of
 * memory. "). Annotations name the offending containers and their usage.
 */
export function evictionMessage(
  resource: StarvedResource,
  pod: Pod,
  stats: PodStatsLookup,
  thresholds: readonly Threshold[],
  observations: Observations,
): { message: string; annotations: Record<string, string> } {
  let message = `The node was low on resource: ${resource}. `;
  const met = thresholds.find((t) => SIGNAL_TO_RESOURCE[t.signal] === resource && observations[t.signal]);
  const observed = met && observations[met.signal];
  if (met && observed) {
    message += `Threshold quantity: ${formatThresholdQuantity(met.value, observed.capacity)}, available: ${formatQuantity(observed.available, availableFormat(resource))}. `;
  }
  const podStats = stats(pod.metadata.uid);
  if (!podStats) return { message, annotations: {} };
  const offending: string[] = [];
  const usages: string[] = [];
  const containers = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])];
  for (const cs of podStats.containers) {
    const container = containers.find((c) => c.name === cs.name);
    if (!container) continue;
    let usage: number | undefined;
    if (resource === "ephemeral-storage") {
      if (cs.rootfs?.usedBytes !== undefined && cs.logs?.usedBytes !== undefined) usage = cs.rootfs.usedBytes + cs.logs.usedBytes;
    } else if (resource === "memory") {
      usage = cs.memory?.workingSetBytes;
    }
    const raw = containerRequestRaw(container, resource);
    const request = raw === undefined ? { value: 0, text: "0" } : { value: typeof raw === "number" ? raw : parseQuantity(raw), text: canonicalQuantity(raw) };
    if (usage !== undefined && usage > request.value) {
      const used = formatQuantity(usage, "BinarySI");
      message += `Container ${container.name} was using ${used}, request is ${request.text}, has larger consumption of ${resource}. `;
      offending.push(container.name);
      usages.push(used);
    }
  }
  return {
    message,
    annotations: {
      [OFFENDING_CONTAINERS_KEY]: offending.join(","),
      [OFFENDING_CONTAINERS_USAGE_KEY]: usages.join(","),
      [STARVED_RESOURCE_KEY]: resource,
    },
  };
}

/** Bytes print as BinarySI, inode and PID counts as DecimalSI, as upstream builds those quantities. */
const availableFormat = (resource: StarvedResource) => (resource === "memory" || resource === "ephemeral-storage" ? "BinarySI" : "DecimalSI");

/** upstream nodeConditionMessageFmt, with Go's %v of a slice: "The node had condition: [DiskPressure]. " */
export const nodeConditionMessage = (conditions: readonly NodeConditionType[]): string => `The node had condition: [${conditions.join(" ")}]. `;

/** upstream emptyDirMessageFmt (%q of the limit) */
export const emptyDirMessage = (volume: string, limit: string): string => `Usage of EmptyDir volume ${JSON.stringify(volume)} exceeds the limit ${JSON.stringify(limit)}. `;

/** upstream podEphemeralStorageMessageFmt */
export const podEphemeralStorageMessage = (limit: string): string => `Pod ephemeral local storage usage exceeds the total limit of containers ${limit}. `;

/** upstream containerEphemeralStorageMessageFmt */
export const containerEphemeralStorageMessage = (container: string, limit: string): string =>
  `Container ${container} exceeded its local ephemeral storage limit ${JSON.stringify(limit)}. `;
