/**
 * The core/v1 Probe as valibot schemas. The pod schema (pods/schema.ts)
 * keeps `livenessProbe`, `readinessProbe` and `startupProbe` as unknown
 * loose fields; the prober parses them here, with upstream's defaults
 * (pkg/apis/core/v1/defaults.go: timeout 1s, period 10s, success 1,
 * failure 3) and the validation rules the API server would apply
 * (exactly one handler; liveness and startup need successThreshold 1).
 */
import * as v from "valibot";
import { formatIssues } from "../pods/schema.ts";

export type ProbeType = "liveness" | "readiness" | "startup";

const Int = v.pipe(v.number(), v.integer());
const PortNumber = v.pipe(Int, v.minValue(1, "must be between 1 and 65535"), v.maxValue(65535, "must be between 1 and 65535"));
/** An IntOrString port: a number, or the name of one of the container's ports. */
const PortRef = v.union([PortNumber, v.pipe(v.string(), v.minLength(1, "must not be empty"))]);

export const ExecAction = v.looseObject({
  command: v.pipe(v.array(v.string()), v.minLength(1, "must not be empty")),
});

export const HttpHeader = v.looseObject({ name: v.pipe(v.string(), v.minLength(1, "must not be empty")), value: v.string() });

export const HttpGetAction = v.looseObject({
  path: v.optional(v.string()),
  port: PortRef,
  host: v.optional(v.string()),
  scheme: v.optional(v.picklist(["HTTP", "HTTPS"]), "HTTP"),
  httpHeaders: v.optional(v.array(HttpHeader)),
});

export const TcpSocketAction = v.looseObject({ port: PortRef, host: v.optional(v.string()) });

export const GrpcAction = v.looseObject({ port: PortNumber, service: v.optional(v.nullable(v.string())) });

const positive = (fallback: number) => v.optional(v.pipe(Int, v.minValue(1, "must be at least 1")), fallback);

export const Probe = v.looseObject({
  exec: v.optional(ExecAction),
  httpGet: v.optional(HttpGetAction),
  tcpSocket: v.optional(TcpSocketAction),
  grpc: v.optional(GrpcAction),
  initialDelaySeconds: v.optional(v.pipe(Int, v.minValue(0, "must not be negative")), 0),
  timeoutSeconds: positive(1),
  periodSeconds: positive(10),
  successThreshold: positive(1),
  failureThreshold: positive(3),
  terminationGracePeriodSeconds: v.optional(v.nullable(v.pipe(Int, v.minValue(1, "must be at least 1")))),
});

export type ProbeSpec = v.InferOutput<typeof Probe>;
export type HttpGetSpec = v.InferOutput<typeof HttpGetAction>;
export type TcpSocketSpec = v.InferOutput<typeof TcpSocketAction>;
export type GrpcSpec = v.InferOutput<typeof GrpcAction>;
export type ExecSpec = v.InferOutput<typeof ExecAction>;

export type ProbeParse = { ok: true; probe: ProbeSpec } | { ok: false; error: string };

/** Parses one probe field of a container; `type` decides the extra rules upstream validation has. */
export function parseProbe(type: ProbeType, input: unknown): ProbeParse {
  const r = v.safeParse(Probe, input);
  if (!r.success) return { ok: false, error: formatIssues(r.issues) };
  const p = r.output;
  const handlers = [p.exec, p.httpGet, p.tcpSocket, p.grpc].filter((h) => h !== undefined).length;
  if (handlers !== 1) return { ok: false, error: handlers === 0 ? "must specify a handler type" : "may not specify more than 1 handler type" };
  if (type !== "readiness" && p.successThreshold !== 1) return { ok: false, error: `field "successThreshold": must be 1 for a ${type} probe` };
  if (type === "readiness" && p.terminationGracePeriodSeconds != null) return { ok: false, error: 'field "terminationGracePeriodSeconds": must not be set for a readiness probe' };
  return { ok: true, probe: p };
}

export const probeField = { liveness: "livenessProbe", readiness: "readinessProbe", startup: "startupProbe" } as const satisfies Record<ProbeType, string>;

/** Upstream's name for the probe type in events and messages ("Liveness probe failed: ..."). */
export const probeTitle = { liveness: "Liveness", readiness: "Readiness", startup: "Startup" } as const satisfies Record<ProbeType, string>;
