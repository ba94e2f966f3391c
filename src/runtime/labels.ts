/**
 * Labels and annotations on CRI objects, with upstream's keys, so tools
 * (crictl, upstream kubelet) and a restarted agent read them alike. The
 * agent's own state lives here, not in a local database: this is what makes
 * a restart adopt running pods.
 */
import type { PodRef } from "../pods/identity.ts";

export const PodNameLabel = "io.kubernetes.pod.name";
export const PodNamespaceLabel = "io.kubernetes.pod.namespace";
export const PodUidLabel = "io.kubernetes.pod.uid";
export const ContainerNameLabel = "io.kubernetes.container.name";

export const ContainerHashAnnotation = "io.kubernetes.container.hash";
export const ContainerRestartCountAnnotation = "io.kubernetes.container.restartCount";
export const TerminationMessagePathAnnotation = "io.kubernetes.container.terminationMessagePath";
export const TerminationMessagePolicyAnnotation = "io.kubernetes.container.terminationMessagePolicy";
export const PodTerminationGracePeriodAnnotation = "io.kubernetes.pod.terminationGracePeriod";
export const PodDeletionGracePeriodAnnotation = "io.kubernetes.pod.deletionGracePeriod";

/** The grace period a container carries for a kill without its pod's spec (an orphan): deletion, then termination, as upstream. */
export function podGracePeriodFrom(annotations: Record<string, string>): number | undefined {
  for (const key of [PodDeletionGracePeriodAnnotation, PodTerminationGracePeriodAnnotation]) {
    const value = annotations[key];
    if (value !== undefined && /^\d+$/.test(value)) return Number(value);
  }
  return undefined;
}
export const ContainerPortsAnnotation = "io.kubernetes.container.ports";

export const podLabels = (p: PodRef): Record<string, string> => ({
  [PodNameLabel]: p.name,
  [PodNamespaceLabel]: p.namespace,
  [PodUidLabel]: p.uid,
});

export function identityFromLabels(labels: Record<string, string>): PodRef | undefined {
  const uid = labels[PodUidLabel];
  if (!uid) return undefined;
  return { uid, name: labels[PodNameLabel] ?? "", namespace: labels[PodNamespaceLabel] ?? "" };
}
