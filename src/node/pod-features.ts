/**
 * Admission of what a pod asks for that this node cannot give, so that a pod
 * never runs without it (upstream lifecycle/features_linux.go and the user
 * namespace checks of pkg/kubelet/userns):
 * - pod-level resources (`spec.resources` with cpu, memory or hugepages):
 *   rejected with upstream's reason PodLevelResourcesNotSupported: with the
 *   PodLevelResources gate off, as upstream; with it on, because this agent's
 *   QoS, admission and pod cgroups do not use them yet;
 * - `spec.hostUsers: false`: rejected, because this agent does not ask the
 *   runtime for a user namespace (CRI userns_options); with the
 *   UserNamespacesSupport gate off, with upstream's message for that.
 * A rejected pod is Failed with the reason and gets a Warning event (the pod
 * workers do that with any admission result).
 */
import type { Pod } from "../pods/schema.ts";
import type { AdmitResult } from "./admission.ts";

export interface PodFeatureGates {
  /** featureGates.PodLevelResources (1.34 default true). */
  podLevelResources: boolean;
  /** featureGates.UserNamespacesSupport (1.34 default true). */
  userNamespacesSupport: boolean;
}

/** Upstream IsSupportedPodLevelResource: cpu, memory and hugepages-<size>. */
const podLevelResource = (name: string) => name === "cpu" || name === "memory" || name.startsWith("hugepages-");

/** Upstream IsPodLevelResourcesSet: spec.resources names a supported resource in requests or limits. */
export function podLevelResourcesSet(pod: Pod): boolean {
  const r = (pod.spec as { resources?: { requests?: Record<string, unknown>; limits?: Record<string, unknown> } }).resources;
  return [...Object.keys(r?.requests ?? {}), ...Object.keys(r?.limits ?? {})].some(podLevelResource);
}

export function admitPodFeatures(pod: Pod, gates: PodFeatureGates): AdmitResult {
  if (podLevelResourcesSet(pod)) {
    return {
      admit: false,
      reason: "PodLevelResourcesNotSupported",
      message: gates.podLevelResources
        ? "pod-level resources are not supported on the node: this agent does not apply spec.resources to QoS, admission and the pod cgroup"
        : "PodLevelResources feature gate is disabled",
    };
  }
  if ((pod.spec as { hostUsers?: boolean }).hostUsers === false) {
    return {
      admit: false,
      reason: "UserNamespacesNotSupported",
      message: gates.userNamespacesSupport
        ? "can't set `spec.hostUsers: false`: this agent does not create user namespaces for pods"
        : 'the feature gate "UserNamespacesSupport" is disabled: can\'t set spec.HostUsers',
    };
  }
  return { admit: true };
}
