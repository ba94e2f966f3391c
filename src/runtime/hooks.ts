/**
 * Container lifecycle hooks (upstream pkg/kubelet/lifecycle): postStart
 * runs right after the container starts, before it is reported running,
 * with no time limit (upstream's RunInContainer(..., 0)); a failure kills
 * the container; the pod having to stop abandons it (upstream cancels the
 * sync's context; its httpGet request alone does not carry that context, so
 * a hanging one would hold the pod's kill up: here every handler is
 * abandoned alike). preStop runs before the stop signal, within the grace
 * period, and what it takes comes off the grace period.
 * Handlers: exec (through the CRI), httpGet (as the probes send it, but
 * any answer is success and an HTTPS hook answered in HTTP is retried in
 * HTTP, as upstream's runHTTPHandler), sleep.
 */
import type { CriService } from "../cri/index.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { httpExchange, type HttpProbeOptions } from "../prober/http.ts";
import { resolvePort } from "../prober/probes.ts";
import { joinHostPort } from "../prober/types.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";

export interface LifecycleHandler {
  exec?: { command?: string[] };
  httpGet?: { scheme?: "HTTP" | "HTTPS"; host?: string; port: number | string; path?: string; httpHeaders?: { name: string; value: string }[] };
  sleep?: { seconds: number };
}

export const hookOf = (container: ContainerSpec, kind: "postStart" | "preStop"): LifecycleHandler | undefined =>
  (container as { lifecycle?: Record<string, LifecycleHandler | undefined> }).lifecycle?.[kind];

export interface HookContext {
  cri: Pick<CriService, "execSync">;
  clock: Clock;
  pod: Pod;
  container: ContainerSpec;
  containerId: string;
  /**
   * The pod's IP as the runtime reports it (its ready sandbox's), which an httpGet handler without a host
   * calls, as upstream's runHTTPHandler reads it; none for a host-network pod, whose IP containerd leaves empty.
   */
  podIP: string;
  /** How long the handler may take; none for no limit (postStart). */
  timeoutSeconds: number | undefined;
  /** Aborted when the hook is no longer waited on (the pod must stop); the handler then fails with the abort's reason. */
  signal?: AbortSignal;
  /** A Warning event on the pod (an HTTPS hook that only succeeded in HTTP: LifecycleHTTPFallback). */
  warn?: (reason: string, message: string) => void;
}

/** Go's "http: server gave HTTP response to HTTPS client", as the TLS client here sees it. */
const HTTP_ANSWER_TO_HTTPS = "ERR_SSL_WRONG_VERSION_NUMBER";

/** Runs one handler; resolves to undefined on success, or upstream's failure message. */
export async function runHook(handler: LifecycleHandler, ctx: HookContext): Promise<string | undefined> {
  const where = `for Container "${ctx.container.name}" in Pod "${ctx.pod.metadata.name}_${ctx.pod.metadata.namespace}(${ctx.pod.metadata.uid})"`;
  try {
    if (handler.exec) {
      const command = handler.exec.command ?? [];
      const r = await ctx.cri.execSync(ctx.containerId, command, ctx.timeoutSeconds ?? 0, ctx.signal);
      if (r.exitCode === 0) return undefined;
      // Upstream's words: the CRI client's CodeExitError (with stderr), then the output (stdout and stderr) as Go's %q.
      const stdout = new TextDecoder().decode(r.stdout);
      const stderr = new TextDecoder().decode(r.stderr);
      return `Exec lifecycle hook ([${command.join(" ")}]) ${where} failed - error: command '${command.join(" ")}' exited with ${r.exitCode}: ${stderr}, message: ${JSON.stringify(stdout + stderr)}`;
    }
    if (handler.httpGet) {
      const h = handler.httpGet;
      // Upstream handlers.go:151-159: without a host and without a pod IP from the runtime (a host-network pod)
      // the hook fails. Go prints the runtime's PodStatus with %v; its ID, name, namespace and IPs are given
      // here, not the status pointers and read time that follow them there (addresses, which say nothing).
      if (!h.host && !ctx.podIP) {
        const { uid, name, namespace } = ctx.pod.metadata;
        return `HTTP lifecycle hook (${h.path ?? "/"}) ${where} failed - error: failed to find networking container: &{${uid} ${name} ${namespace} []}`;
      }
      const request: HttpProbeOptions = {
        scheme: h.scheme ?? "HTTP",
        host: h.host || ctx.podIP,
        port: resolvePort(h.port, ctx.container),
        path: h.path ?? "/",
        headers: h.httpHeaders ?? [],
        userAgentFragment: "lifecycle",
        ...(ctx.timeoutSeconds === undefined ? {} : { timeoutMs: ctx.timeoutSeconds * 1000 }),
        ...(ctx.signal ? { signal: ctx.signal } : {}),
      };
      // Upstream (handlers.go runHTTPHandler): any answer is success, whatever its status; only the exchange can fail.
      let exchange = await httpExchange(request);
      if (exchange.kind === "error" && request.scheme === "HTTPS" && exchange.code === HTTP_ANSWER_TO_HTTPS) {
        const plain = await httpExchange({ ...request, scheme: "HTTP", headers: request.headers.filter((x) => x.name.toLowerCase() !== "authorization") });
        if (plain.kind === "answer") {
          const hostPort = joinHostPort(request.host, request.port);
          ctx.warn?.("LifecycleHTTPFallback", `request to HTTPS lifecycle hook ${hostPort} got HTTP response, retry with HTTP succeeded`);
          exchange = plain;
        }
      }
      return exchange.kind === "answer" ? undefined : `HTTP lifecycle hook (${h.path ?? "/"}) ${where} failed - error: ${exchange.output}`;
    }
    if (handler.sleep) {
      const seconds = ctx.timeoutSeconds === undefined ? handler.sleep.seconds : Math.min(handler.sleep.seconds, ctx.timeoutSeconds);
      await ctx.clock.sleep(seconds * 1000, ctx.signal);
      return undefined;
    }
    return `lifecycle hook ${where} has no handler`;
  } catch (err) {
    // Abandoned: the abort says why, not the runtime's answer to the cancelled call.
    return `lifecycle hook ${where} failed - error: ${errorMessage(ctx.signal?.aborted ? ctx.signal.reason : err)}`;
  }
}

/** Upstream keeps at least this much of the grace period for the stop itself after a preStop hook. */
export const MINIMUM_GRACE_AFTER_PRESTOP_SECONDS = 2;
