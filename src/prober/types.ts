/** Shared by the probe kinds: the outcome of one probe run and small helpers. */
import { KUBERNETES_VERSION } from "../config/version.ts";

export type ProbeResult = "success" | "failure" | "unknown";

export interface ProbeOutcome {
  result: ProbeResult;
  output: string;
  /** Success with a caveat (upstream probe.Warning): a redirect to another host was not followed. */
  warning?: boolean;
  /** The probe errored with this result (upstream: an error beside a result other than Unknown): retried, then thrown away. */
  errored?: true;
}

/** Upstream's probe error (a non-nil err): every "unknown", and a result that came with an error. */
export const probeErrored = (outcome: ProbeOutcome): boolean => outcome.result === "unknown" || outcome.errored === true;

/**
 * A liveness or startup failure the runtime acts on: which probe failed (the
 * runtime words the Killing message, which depends on the restart policy and
 * the container's kind), and the probe's terminationGracePeriodSeconds when it has one.
 */
export interface ProbeFailure {
  probe: "liveness" | "startup";
  gracePeriodSeconds?: number;
}

/** Upstream reads at most 10 KiB of a probe's output (HTTP body, exec stdout+stderr). */
export const MAX_PROBE_OUTPUT = 10 * 1024;

export const joinHostPort = (host: string, port: number): string => (host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);

/** `kube-probe/1.34` for KUBERNETES_VERSION v1.34.x, as upstream sends on HTTP and gRPC probes (`kube-lifecycle/1.34` on httpGet hooks). */
export const probeUserAgent = (fragment: "probe" | "lifecycle" = "probe"): string => `kube-${fragment}/${KUBERNETES_VERSION.replace(/^v/, "").split(".").slice(0, 2).join(".")}`;
