/**
 * Admission under node pressure (upstream managerImpl.Admit): with no
 * pressure every pod is admitted; critical pods always are; under memory
 * pressure alone, pods that are not BestEffort, and BestEffort pods that
 * tolerate the memory-pressure taint, are admitted; under any other
 * pressure only critical pods are.
 */
import { podQosClass } from "../cgroups/qos.ts";
import type { Pod } from "../pods/schema.ts";
import { nodeConditionMessage } from "./message.ts";
import { CONDITION_TO_TAINT, REASON, type NodeConditionType } from "./types.ts";
import { isCriticalPod } from "../pods/source.ts";

export type EvictionAdmitResult = { admit: true } | { admit: false; reason: "Evicted"; message: string };

type Toleration = { key?: string; operator?: string; value?: string; effect?: string };

/** upstream Toleration.ToleratesTaint for a taint with no value. */
function toleratesTaint(t: Toleration, taint: { key: string; effect: string }): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (t.key && t.key !== taint.key) return false;
  // An empty key needs operator Exists (validation enforces it); it then tolerates every taint.
  if (t.operator === "Exists") return true;
  if (t.operator === undefined || t.operator === "" || t.operator === "Equal") return !!t.key && (t.value ?? "") === "";
  return false;
}

export function admitUnderPressure(pod: Pod, conditions: readonly NodeConditionType[], isCritical: (pod: Pod) => boolean = isCriticalPod): EvictionAdmitResult {
  if (conditions.length === 0) return { admit: true };
  if (isCritical(pod)) return { admit: true };
  if (conditions.length === 1 && conditions[0] === "MemoryPressure") {
    if (podQosClass(pod) !== "BestEffort") return { admit: true };
    const tolerations = ((pod.spec as { tolerations?: Toleration[] }).tolerations ?? []) as Toleration[];
    const taint = { key: CONDITION_TO_TAINT.MemoryPressure, effect: "NoSchedule" };
    if (tolerations.some((t) => toleratesTaint(t, taint))) return { admit: true };
  }
  return { admit: false, reason: REASON, message: nodeConditionMessage(conditions) };
}
