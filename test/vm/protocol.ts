/**
 * What the VM probe prints and how the host reads it back. The probe runs
 * every check of checks/index.ts in one boot and prints one line:
 *   BUNLET-PROBE-RESULT {"kernel": ..., "checks": {"<name>": {ok, ms, value|error}}}
 * on the serial console, between kernel messages.
 */
export const PROBE_MARKER = "BUNLET-PROBE-RESULT";

export interface ProbeContext {
  /** Runs a command (busybox applets are at /bin/busybox <applet>). */
  run(cmd: string[], opts?: { timeoutMs?: number }): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>;
  /** A file's content, trimmed; throws when missing. */
  read(path: string): string;
  /** Values of earlier checks, by name (a check can build on another's result). */
  results: Record<string, CheckResult>;
}

/** One entry of the probe's list. `run` returns anything JSON can carry. */
export interface ProbeCheck {
  name: string;
  run(ctx: ProbeContext): Promise<unknown>;
}

export type CheckResult = { ok: true; ms: number; value: unknown } | { ok: false; ms: number; error: string };

export interface ProbeResult {
  kernel: string;
  /** Milliseconds from the probe's start to the result line. */
  ms: number;
  checks: Record<string, CheckResult>;
}

/** The probe's result from the VM's console output; throws with the output's tail when it is missing. */
export function parseProbeOutput(output: string): ProbeResult {
  const line = output
    .split(/\r?\n/)
    .map((l) => l.replace(/\r/g, ""))
    .find((l) => l.includes(PROBE_MARKER + " "));
  if (!line) throw new Error(`no ${PROBE_MARKER} line in the VM output; its last lines:\n${output.split(/\r?\n/).slice(-40).join("\n")}`);
  return JSON.parse(line.slice(line.indexOf(PROBE_MARKER) + PROBE_MARKER.length + 1)) as ProbeResult;
}
