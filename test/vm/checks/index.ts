/**
 * The VM probe's checks, run in this order in one boot. To add some (the
 * stats readers, say): write `checks/<area>.ts` exporting ProbeCheck[] and
 * append it here; the test reads `result.checks["<name>"]`. A check that
 * throws is reported as { ok: false, error } and the next one still runs.
 */
import type { ProbeCheck } from "../protocol.ts";
import { cgroupChecks } from "./cgroups.ts";

export const checks: ProbeCheck[] = [...cgroupChecks];
