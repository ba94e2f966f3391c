/**
 * Admission of what a pod asks for that this node cannot give, so that a pod
 * never runs without it (upstream lifecycle/features_linux.go and the user
 * namespace checks of pkg/kubelet/userns):
 * - pod-level resources (`spec.resources` with cpu, memory or hugepages)
 *   with the PodLevelResources gate off: rejected with upstream's reason
 *   PodLevelResourcesNotSupported and message (upstream
 *   isPodLevelResourcesSupported). With the gate on (1.34's default) the pod
 *   is admitted and they are acted on as upstream: QoS class (cgroups/qos.ts),
 *   resource fit (admission.ts), the pod cgroup's shares, quota and memory
 *   limit, each container's CRI limits where it has none, the OOM score
 *   adjustment (cgroups/pod-resources.ts, resources.ts, container.ts), the
 *   downward API's default limits, eviction's requests; the static CPU and
 *   memory managers give such a pod no exclusive CPUs or NUMA memory, as
 *   upstream; hugepages only as far as this agent handles them elsewhere;
 * - `spec.hostUsers: false` with the UserNamespacesSupport gate off, with
 *   upstream's message (with it on, the pod gets its user namespace through
 *   the CRI, or the runtime's lack of it fails the sandbox: userns/index.ts);
 * - an AppArmor profile other than Unconfined (pod or container
 *   securityContext.appArmorProfile, or the deprecated
 *   container.apparmor.security.beta.kubernetes.io/ annotation): rejected with
 *   upstream's reason AppArmor, with upstream's message on a host without
 *   AppArmor, and because this agent does not pass profiles to the runtime
 *   (CRI apparmor) on a host with it;
 * - securityContext.supplementalGroupsPolicy Strict: rejected with upstream's
 *   SupplementalGroupsPolicyNotSupported (upstream does so when the runtime
 *   lacks it; this agent never passes the policy to the runtime);
 * - spec.resourceClaims (dynamic resource allocation) and containers'
 *   volumeDevices (raw block volumes): rejected, as this agent prepares
 *   neither (upstream fails such pods at start with
 *   FailedPrepareDynamicResources or a volume error; the reasons here,
 *   DynamicResourceAllocationNotSupported and BlockVolumeNotSupported, are
 *   this agent's).
 * A rejected pod is Failed with the reason and gets a Warning event (the pod
 * workers do that with any admission result).
 */
import { readFileSync } from "node:fs";
import type { Pod } from "../pods/schema.ts";
import { allContainersOf } from "../pods/spec.ts";
import { podLevelResourcesSet } from "../cgroups/pod-resources.ts";
import type { AdmitResult } from "./admission.ts";

export interface PodFeatureGates {
  /** featureGates.PodLevelResources (1.34 default true). */
  podLevelResources: boolean;
  /** featureGates.UserNamespacesSupport (1.34 default true). */
  userNamespacesSupport: boolean;
  /** The host's kernel has AppArmor enabled (/sys/module/apparmor/parameters/enabled is Y, as runc checks). */
  appArmorEnabled?: boolean;
}

const APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/";

type WithSecurity = { securityContext?: { appArmorProfile?: { type?: string }; supplementalGroupsPolicy?: string } };

/** Upstream apparmor isRequired: a profile other than Unconfined on the pod or a container, or the deprecated annotation not "unconfined". */
export function appArmorRequired(pod: Pod): boolean {
  const confined = (x: WithSecurity) => x.securityContext?.appArmorProfile !== undefined && x.securityContext.appArmorProfile.type !== "Unconfined";
  if (confined(pod.spec as WithSecurity)) return true;
  if (allContainersOf(pod).some((c) => confined(c as WithSecurity))) return true;
  return Object.entries(pod.metadata.annotations ?? {}).some(([k, value]) => k.startsWith(APPARMOR_ANNOTATION_PREFIX) && value !== "unconfined");
}

export { podLevelResourcesSet };

export function admitPodFeatures(pod: Pod, gates: PodFeatureGates): AdmitResult {
  if (podLevelResourcesSet(pod) && !gates.podLevelResources) {
    return { admit: false, reason: "PodLevelResourcesNotSupported", message: "PodLevelResources feature gate is disabled" };
  }
  if ((pod.spec as { hostUsers?: boolean }).hostUsers === false && !gates.userNamespacesSupport) {
    return { admit: false, reason: "UserNamespacesNotSupported", message: 'the feature gate "UserNamespacesSupport" is disabled: can\'t set spec.HostUsers' };
  }
  if (appArmorRequired(pod)) {
    return {
      admit: false,
      reason: "AppArmor",
      message: gates.appArmorEnabled
        ? "Cannot enforce AppArmor: this agent does not pass AppArmor profiles to the runtime"
        : "Cannot enforce AppArmor: AppArmor is not enabled on the host",
    };
  }
  if ((pod.spec as WithSecurity).securityContext?.supplementalGroupsPolicy === "Strict") {
    return { admit: false, reason: "SupplementalGroupsPolicyNotSupported", message: "SupplementalGroupsPolicy=Strict is not supported in this node" };
  }
  if (((pod.spec as { resourceClaims?: unknown[] }).resourceClaims ?? []).length > 0) {
    return {
      admit: false,
      reason: "DynamicResourceAllocationNotSupported",
      message: "spec.resourceClaims: this agent does not prepare dynamic resource allocation claims",
    };
  }
  const block = allContainersOf(pod).find((c) => ((c as { volumeDevices?: unknown[] }).volumeDevices ?? []).length > 0);
  if (block) {
    return {
      admit: false,
      reason: "BlockVolumeNotSupported",
      message: `container ${JSON.stringify(block.name)}: volumeDevices (raw block volumes) are not supported by this agent`,
    };
  }
  return { admit: true };
}

/** runc's apparmor.IsEnabled: the kernel module's parameter reads Y ("/sys" on a host). */
export function appArmorEnabled(sysRoot = "/sys", read: (path: string) => string = (p) => readFileSync(p, "utf8")): boolean {
  try {
    return read(`${sysRoot}/module/apparmor/parameters/enabled`).startsWith("Y");
  } catch {
    return false;
  }
}
