/**
 * The grpc probe, after upstream pkg/probe/grpc: the standard
 * `grpc.health.v1.Health/Check` with the probe's `service`, plaintext,
 * User-Agent kube-probe/<major.minor>; one deadline of timeoutSeconds for
 * connecting and the call. SERVING is success; everything else is failure
 * with upstream's messages. The two messages are tiny, so they are encoded
 * by hand here instead of loading a .proto:
 *   HealthCheckRequest  { string service = 1; }
 *   HealthCheckResponse { ServingStatus status = 1; } // 0 UNKNOWN, 1 SERVING, 2 NOT_SERVING, 3 SERVICE_UNKNOWN
 */
import * as grpc from "@grpc/grpc-js";
import { errorMessage } from "../util/errors.ts";
import { goDuration, goStatusError } from "./gowords.ts";
import { joinHostPort, probeUserAgent, type ProbeOutcome } from "./types.ts";

export const HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check";
export const SERVING_STATUS = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"] as const;

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

function readVarint(buf: Uint8Array, pos: number): [number, number] {
  let value = 0;
  let shift = 0;
  for (;;) {
    const b = buf[pos++];
    if (b === undefined) throw new Error("truncated varint");
    value += (b & 0x7f) * 2 ** shift;
    if (!(b & 0x80)) return [value, pos];
    shift += 7;
    if (shift > 63) throw new Error("varint too long");
  }
}

/** Encodes a HealthCheckRequest. */
export function encodeHealthRequest(req: { service: string }): Buffer {
  const s = Buffer.from(req.service, "utf8");
  return s.length === 0 ? Buffer.alloc(0) : Buffer.from([0x0a, ...varint(s.length), ...s]);
}

/** Decodes a HealthCheckRequest (for test servers). */
export function decodeHealthRequest(buf: Uint8Array): { service: string } {
  let service = "";
  forEachField(buf, (field, wire, value) => {
    if (field === 1 && wire === 2 && value instanceof Uint8Array) service = Buffer.from(value).toString("utf8");
  });
  return { service };
}

/** Encodes a HealthCheckResponse (for test servers). */
export function encodeHealthResponse(res: { status: number }): Buffer {
  return res.status === 0 ? Buffer.alloc(0) : Buffer.from([0x08, ...varint(res.status)]);
}

export function decodeHealthResponse(buf: Uint8Array): { status: number } {
  let status = 0;
  forEachField(buf, (field, wire, value) => {
    if (field === 1 && wire === 0 && typeof value === "number") status = value;
  });
  return { status };
}

/** Walks protobuf fields, skipping the ones it does not know (as a decoder must). */
function forEachField(buf: Uint8Array, fn: (field: number, wire: number, value: number | Uint8Array) => void): void {
  let pos = 0;
  while (pos < buf.length) {
    let tag: number;
    [tag, pos] = readVarint(buf, pos);
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (wire === 0) {
      let v: number;
      [v, pos] = readVarint(buf, pos);
      fn(field, wire, v);
    } else if (wire === 2) {
      let len: number;
      [len, pos] = readVarint(buf, pos);
      fn(field, wire, buf.subarray(pos, pos + len));
      pos += len;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else throw new Error(`unsupported wire type ${wire}`);
  }
}

export async function grpcProbe(opts: { host: string; port: number; service: string; timeoutMs: number; signal?: AbortSignal }): Promise<ProbeOutcome> {
  const addr = joinHostPort(opts.host, opts.port);
  // Go's %v of the time.Duration (grpc.go:75,101): 1s, 1m0s.
  const timeout = Number.isInteger(opts.timeoutMs / 1000) ? goDuration(opts.timeoutMs / 1000) : `${opts.timeoutMs}ms`;
  const deadline = Date.now() + opts.timeoutMs;
  const client = new grpc.Client(addr, grpc.credentials.createInsecure(), {
    "grpc.primary_user_agent": probeUserAgent(),
    // One connection per probe, as upstream dials per probe; never shared with another target.
    "grpc.use_local_subchannel_pool": 1,
  });
  const onAbort = () => client.close();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const connectError = await new Promise<Error | undefined>((resolve) => client.waitForReady(deadline, (err) => resolve(err ?? undefined)));
    if (connectError) {
      if (Date.now() >= deadline) return { result: "failure", output: `timeout: failed to connect service ${JSON.stringify(addr)} within ${timeout}: context deadline exceeded` };
      return { result: "failure", output: `error: failed to connect service at ${JSON.stringify(addr)}: ${errorMessage(connectError)}` };
    }
    const answer = await new Promise<{ err: grpc.ServiceError | null; res?: { status: number } }>((resolve) =>
      client.makeUnaryRequest(
        HEALTH_CHECK_METHOD,
        encodeHealthRequest,
        (b: Buffer) => decodeHealthResponse(b),
        { service: opts.service },
        new grpc.Metadata(),
        { deadline },
        (err, res) => resolve({ err, res }),
      ),
    );
    if (answer.err) {
      const e = answer.err;
      if (e.code === grpc.status.UNIMPLEMENTED)
        return { result: "failure", output: `error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ${e.details}` };
      if (e.code === grpc.status.DEADLINE_EXCEEDED) return { result: "failure", output: `timeout: health rpc did not complete within ${timeout}` };
      // grpc.go:109 prints the grpc-go status error: `rpc error: code = NotFound desc = ...`.
      return { result: "failure", output: `error: health rpc probe failed: ${goStatusError(e.code, e.details)}` };
    }
    const status = answer.res?.status ?? 0;
    if (status !== 1) return { result: "failure", output: `service unhealthy (responded with ${JSON.stringify(SERVING_STATUS[status] ?? String(status))})` };
    return { result: "success", output: "service healthy" };
  } finally {
    opts.signal?.removeEventListener("abort", onAbort);
    client.close();
  }
}
