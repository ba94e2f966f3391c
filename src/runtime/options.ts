/**
 * What the CRI runtime facade (manager.ts) is built with besides the CRI:
 * where a pod's sandbox and container configs come from
 * (`ContainerConfigSources`) and what decides when a container may start
 * (`StartPolicy`). Every field is required: the agent builds both in one
 * place (agent/pod-runtime.ts), and a source the node does not have is passed as its
 * explicit "none" (`noServiceEnv`, `defaultRuntimeClasses`, `resize:
 * undefined`), so nothing is left out by accident. Unit tests build them
 * with `runtime/testing.ts`.
 */
import type { PodObjects } from "../api/objects.ts";
import type { ContainerResourceValues } from "../cgroups/container-values.ts";
import type { UserNamespace } from "../cri/index.ts";
import type { DeviceRunOptions } from "../devices/index.ts";
import type { Pod } from "../pods/schema.ts";
import type { RuntimeClasses } from "../runtimeclass/index.ts";
import type { ServiceEnv } from "../services/index.ts";
import type { Backoff } from "./backoff.ts";
import type { ContainerResources } from "./container-resources.ts";
import type { NodeSettings } from "./cri-config.ts";
import type { Unhealthy } from "./plan.ts";
import type { PullQueue } from "./pull-queue.ts";
import type { DownwardApiAllocatable } from "../cgroups/downward-api.ts";

/** Where a pod's CRI sandbox and container configs come from, besides the pod's spec. */
export interface ContainerConfigSources {
  /** Log directory, pod cgroup parent, DNS, seccomp: the node's settings for every sandbox and container. */
  node: NodeSettings;
  /** The node's IP, for status.hostIP fieldRefs and host-network pods; undefined when the node has none known. */
  hostIP: string | undefined;
  /** Container-level CPU, memory, swap, cpuset and OOM score values for the CRI (`NodeContainerResources`). */
  resources: ContainerResourceValues;
  /** ConfigMaps and secrets for env references and image pull secrets (`noPodObjects` standalone). */
  podObjects: PodObjects;
  /** What resourceFieldRef limits default to when a container sets none. */
  nodeAllocatable: DownwardApiAllocatable;
  /** Service environment variables (`noServiceEnv` standalone, as upstream without an API client). */
  serviceEnv: ServiceEnv;
  /** spec.runtimeClassName → the CRI runtime handler (`defaultRuntimeClasses` standalone). */
  runtimeClasses: RuntimeClasses;
  /** Device plugins: the devices, mounts, env and annotations a container's devices add to its config. */
  devices: ContainerDevices;
  /** The pod's CRI user namespace (hostUsers), the same for its sandbox and containers; throws upstream's refusal (userns/index.ts). */
  userNamespaces: { forPod(pod: Pod, runtimeHandler: string): Promise<UserNamespace | undefined> };
}

/** What decides whether and when a container starts: backoffs, the pull queue, the prober's verdicts, resize. */
export interface StartPolicy {
  /** Restarts of exited containers (CrashLoopBackOff); the syncLoop's housekeeping forgets old entries of the same object. */
  crashLoop: Backoff;
  /** Failed image pulls (ImagePullBackOff). */
  imagePulls: Backoff;
  /** Node-wide pull concurrency and rate (serializeImagePulls, maxParallelImagePulls, registryPullQPS). */
  pullQueue: PullQueue;
  /** The prober's verdicts (prober/verdicts.ts: ProbeVerdicts). */
  probes: StartVerdicts;
  /** In-place resize: what was applied to each container (allocation/); undefined when InPlacePodVerticalScaling is off, and running containers are never resized. */
  resize: ActuatedResources | undefined;
}

/** What the prober says that decides a start or a restart. */
export interface StartVerdicts {
  /** Running containers of a pod to restart (container ID → why). */
  unhealthy(podUid: string): Unhealthy;
  /**
   * The startup verdict on a container instance (its startupProbe succeeded): a sidecar with a
   * startupProbe holds the next init container back until it is true.
   */
  isStarted(podUid: string, containerName: string, containerId: string): boolean;
}

/** The device manager's part of a container's config; a DeviceError makes CreateContainerConfigError (upstream). */
export interface ContainerDevices {
  runOptions(pod: Pod, containerName: string): Promise<DeviceRunOptions>;
}

/** The allocation manager's record of what the runtime applied, per pod UID and container name. */
export interface ActuatedResources {
  actuated(uid: string, container: string): ContainerResources | undefined;
  setActuated(uid: string, container: string, resources: ContainerResources): void;
}
