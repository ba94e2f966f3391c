/**
 * A pod's requests and limits, after upstream component-helpers/resource
 * (PodRequests, PodLimits, the sidecar-aware aggregation) with pod-level
 * resources (`spec.resources`, the PodLevelResources gate, on by default in
 * 1.34): where the pod sets cpu, memory or hugepages-<size> itself, that
 * value replaces the containers' aggregate.
 *
 * The pod-level values are read as the API server stores them, after
 * SetDefaults_Pod's defaultHugePagePodLimits and defaultPodRequests; a static
 * pod gets the same defaulting here, as its containers' requests default to
 * their limits. With the gate off a pod that sets them is rejected at
 * admission (node/pod-features.ts) and never reaches these helpers, so they
 * take no gate.
 */
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { isSidecar } from "../pods/spec.ts";
import { intValue, milliValue } from "./values.ts";

/** cpu in millicores, everything else in integer units (bytes, counts). */
export type ResourceAmounts = Record<string, number>;

type Quantities = Record<string, string | number> | undefined | null;

export function amounts(list: Quantities): ResourceAmounts {
  const out: ResourceAmounts = {};
  for (const [name, q] of Object.entries(list ?? {})) out[name] = name === "cpu" ? milliValue(q) : intValue(q);
  return out;
}

const add = (into: ResourceAmounts, more: ResourceAmounts) => {
  for (const [k, v] of Object.entries(more)) into[k] = (into[k] ?? 0) + v;
};
const maxInto = (into: ResourceAmounts, more: ResourceAmounts) => {
  for (const [k, v] of Object.entries(more)) if (into[k] === undefined || v > into[k]) into[k] = v;
};

/**
 * A container's requests as the kubelet sees them: API defaulting gives a
 * resource with a limit and no request the limit as request (static pods get
 * the same defaulting), and podQosClass assumes it too.
 */
export function containerRequests(c: ContainerSpec): ResourceAmounts {
  return amounts({ ...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {}) });
}

export function containerLimits(c: ContainerSpec): ResourceAmounts {
  return amounts(c.resources?.limits);
}

/**
 * component-helpers/resource's aggregation: regular containers and sidecars
 * (restartable init containers) are summed; each plain init container runs
 * alone next to the sidecars started before it, and the pod needs the max of
 * those peaks. `visit` sees each container's effective list (upstream's
 * ContainerFn), which is how "every container declares a limit" is decided.
 */
export function aggregate(pod: Pod, get: (c: ContainerSpec) => ResourceAmounts, visit?: (list: ResourceAmounts) => void): ResourceAmounts {
  const result: ResourceAmounts = {};
  for (const c of pod.spec.containers) {
    const r = get(c);
    visit?.(r);
    add(result, r);
  }
  const sidecars: ResourceAmounts = {};
  const initPeak: ResourceAmounts = {};
  for (const c of pod.spec.initContainers ?? []) {
    let r = get(c);
    if (isSidecar(c)) {
      add(result, r);
      add(sidecars, r);
      r = { ...sidecars };
    } else {
      const combined = { ...r };
      add(combined, sidecars);
      r = combined;
    }
    visit?.(r);
    maxInto(initPeak, r);
  }
  maxInto(result, initPeak);
  return result;
}

/** Upstream IsSupportedPodLevelResource: cpu, memory and hugepages-<size>. */
export const isPodLevelResource = (name: string): boolean => name === "cpu" || name === "memory" || name.startsWith("hugepages-");

const isHugePages = (name: string) => name.startsWith("hugepages-");

/** The pod's own `spec.resources`, as the API server stores it (defaulted); undefined when the pod has none. */
export interface PodLevelResources {
  requests: ResourceAmounts;
  limits: ResourceAmounts;
}

type RawPodResources = { requests?: Quantities; limits?: Quantities };

/**
 * `spec.resources` after SetDefaults_Pod: when the pod sets anything,
 * hugepages limits default to the containers' aggregate (unless the pod
 * requests that size); when it sets limits, a request it lacks defaults to
 * the containers' aggregate request (cpu and memory, the overcommittable
 * ones), else to the pod's limit.
 */
export function podLevelResources(pod: Pod): PodLevelResources | undefined {
  const raw = pod.spec.resources as RawPodResources | null | undefined;
  if (raw === undefined || raw === null) return undefined;
  const requests = amounts(raw.requests);
  const limits = amounts(raw.limits);
  if (Object.keys(requests).length + Object.keys(limits).length === 0) return { requests, limits };
  for (const [name, v] of Object.entries(aggregate(pod, containerLimits))) {
    if (isHugePages(name) && requests[name] === undefined && limits[name] === undefined) limits[name] = v;
  }
  if (Object.keys(limits).length > 0) {
    for (const [name, v] of Object.entries(aggregate(pod, containerRequests))) {
      if (requests[name] === undefined && isPodLevelResource(name) && !isHugePages(name)) requests[name] = v;
    }
    for (const [name, v] of Object.entries(limits)) if (requests[name] === undefined && isPodLevelResource(name)) requests[name] = v;
  }
  return { requests, limits };
}

const namesSupported = (list: ResourceAmounts | undefined) => Object.keys(list ?? {}).some(isPodLevelResource);

/** Upstream IsPodLevelResourcesSet: spec.resources names a supported resource in requests or limits. */
export function podLevelResourcesSet(pod: Pod): boolean {
  const raw = pod.spec.resources as RawPodResources | null | undefined;
  return [...Object.keys(raw?.requests ?? {}), ...Object.keys(raw?.limits ?? {})].some(isPodLevelResource);
}

/** Upstream IsPodLevelRequestsSet (on the defaulted pod). */
export const podLevelRequestsSet = (pod: Pod): boolean => namesSupported(podLevelResources(pod)?.requests);

/** Upstream IsPodLevelLimitsSet (on the defaulted pod). */
export const podLevelLimitsSet = (pod: Pod): boolean => namesSupported(podLevelResources(pod)?.limits);

function overhead(pod: Pod): ResourceAmounts {
  return amounts((pod.spec as { overhead?: Quantities }).overhead);
}

/** Only the supported names of a pod-level list. */
function supported(list: ResourceAmounts): [string, number][] {
  return Object.entries(list).filter(([name]) => isPodLevelResource(name));
}

/**
 * resource.PodRequests: the containers' aggregate, each resource the pod
 * requests itself replaced by that, plus pod overhead.
 */
export function podRequests(pod: Pod, opts: { excludeOverhead?: boolean } = {}): ResourceAmounts {
  const reqs = aggregate(pod, containerRequests);
  if (podLevelRequestsSet(pod)) for (const [name, v] of supported(podLevelResources(pod)!.requests)) reqs[name] = v;
  if (!opts.excludeOverhead) add(reqs, overhead(pod));
  return reqs;
}

/**
 * resource.PodLimits plus which limits are declared (ResourceConfigForPod):
 * a limit is declared when every container's effective list has it, or the
 * pod sets it (non-zero) itself. Each resource the pod limits replaces the
 * containers' aggregate; overhead is added only to non-zero limits.
 */
export function podLimits(pod: Pod): { limits: ResourceAmounts; cpuDeclared: boolean; memoryDeclared: boolean } {
  let cpuDeclared = true;
  let memoryDeclared = true;
  const limits = aggregate(pod, containerLimits, (l) => {
    if (!l.cpu) cpuDeclared = false;
    if (!l.memory) memoryDeclared = false;
  });
  if (podLevelResourcesSet(pod)) {
    const own = podLevelResources(pod)!.limits;
    for (const [name, v] of supported(own)) limits[name] = v;
    if (own.cpu) cpuDeclared = true;
    if (own.memory) memoryDeclared = true;
  }
  for (const [k, v] of Object.entries(overhead(pod))) if (limits[k]) limits[k] += v;
  return { limits, cpuDeclared, memoryDeclared };
}

/**
 * The downward API's stand-in for a limit a container does not set (upstream
 * podAllocatable in kubelet_resources.go): the node's allocatable, but the
 * pod's own cpu or memory limit where it sets one (non-zero).
 */
export function downwardApiAllocatable<T extends { cpuMilli: number; memoryBytes: number }>(pod: Pod, node: T): T {
  if (!podLevelLimitsSet(pod)) return node;
  const own = podLevelResources(pod)!.limits;
  return { ...node, ...(own.cpu ? { cpuMilli: own.cpu } : {}), ...(own.memory ? { memoryBytes: own.memory } : {}) };
}
