/**
 * The authenticated kubelet API (10250), after upstream's
 * pkg/kubelet/server/server.go: authentication, then authorization, then
 * `/pods`, `/runningpods/`, `/stats/summary`, `/healthz*` and
 * `/containerLogs/{namespace}/{pod}/{container}`, `/configz`, `/run/...` (ExecSync) and,
 * for exec/attach/portForward requests that are not upgrades, 400 (the
 * streams themselves take serveTls's upgrade path). Serve it with serveTls
 * (tls.ts) so that client certificates reach authentication.
 *
 * Errors are mapped in one place (`answerErrors`, errors.ts): unknown pod or container
 * 404, a bad query value 400 naming the parameter, anything else 500.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { realClock, type Clock } from "../util/clock.ts";
import { handlerTimeout, HANDLER_TIMEOUT_MS, MAX_BODY_BYTES } from "./limits.ts";
import type { ReportedStatuses } from "../status/index.ts";
import type { StatsProvider } from "../stats/types.ts";
import type { Logger } from "../util/log.ts";
import type { MachineSpecSource, MetricsEndpoints } from "../metrics/endpoints.ts";
import type { KubeletEnv } from "./authn.ts";
import { answerErrors, HttpError } from "./errors.ts";
export { HttpError } from "./errors.ts";
import { parseStreamingPath, type StreamingResolver } from "./streaming.ts";
import { BadLogQuery, logStream, parseLogQuery, type ContainerLogs } from "./logs.ts";
import { debugApp, debugFlagsApp, type Profiler, type VerbositySetter } from "./debug.ts";
import { nodeLogsApp, type NodeLogQueryOptions } from "./node-logs.ts";
import { installDefaultRoutes } from "./default-routes.ts";

export interface KubeletApiOptions {
  nodeName: string;
  /** Pods with their statuses (LocalStatusStore). */
  pods: ReportedStatuses;
  /** `/stats/*` answers 503 without it. */
  stats?: StatsProvider;
  logs: ContainerLogs;
  /** exec/attach/portForward/run targets; those paths answer 503 without it. Streams themselves arrive on the upgrade path (stream-proxy.ts). */
  streaming?: StreamingResolver;
  /** The body of `/configz` (configzBody); 404 without it. */
  configz?: () => unknown;
  /** The body of `/spec/` (cAdvisor MachineInfo, node/machine-spec.ts); 404 without it. */
  spec?: MachineSpecSource;
  /** `/debug/heap` and `/debug/profile` (debug.ts); 404 without it. */
  profiler?: Profiler;
  /** PUT `/debug/flags/v` sets it (debug.ts debugFlagsApp); "disabled": 405 there; 404 without it. */
  debugFlags?: VerbositySetter | "disabled";
  /** `/logs/`: the node's log directory (node-logs.ts); 404 without it. */
  nodeLogDir?: string;
  /** NodeLogQuery on `/logs/` (enableSystemLogQuery + the NodeLogQuery gate); file serving only without it. */
  nodeLogQuery?: NodeLogQueryOptions;
  /** healthzApp(...): served under `/healthz`. */
  health: Hono;
  /** authentication(...) from authn.ts */
  authn: MiddlewareHandler<KubeletEnv>;
  /** authorization(...) from authz.ts */
  authz: MiddlewareHandler<KubeletEnv>;
  /** `/metrics`, `/metrics/resource`, `/metrics/probes`, `/metrics/cadvisor` (Prometheus text); 404 without it. */
  metrics?: MetricsEndpoints;
  now?: () => number;
  /** For the handler timeout. */
  clock?: Clock;
  /** Default HANDLER_TIMEOUT_MS. */
  handlerTimeoutMs?: number;
  logger?: Logger;
}

export function kubeletApi(opts: KubeletApiOptions): Hono<KubeletEnv> {
  const now = opts.now ?? Date.now;
  const log = opts.logger?.with({ component: "kubeletApi" });
  const app = new Hono<KubeletEnv>();
  // The timeout first, so that a stuck TokenReview or SubjectAccessReview is cut too.
  app.use(handlerTimeout({ ms: opts.handlerTimeoutMs ?? HANDLER_TIMEOUT_MS, clock: opts.clock ?? realClock }));
  app.use(opts.authn);
  app.use(opts.authz);
  app.use(bodyLimit({ maxSize: MAX_BODY_BYTES, onError: (c) => c.text(`request body larger than ${MAX_BODY_BYTES} bytes`, 413) }));

  answerErrors(app, { logger: log, failure: "kubelet API request failed", isBadRequest: (err) => err instanceof BadLogQuery });

  installDefaultRoutes(app, opts);

  // Pods with running containers as the runtime sees them: identity and the running containers only (upstream's GetRunningPods).
  app.get("/runningpods/", (c) => {
    const items = opts.pods
      .list()
      .map(({ pod, status }) => {
        const running = status.containerStatuses.filter((s) => "running" in s.state);
        if (!running.length) return undefined;
        return {
          metadata: { name: pod.metadata.name, namespace: pod.metadata.namespace, uid: pod.metadata.uid, creationTimestamp: null },
          spec: { containers: running.map((s) => ({ name: s.name, image: s.image, resources: {} })) },
          status: {},
        };
      })
      .filter((p) => p !== undefined);
    return c.json({ kind: "PodList", apiVersion: "v1", metadata: {}, items });
  });

  if (opts.configz) {
    const configz = opts.configz;
    app.get("/configz", (c) => c.json(configz()));
  }

  if (opts.spec) {
    const machine = opts.spec;
    for (const path of ["/spec", "/spec/"]) app.get(path, (c) => c.json(machine.spec()));
  }

  if (opts.profiler) app.route("/", debugApp(opts.profiler));
  if (opts.debugFlags) app.route("/", debugFlagsApp(opts.debugFlags));
  if (opts.nodeLogDir) app.route("/", nodeLogsApp(opts.nodeLogDir, opts.nodeLogQuery));

  app.get("/containerLogs/:namespace/:pod/:container", async (c) => {
    const { namespace, pod: podName, container } = c.req.param();
    const options = parseLogQuery(c.req.query(), now());
    const entry = opts.pods.list().find(({ pod }) => pod.metadata.name === podName && (pod.metadata.namespace ?? "default") === namespace);
    if (!entry) throw new HttpError(404, `pod "${podName}" does not exist`);
    const spec = entry.pod.spec as { containers: { name: string }[]; initContainers?: { name: string }[]; ephemeralContainers?: { name: string }[] };
    const names = [...spec.containers, ...(spec.initContainers ?? []), ...(spec.ephemeralContainers ?? [])].map((x) => x.name);
    if (!names.includes(container)) throw new HttpError(404, `container "${container}" not found in pod "${podName}"`);
    const resolved = await opts.logs(namespace, podName, container, options.previous);
    if (!resolved) {
      throw new HttpError(
        400,
        options.previous ? `previous terminated container "${container}" in pod "${podName}" not found` : `container "${container}" in pod "${podName}" is waiting to start`,
      );
    }
    const stillRunning = async () => (await opts.logs(namespace, podName, container, options.previous))?.running ?? false;
    const follow = options.follow && resolved.running && !options.previous;
    const body = logStream(resolved.paths, { ...options, follow, stillRunning, signal: c.req.raw.signal });
    return c.body(body, 200, { "content-type": "text/plain; charset=utf-8" });
  });

  // Upstream getRun: POST only, the command in `cmd` split at spaces (legacy), answers stdout then stderr.
  app.post("/run/*", async (c) => {
    const target = parseStreamingPath(c.req.path);
    if (target?.kind !== "run") return c.text("404 page not found", 404);
    if (!opts.streaming) throw new HttpError(503, "running commands is not available");
    const cmd = (c.req.query("cmd") ?? "").split(" ");
    const out = await opts.streaming.run(target, cmd);
    return c.body(out as Uint8Array<ArrayBuffer>, 200, { "content-type": "application/json" });
  });

  // Streams arrive as upgrades (stream-proxy.ts); a plain request cannot carry one (upstream's UpgradeAwareHandler with upgradeRequired).
  for (const prefix of ["/exec/*", "/attach/*", "/portForward/*"]) {
    app.on(["GET", "POST"], prefix, (c) => {
      if (!parseStreamingPath(c.req.path)) return c.text("404 page not found", 404);
      return c.text("Upgrade request required", 400);
    });
  }

  return app;
}
