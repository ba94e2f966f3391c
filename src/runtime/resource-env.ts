/**
 * resourceFieldRef values for env (upstream ExtractContainerResourceValue
 * with defaultPodLimitsForDownwardAPI): a container's limits or requests of
 * cpu, memory, ephemeral-storage or hugepages-<size>, divided by the divisor and rounded up;
 * limits the container does not set are the node's allocatable, or the pod's
 * own limit where it sets pod-level limits (downwardApiAllocatable).
 */
import { parseQuantity } from "../config/index.ts";
import { isHugePageResourceName } from "../pods/resource-names.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { EnvError } from "./env.ts";
import { downwardApiAllocatable } from "../cgroups/pod-resources.ts";

/** Node allocatable: cpu in millicores, memory and ephemeral-storage in bytes. */
export interface NodeAllocatable {
  cpuMilli: number;
  memoryBytes: number;
  ephemeralStorageBytes: number;
}

type Resource = "cpu" | "memory" | "ephemeral-storage" | `hugepages-${string}`;

/** Quantities are exact in Go; six decimals absorb the float noise of "0.1" * 1000 before rounding up. */
const ceilExact = (x: number): number => Math.ceil(Number(x.toFixed(6)));
const quantity = (q: string | number): number => (typeof q === "number" ? q : parseQuantity(q));

function amount(container: ContainerSpec, kind: "limits" | "requests", resource: Resource, allocatable: NodeAllocatable): number {
  const limits = container.resources?.limits ?? {};
  const requests = container.resources?.requests ?? {};
  const set = kind === "limits" ? limits[resource] : (requests[resource] ?? limits[resource]); // requests default to limits (API defaulting)
  if (set !== undefined) return quantity(set);
  // Only cpu, memory and ephemeral-storage limits default to the allocatable (MergeContainerResourceLimits).
  if (kind === "requests" || isHugePageResourceName(resource)) return 0;
  return resource === "cpu" ? allocatable.cpuMilli / 1000 : resource === "memory" ? allocatable.memoryBytes : allocatable.ephemeralStorageBytes;
}

export function resourceFieldValue(
  pod: Pod,
  container: ContainerSpec,
  ref: { containerName?: string; resource?: string; divisor?: string | number },
  allocatable: NodeAllocatable,
): string {
  const target = ref.containerName ? [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find((c) => c.name === ref.containerName) : container;
  if (!target) throw new EnvError(`container ${ref.containerName} not found`);
  // Upstream ExtractContainerResourceValue also serves hugepages-<size>, which the API lets a resourceFieldRef name.
  const m = /^(limits|requests)\.(cpu|memory|ephemeral-storage|hugepages-.+)$/.exec(ref.resource ?? "");
  if (!m) throw new EnvError(`unsupported container resource : ${ref.resource}`);
  const [, kind, resource] = m as unknown as [string, "limits" | "requests", Resource];
  const value = amount(target, kind, resource, downwardApiAllocatable(pod, allocatable));
  const divisorQ = ref.divisor === undefined || ref.divisor === "0" || ref.divisor === 0 ? 1 : quantity(ref.divisor);
  if (resource === "cpu") {
    // Upstream convertResourceCPUToString: ceil(MilliValue / divisor.MilliValue).
    return String(Math.ceil(ceilExact(value * 1000) / ceilExact(divisorQ * 1000)));
  }
  return String(Math.ceil(ceilExact(value) / ceilExact(divisorQ)));
}
