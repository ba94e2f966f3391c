/**
 * The pod QoS class, exactly as upstream's GetPodQOS: only cpu and memory
 * count; requests default to limits (API defaulting does the same for pods
 * it stores, static pods get it here). With pod-level resources
 * (`spec.resources`, PodLevelResources, on by default in 1.34) those decide
 * instead of the containers' whenever spec.resources is present, as
 * upstream's ComputePodQOS: the API server computes the class that way, and
 * a status with another class is refused. The pod-level requests are the
 * defaulted ones (a request the pod lacks is the containers' aggregate, else
 * the pod's limit: pod-resources.ts).
 */
import { parseQuantity } from "../config/index.ts";
import type { Pod } from "../pods/schema.ts";
import { podLevelResources } from "./pod-resources.ts";

export type QosClass = "Guaranteed" | "Burstable" | "BestEffort";

const SUPPORTED = ["cpu", "memory"] as const;

const amount = (q: string | number | undefined): number => (q === undefined ? 0 : typeof q === "number" ? q : parseQuantity(q));

/** The pod's own classes' inputs: defaulted requests, and limits, as quantities in base units (cpu in cores). */
function podLevelSource(pod: Pod): { requests: Record<string, number>; limits: Record<string, number> } | undefined {
  const own = podLevelResources(pod);
  if (!own) return undefined;
  const cores = (list: Record<string, number>) => Object.fromEntries(Object.entries(list).map(([k, v]) => [k, k === "cpu" ? v / 1000 : v]));
  return { requests: cores(own.requests), limits: cores(own.limits) };
}

export function podQosClass(pod: Pod): QosClass {
  const requests = new Map<string, number>();
  const limits = new Map<string, number>();
  let guaranteed = true;
  const podLevel = podLevelSource(pod);
  const sources: { requests?: Record<string, string | number>; limits?: Record<string, string | number> }[] = podLevel
    ? [podLevel]
    : [...(pod.spec.initContainers ?? []), ...pod.spec.containers].map((c) => c.resources ?? {});
  for (const resources of sources) {
    const cLimits = resources.limits ?? {};
    const cRequests = { ...cLimits, ...(resources.requests ?? {}) };
    for (const name of SUPPORTED) {
      const r = amount(cRequests[name]);
      if (r > 0) requests.set(name, (requests.get(name) ?? 0) + r);
    }
    const found = new Set<string>();
    for (const name of SUPPORTED) {
      const l = amount(cLimits[name]);
      if (l > 0) {
        found.add(name);
        limits.set(name, (limits.get(name) ?? 0) + l);
      }
    }
    if (!SUPPORTED.every((n) => found.has(n))) guaranteed = false;
  }
  if (requests.size === 0 && limits.size === 0) return "BestEffort";
  if (guaranteed) for (const [name, r] of requests) if (limits.get(name) !== r) guaranteed = false;
  return guaranteed && requests.size === limits.size ? "Guaranteed" : "Burstable";
}
