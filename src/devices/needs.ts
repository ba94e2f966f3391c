/**
 * What a pod asks of device plugin resources, as upstream's device manager
 * reads it: a container's amount is its limit (extended resources cannot be
 * overcommitted, so the API server makes requests equal limits), init
 * containers run one at a time and hand their devices on to the containers
 * after them, restartable init containers (sidecars) keep theirs.
 */
import type { Pod } from "../pods/schema.ts";

type Container = Pod["spec"]["containers"][number];

/** Amounts of the given resources one container asks for (only those above 0). */
export function containerNeeds(container: Container, isDeviceResource: (name: string) => boolean): Map<string, number> {
  const out = new Map<string, number>();
  const limits = (container.resources?.limits ?? container.resources?.requests ?? {}) as Record<string, string | number>;
  for (const [name, raw] of Object.entries(limits)) {
    if (!isDeviceResource(name)) continue;
    const n = Number(raw);
    if (Number.isInteger(n) && n > 0) out.set(name, n);
  }
  return out;
}

const isSidecar = (c: Container & { restartPolicy?: string }) => c.restartPolicy === "Always";

/** The containers in the order the device manager allocates them: init containers first, as the pod starts. */
export function allocationOrder(pod: Pod): { container: Container; init: boolean; sidecar: boolean }[] {
  return [
    ...(pod.spec.initContainers ?? []).map((c) => ({ container: c, init: true, sidecar: isSidecar(c) })),
    ...pod.spec.containers.map((c) => ({ container: c, init: false, sidecar: false })),
  ];
}

/**
 * Devices of each resource the whole pod holds at its peak: the long-running
 * containers (app containers and sidecars) together, or the largest init
 * container plus the sidecars started before it, whichever is more.
 */
export function podNeeds(pod: Pod, isDeviceResource: (name: string) => boolean): Map<string, number> {
  const out = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, n: number) => m.set(k, (m.get(k) ?? 0) + n);
  const sidecarsSoFar = new Map<string, number>();
  const peakInit = new Map<string, number>();
  for (const c of pod.spec.initContainers ?? []) {
    const needs = containerNeeds(c, isDeviceResource);
    if (isSidecar(c)) {
      for (const [k, n] of needs) add(sidecarsSoFar, k, n);
      continue;
    }
    for (const [k, n] of needs) peakInit.set(k, Math.max(peakInit.get(k) ?? 0, n + (sidecarsSoFar.get(k) ?? 0)));
  }
  const longRunning = new Map(sidecarsSoFar);
  for (const c of pod.spec.containers) for (const [k, n] of containerNeeds(c, isDeviceResource)) add(longRunning, k, n);
  for (const k of new Set([...longRunning.keys(), ...peakInit.keys()])) out.set(k, Math.max(longRunning.get(k) ?? 0, peakInit.get(k) ?? 0));
  return out;
}
