/**
 * The pod QoS class, exactly as upstream's GetPodQOS: only cpu and memory
 * count; requests default to limits (API defaulting does the same for pods
 * it stores, static pods get it here).
 */
import { parseQuantity } from "../config/index.ts";
import type { Pod } from "../pods/schema.ts";

export type QosClass = "Guaranteed" | "Burstable" | "BestEffort";

const SUPPORTED = ["cpu", "memory"] as const;

const amount = (q: string | number | undefined): number => (q === undefined ? 0 : typeof q === "number" ? q : parseQuantity(q));

export function podQosClass(pod: Pod): QosClass {
  const requests = new Map<string, number>();
  const limits = new Map<string, number>();
  let guaranteed = true;
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    const cLimits = c.resources?.limits ?? {};
    const cRequests = { ...cLimits, ...(c.resources?.requests ?? {}) };
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
