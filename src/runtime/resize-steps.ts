/**
 * The order of an in-place resize (upstream doPodResizeAction): per
 * resource, the pod cgroup is raised before its containers when the pod's
 * total grows and lowered after them when it shrinks, so that the pod limit
 * never falls below what its containers are allowed. Pure.
 */
import { podLimits, podRequests } from "../cgroups/resources.ts";
import { podQosClass } from "../cgroups/qos.ts";
import { intValue } from "../cgroups/values.ts";
import type { Pod } from "../pods/schema.ts";
import { mixResources, resizableContainers, resourcesOf, withPodResources, type ContainerResources } from "./container-resources.ts";

export interface PodResizeSteps {
  /** The pod to write to the pod cgroup before the containers: grown resources new, shrinking ones still old. */
  podFirst: Pod;
  /** Whether a container's memory limit goes down (those are updated first). */
  memoryShrinks(container: string): boolean;
}

/** A limit every container declares, or unlimited. */
const podLimit = (pod: Pod, name: "cpu" | "memory"): number => {
  const { limits, cpuDeclared, memoryDeclared } = podLimits(pod);
  const declared = name === "cpu" ? cpuDeclared : memoryDeclared;
  return declared && limits[name] ? limits[name] : Infinity;
};

/** `pod` holds the allocated (target) resources; `applied` what each container runs with now (undefined: as in the spec). */
export function podResizeSteps(pod: Pod, applied: (container: string) => ContainerResources | undefined): PodResizeSteps {
  const target = new Map(resizableContainers(pod).map((c) => [c.name, resourcesOf(c)]));
  const before = new Map(resizableContainers(pod).map((c) => [c.name, applied(c.name) ?? resourcesOf(c)]));
  const old = withPodResources(pod, (name) => before.get(name));
  const grows = {
    memory: podLimit(pod, "memory") >= podLimit(old, "memory"),
    cpu: podLimit(pod, "cpu") >= podLimit(old, "cpu") && (podRequests(pod).cpu ?? 0) >= (podRequests(old).cpu ?? 0),
  };
  const mixed = withPodResources(pod, (name) => mixResources(before.get(name)!, target.get(name)!, grows));
  // A mix that would move the pod to another QoS cgroup is not an intermediate state: write the target at once.
  const podFirst = podQosClass(mixed) === podQosClass(pod) ? mixed : pod;
  const memoryLimit = (r: ContainerResources | undefined) => (r?.limits?.memory === undefined ? Infinity : intValue(r.limits.memory));
  return { podFirst, memoryShrinks: (name) => memoryLimit(target.get(name)) < memoryLimit(before.get(name)) };
}
