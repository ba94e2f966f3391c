/**
 * The CPU and memory part of containers' resources, as the in-place resize
 * feature compares and applies them (upstream pkg/kubelet/allocation and
 * kuberuntime computePodResizeAction). Pure functions; quantities keep the
 * strings the API gave and are compared by value ("0.5" equals "500m").
 */
import { intValue, milliValue } from "../cgroups/values.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";

export type Quantities = Record<string, string | number>;

/** requests and limits of cpu and memory only: what a resize may change. */
export interface ContainerResources {
  requests?: Quantities;
  limits?: Quantities;
}

/** Container name → its resources, for the regular containers of one pod. */
export type PodResources = Record<string, ContainerResources>;

export const RESIZABLE = ["cpu", "memory"] as const;
export type ResizableResource = (typeof RESIZABLE)[number];

const pick = (q: Quantities | undefined): Quantities | undefined => {
  const out: Quantities = {};
  for (const name of RESIZABLE) if (q?.[name] !== undefined) out[name] = q[name]!;
  return Object.keys(out).length ? out : undefined;
};

export function resourcesOf(container: ContainerSpec): ContainerResources {
  const requests = pick(container.resources?.requests);
  const limits = pick(container.resources?.limits);
  return { ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) };
}

/** The containers a resize may change: regular ones and sidecars (restartable init containers), as upstream. */
export const resizableContainers = (pod: Pod): ContainerSpec[] => [...(pod.spec.initContainers ?? []).filter((c) => c.restartPolicy === "Always"), ...pod.spec.containers];

export const isResizable = (pod: Pod, container: ContainerSpec): boolean => resizableContainers(pod).includes(container);

export function podResourcesOf(pod: Pod): PodResources {
  return Object.fromEntries(resizableContainers(pod).map((c) => [c.name, resourcesOf(c)]));
}

const value = (name: ResizableResource, q: string | number | undefined): number => (name === "cpu" ? milliValue(q) : intValue(q));

/** A request defaults to the limit (API defaulting), so {limits: 1} and {requests: 1, limits: 1} are the same. */
const request = (r: ContainerResources, name: ResizableResource) => value(name, r.requests?.[name] ?? r.limits?.[name]);
const limit = (r: ContainerResources, name: ResizableResource) => value(name, r.limits?.[name]);

/** Which of cpu and memory differ between two resource sets. */
export function changedResources(a: ContainerResources, b: ContainerResources): ResizableResource[] {
  return RESIZABLE.filter((name) => request(a, name) !== request(b, name) || limit(a, name) !== limit(b, name));
}

export const sameResources = (a: ContainerResources, b: ContainerResources): boolean => changedResources(a, b).length === 0;

export const samePodResources = (a: PodResources, b: PodResources): boolean =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([name, r]) => b[name] !== undefined && sameResources(r, b[name]!));

/** The container's resizePolicy for one resource; NotRequired by default (upstream). */
export function resizePolicyOf(container: ContainerSpec, name: ResizableResource): "NotRequired" | "RestartContainer" {
  return container.resizePolicy?.find((p) => p.resourceName === name)?.restartPolicy ?? "NotRequired";
}

/** A resize from `from` to the container's spec: nothing, in place, or a restart of the container (resizePolicy). */
export function resizeAction(container: ContainerSpec, from: ContainerResources): "none" | "inPlace" | "restart" {
  const changed = changedResources(from, resourcesOf(container));
  if (!changed.length) return "none";
  return changed.some((name) => resizePolicyOf(container, name) === "RestartContainer") ? "restart" : "inPlace";
}

/** `r`'s cpu and memory put into a container's resources; other resources (ephemeral-storage...) are kept. */
function withContainerResources(container: ContainerSpec, r: ContainerResources): ContainerSpec {
  const merge = (kept: Quantities | undefined, resized: Quantities | undefined): Quantities | undefined => {
    const out: Quantities = { ...kept };
    for (const name of RESIZABLE) delete out[name];
    Object.assign(out, resized);
    return Object.keys(out).length ? out : undefined;
  };
  const { requests: _r, limits: _l, ...others } = container.resources ?? {};
  const requests = merge(container.resources?.requests, r.requests);
  const limits = merge(container.resources?.limits, r.limits);
  return { ...container, resources: { ...others, ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) } };
}

/** The pod with its resizable containers' cpu and memory replaced by `byName` (containers it does not name are kept). */
export function withPodResources(pod: Pod, byName: (name: string) => ContainerResources | undefined): Pod {
  const replace = (c: ContainerSpec) => {
    const r = byName(c.name);
    return r ? withContainerResources(c, r) : c;
  };
  const init = pod.spec.initContainers?.map((c) => (c.restartPolicy === "Always" ? replace(c) : c));
  return { ...pod, spec: { ...pod.spec, containers: pod.spec.containers.map(replace), ...(init ? { initContainers: init } : {}) } };
}

/**
 * Per resource, `to`'s value where `take` says so and `from`'s otherwise:
 * the pod cgroup's intermediate state of a resize, where only what grows has
 * been raised yet (upstream: grow the pod before its containers, shrink it after).
 */
export function mixResources(from: ContainerResources, to: ContainerResources, take: Record<ResizableResource, boolean>): ContainerResources {
  const side = (name: ResizableResource) => (take[name] ? to : from);
  const part = (kind: "requests" | "limits") => {
    const out: Quantities = {};
    for (const name of RESIZABLE) {
      const q = side(name)[kind]?.[name];
      if (q !== undefined) out[name] = q;
    }
    return Object.keys(out).length ? out : undefined;
  };
  const requests = part("requests");
  const limits = part("limits");
  return { ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) };
}
