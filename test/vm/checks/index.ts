/**
 * The VM probe's checks, run in this order in one boot. To add some: write
 * `checks/<area>.ts` exporting ProbeCheck[] and place it here; the test
 * reads `result.checks["<name>"]`. A check that throws is reported as
 * { ok: false, error } and the next one still runs.
 */
import type { ProbeCheck } from "../protocol.ts";
import { cgroupChecks } from "./cgroups.ts";
import { statsChecks } from "./stats.ts";

const byName = (name: string) => cgroupChecks.find((c) => c.name === name)!;
const beforeRemoval = cgroupChecks.filter((c) => c.name !== "cgroup-v2-remove");

// Stats read the pods' cgroups after the workloads ran in them and before they are removed.
export const checks: ProbeCheck[] = [...beforeRemoval, ...statsChecks, byName("cgroup-v2-remove")];
