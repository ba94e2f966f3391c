/**
 * A container's resource as the downward API shows it (upstream
 * ExtractContainerResourceValue after MergeContainerResourceLimits), one
 * function for env (resourceFieldRef) and volume files alike: limits or
 * requests of cpu, memory, ephemeral-storage or hugepages-<size>, divided by
 * the divisor and rounded up. A limit the container does not set is the
 * node's allocatable, or the pod's own limit where it sets pod-level limits.
 */
import { isHugePageResourceName } from "../pods/resource-names.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { containerLimits, containerRequests, downwardApiAllocatable } from "./pod-resources.ts";
import { intValue, milliValue } from "./values.ts";

/**
 * The node's allocatable amounts the downward API falls back to: limits a
 * container does not set default to them. (Not resources.ts's NodeAllocatable,
 * the amounts written on the kubepods cgroup.)
 */
export interface DownwardApiAllocatable {
  cpuMilli: number;
  memoryBytes: number;
  ephemeralStorageBytes: number;
}

/** A resourceFieldRef the downward API cannot serve; the messages are upstream's. */
export class ResourceFieldRefError extends Error {
  override readonly name = "ResourceFieldRefError";
}

export interface ResourceFieldRef {
  containerName?: string;
  /** "limits.<name>" or "requests.<name>" */
  resource: string;
  divisor?: string | number;
}

/**
 * The value of `ref` in `pod`: of the container it names, else of
 * `ownContainer` (an env var's own container; volume items always name one).
 */
export function resourceFieldRefValue(pod: Pod, ownContainer: ContainerSpec | undefined, ref: ResourceFieldRef, node: DownwardApiAllocatable): string {
  const container = ref.containerName ? findContainer(pod, ref.containerName) : ownContainer;
  if (!container) throw new ResourceFieldRefError(`container ${ref.containerName ?? ""} not found`);
  return containerResourceValue(pod, container, ref.resource, ref.divisor, node);
}

/** Upstream findContainerInPod: regular containers first, then init containers. */
const findContainer = (pod: Pod, name: string): ContainerSpec | undefined =>
  pod.spec.containers.find((c) => c.name === name) ?? pod.spec.initContainers?.find((c) => c.name === name);

/** An unset or zero divisor is 1 (1000m for cpu). */
function containerResourceValue(pod: Pod, container: ContainerSpec, resource: string, divisor: string | number | undefined, node: DownwardApiAllocatable): string {
  const dot = resource.indexOf(".");
  const kind = resource.slice(0, dot);
  const name = resource.slice(dot + 1);
  const hugePages = isHugePageResourceName(name);
  if (dot < 0 || (kind !== "limits" && kind !== "requests") || !(hugePages || name === "cpu" || name === "memory" || name === "ephemeral-storage")) {
    throw new ResourceFieldRefError(`unsupported container resource : ${resource}`);
  }
  const set = kind === "limits" ? containerLimits(container) : containerRequests(container); // cpu in millicores, the rest rounded up
  const bound = downwardApiAllocatable(pod, node);
  // Only cpu, memory and ephemeral-storage limits default to the allocatable; an unset request or huge page amount is 0.
  const fallback = kind === "requests" || hugePages ? 0 : name === "cpu" ? bound.cpuMilli : name === "memory" ? bound.memoryBytes : bound.ephemeralStorageBytes;
  const amount = set[name] ?? fallback;
  // convertResourceCPUToString: ceil(MilliValue / divisor.MilliValue); the others ceil(Value / divisor.Value).
  const per = name === "cpu" ? milliValue(divisor) || 1000 : intValue(divisor) || 1;
  return String(Math.ceil(amount / per));
}
