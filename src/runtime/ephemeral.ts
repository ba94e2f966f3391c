/**
 * Ephemeral containers (kubectl debug): what differs from other containers
 * when one is started. Upstream: its process namespace is the target
 * container's (CRI NamespaceMode TARGET with that container's ID) when
 * `targetContainerName` is set; it is started once and never restarted
 * (plan.ts); it runs in the pod's sandbox and cgroup like the others.
 */
import { NamespaceMode, type ContainerConfig } from "../cri/index.ts";
import type { Pod } from "../pods/schema.ts";
import type { ObservedPod } from "./types.ts";
import { ephemeralSpecOf } from "../pods/spec.ts";
import { currentSandbox } from "./observed.ts";

export class TargetContainerError extends Error {
  constructor(
    readonly container: string,
    readonly target: string,
  ) {
    super(`target container "${target}" of ephemeral container "${container}" is not running in the pod`);
    this.name = "TargetContainerError";
  }
}

/**
 * The target container ID an ephemeral container's process namespace joins,
 * undefined when it has no target (or is not ephemeral). Throws
 * TargetContainerError when the target is not running in the current sandbox.
 */
export function pidTargetOf(pod: Pod, name: string, observed: ObservedPod): string | undefined {
  const target = ephemeralSpecOf(pod, name)?.targetContainerName;
  if (!target) return undefined;
  const running = currentSandbox(pod, observed).here.containers.find((c) => c.name === target && c.state === "running");
  if (!running) throw new TargetContainerError(name, target);
  return running.id;
}

/** Puts the container in the process namespace of container `targetId` (mutates the config). */
export function joinPidNamespace(config: ContainerConfig, targetId: string): void {
  const sc = config.linux?.securityContext;
  if (!sc?.namespaceOptions) throw new Error("container config has no namespace options");
  sc.namespaceOptions = { ...sc.namespaceOptions, pid: NamespaceMode.TARGET, targetId };
}
