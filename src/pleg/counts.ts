import type { RuntimePodRecord } from "../runtime/types.ts";

/** Pods with a ready sandbox and containers by state, from the last PLEG relist (kubelet_running_pods / _containers). */
export function runtimeCounts(records: readonly RuntimePodRecord[]): { pods: number; containers: Record<string, number> } {
  const containers: Record<string, number> = { running: 0, exited: 0, created: 0, unknown: 0 };
  let pods = 0;
  for (const r of records) {
    let sandboxRunning = false;
    for (const [id, state] of r.entities) {
      if (r.sandboxIds?.has(id)) sandboxRunning ||= state === "running";
      else containers[state] = (containers[state] ?? 0) + 1;
    }
    if (sandboxRunning) pods++;
  }
  return { pods, containers };
}
