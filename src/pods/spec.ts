/**
 * Plain questions about a pod's spec that several subsystems ask: its
 * restart policy, which init containers are sidecars, a container by name.
 */
import type { ContainerSpec, EphemeralContainerSpec, Pod } from "./schema.ts";

export const restartPolicyOf = (pod: Pod): "Always" | "OnFailure" | "Never" => pod.spec.restartPolicy ?? "Always";

/** A sidecar: an init container with restartPolicy Always (it keeps running beside the app containers). */
export const isSidecar = (container: ContainerSpec): boolean => container.restartPolicy === "Always";

/** An init, app or ephemeral container's spec by name. */
export const containerSpecOf = (pod: Pod, name: string): ContainerSpec | undefined =>
  [...(pod.spec.initContainers ?? []), ...pod.spec.containers, ...(pod.spec.ephemeralContainers ?? [])].find((c) => c.name === name);

export const ephemeralSpecOf = (pod: Pod, name: string): EphemeralContainerSpec | undefined => pod.spec.ephemeralContainers?.find((c) => c.name === name);
