/**
 * Questions about what the runtime observed of a pod, shared by the planner
 * and the status (status/phase.ts).
 */
import type { Pod } from "../pods/schema.ts";
import type { ObservedPod } from "./types.ts";

/**
 * What ran in the pod's newest sandbox, and whether an app container ran
 * there: init containers are judged on this alone (by the planner and the status).
 */
export function currentSandbox(pod: Pod, observed: ObservedPod): { here: ObservedPod; appStarted: boolean } {
  const sandboxId = observed.sandboxes[0]?.id;
  const here: ObservedPod = { ...observed, containers: observed.containers.filter((c) => c.sandboxId === sandboxId) };
  const appNames = new Set(pod.spec.containers.map((c) => c.name));
  return { here, appStarted: here.containers.some((c) => appNames.has(c.name)) };
}
