/**
 * The four probe kinds (upstream pkg/probe/{exec,http,tcp,grpc} and the
 * dispatch in pkg/kubelet/prober/prober.go). Each resolves, never rejects,
 * to a ProbeOutcome:
 * - success: the container answered well (exit 0, HTTP 200-399, connect, SERVING);
 * - failure: it answered badly or not within timeoutSeconds; counts toward failureThreshold;
 * - unknown: the probe could not be run (no pod IP, unknown named port, CRI error);
 *   upstream's "probe errored": retried, then thrown away, never counted;
 * - a failure marked `errored` (an HTTP body whose read failed) is an error too.
 * Network timeouts are real time (they bound real I/O), counted while the
 * agent's event loop is awake (deadline.ts); the workers' schedule is what
 * the injected clock drives.
 */
import { connect } from "node:net";
import { isCriError, type CriService } from "../cri/index.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { errorMessage } from "../util/errors.ts";
import { awakeDeadline } from "./deadline.ts";
import { goDuration, goNetError, goStatusError } from "./gowords.ts";
import { grpcProbe } from "./grpc.ts";
import { httpProbe } from "./http.ts";
import type { ProbeSpec } from "./schema.ts";

import { joinHostPort, MAX_PROBE_OUTPUT, type ProbeOutcome } from "./types.ts";
import { expandCommand } from "../pods/expansion.ts";

export { grpcProbe } from "./grpc.ts";
export { httpProbe, type HttpProbeOptions } from "./http.ts";
export { MAX_PROBE_OUTPUT, probeUserAgent, type ProbeOutcome, type ProbeResult } from "./types.ts";

/**
 * Resolves an IntOrString probe port against the container's ports, with
 * upstream probe.ResolveContainerPort's (pkg/probe/util.go) fallback and
 * words: a name no port has is tried as a number (`"8080"`), else
 * `strconv.Atoi: parsing "web": invalid syntax`; a number outside 1-65535 is
 * `invalid port number: N`. Throws those as ProbePortError.
 */
export function resolvePort(port: number | string, container: Pick<ContainerSpec, "ports">): number {
  let n: number;
  if (typeof port === "number") n = port;
  else {
    const found = (container.ports ?? []).find((p) => p.name === port);
    if (found) n = found.containerPort;
    else if (/^[+-]?\d+$/.test(port)) n = Number(port);
    else throw new ProbePortError(`strconv.Atoi: parsing ${JSON.stringify(port)}: invalid syntax`);
  }
  if (n > 0 && n < 65536) return n;
  throw new ProbePortError(`invalid port number: ${n}`);
}

/** A probe's port resolves to no port: the probe errors (is retried and thrown away), as upstream. */
export class ProbePortError extends Error {
  override readonly name = "ProbePortError";
}

/**
 * Runs `cmd` in the container through CRI ExecSync; exit code 0 is success.
 * As upstream's exec prober (pkg/probe/exec/exec.go:52-85) and cri-client
 * (remote_runtime.go:514-543): the output is stdout then stderr, at most
 * 10 KiB of bytes; a timeout is a failure whose output is the client's error;
 * any other CRI error is an error (unknown) with the gRPC status's text.
 */
export async function execProbe(opts: { cri: Pick<CriService, "execSync">; containerId: string; command: string[]; timeoutSeconds: number }): Promise<ProbeOutcome> {
  try {
    const r = await opts.cri.execSync(opts.containerId, opts.command, opts.timeoutSeconds);
    const output = Buffer.concat([r.stdout, r.stderr]).subarray(0, MAX_PROBE_OUTPUT).toString("utf8");
    return { result: r.exitCode === 0 ? "success" : "failure", output };
  } catch (err) {
    if (isCriError(err) && err.kind === "DeadlineExceeded") {
      return { result: "failure", output: `command timed out: ${JSON.stringify(opts.command.join(" "))} timed out after ${goDuration(opts.timeoutSeconds)}` };
    }
    return { result: "unknown", output: isCriError(err) ? goStatusError(err.code, err.detail) : errorMessage(err) };
  }
}

/** Opens a TCP connection and closes it at once; refused, unreachable or slower than the timeout is failure. */
export function tcpProbe(opts: { host: string; port: number; timeoutMs: number; signal?: AbortSignal }): Promise<ProbeOutcome> {
  const addr = joinHostPort(opts.host, opts.port);
  return new Promise((resolve) => {
    let done = false;
    const socket = connect({ host: opts.host, port: opts.port });
    const finish = (o: ProbeOutcome) => {
      if (done) return;
      done = true;
      cancelTimeout();
      opts.signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      resolve(o);
    };
    const onAbort = () => finish({ result: "unknown", output: "probe canceled" });
    const cancelTimeout = awakeDeadline(opts.timeoutMs, () => finish({ result: "failure", output: `dial tcp ${addr}: i/o timeout` }));
    socket.once("connect", () => finish({ result: "success", output: "" }));
    socket.once("error", (err) => finish({ result: "failure", output: goNetError(err, addr) ?? `dial tcp ${addr}: ${errorMessage(err)}` }));
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** What one probe run needs to know about its container. */
export interface ProbeTarget {
  pod: Pod;
  container: ContainerSpec;
  containerId: string;
  podIP: string;
}

/** Runs `spec` once against `target` (upstream prober.runProbe). */
export async function runProbe(spec: ProbeSpec, target: ProbeTarget, deps: { cri: Pick<CriService, "execSync">; signal?: AbortSignal }): Promise<ProbeOutcome> {
  const timeoutMs = spec.timeoutSeconds * 1000;
  try {
    if (spec.exec) {
      // Upstream expands $(VAR) in probe commands from the container's literal env only.
      const env = (target.container.env ?? []).flatMap((e) => (e.value !== undefined && !e.valueFrom ? [{ key: e.name, value: e.value }] : []));
      const command = expandCommand(spec.exec.command, env);
      return await execProbe({ cri: deps.cri, containerId: target.containerId, command, timeoutSeconds: spec.timeoutSeconds });
    }
    if (spec.httpGet) {
      const g = spec.httpGet;
      const host = g.host || target.podIP;
      if (!host) return { result: "unknown", output: "pod has no IP yet" };
      return await httpProbe({
        scheme: g.scheme,
        host,
        port: resolvePort(g.port, target.container),
        path: g.path ?? "/",
        headers: g.httpHeaders ?? [],
        timeoutMs,
        signal: deps.signal,
      });
    }
    if (spec.tcpSocket) {
      const host = spec.tcpSocket.host || target.podIP;
      if (!host) return { result: "unknown", output: "pod has no IP yet" };
      return await tcpProbe({ host, port: resolvePort(spec.tcpSocket.port, target.container), timeoutMs, signal: deps.signal });
    }
    if (spec.grpc) {
      if (!target.podIP) return { result: "unknown", output: "pod has no IP yet" };
      return await grpcProbe({ host: target.podIP, port: spec.grpc.port, service: spec.grpc.service ?? "", timeoutMs, signal: deps.signal });
    }
    return { result: "unknown", output: "missing probe handler" };
  } catch (err) {
    return { result: "unknown", output: errorMessage(err) };
  }
}
