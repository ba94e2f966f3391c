/**
 * Plain questions about a pod's spec that several subsystems ask: its
 * grace period, restart policy, which init containers are sidecars, a container by name,
 * which volumes its containers use.
 */
import type { ContainerSpec, EphemeralContainerSpec, Pod } from "./schema.ts";

/** How long a pod's containers get to stop: its deletion grace period, else its spec's, else 30 s. */
export const defaultGracePeriodSeconds = (pod: Pod | undefined): number => pod?.metadata.deletionGracePeriodSeconds ?? pod?.spec.terminationGracePeriodSeconds ?? 30;

export const restartPolicyOf = (pod: Pod): "Always" | "OnFailure" | "Never" => pod.spec.restartPolicy ?? "Always";

/** A sidecar: an init container with restartPolicy Always (it keeps running beside the app containers). */
export const isSidecar = (container: ContainerSpec): boolean => container.restartPolicy === "Always";

/** Init, app and ephemeral containers, in that order (upstream podutil.VisitContainers with every kind). */
export const allContainersOf = (pod: Pod): ContainerSpec[] => [...(pod.spec.initContainers ?? []), ...pod.spec.containers, ...(pod.spec.ephemeralContainers ?? [])];

/** An init, app or ephemeral container's spec by name. */
export const containerSpecOf = (pod: Pod, name: string): ContainerSpec | undefined => allContainersOf(pod).find((c) => c.name === name);

/**
 * The names of the volumes some container mounts or maps as a device
 * (upstream GetPodVolumeNames): a volume no container uses is never set up.
 */
export function usedVolumeNames(pod: Pod): Set<string> {
  const used = new Set<string>();
  for (const c of allContainersOf(pod)) {
    for (const m of c.volumeMounts ?? []) used.add(m.name);
    for (const d of (c as { volumeDevices?: { name?: unknown }[] }).volumeDevices ?? []) if (typeof d.name === "string") used.add(d.name);
  }
  return used;
}

export const ephemeralSpecOf = (pod: Pod, name: string): EphemeralContainerSpec | undefined => pod.spec.ephemeralContainers?.find((c) => c.name === name);
