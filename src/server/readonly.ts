/**
 * The read-only port (10255, off unless `readOnlyPort` is set), as
 * upstream's: no authentication, the routes that need none (`/pods`,
 * `/stats/summary`, `/metrics` and its siblings, the health checks; in
 * standalone mode `/pods` is how operators and scripts find pod IPs), and
 * upstream's "Debug endpoints are disabled." (405) where the kubelet API
 * would exec, attach, forward ports or show logs. `/spec/` too, the
 * machine as cAdvisor describes it, which this agent serves on 10250 as
 * well: an extra, upstream has served none since 1.21.
 */
import { Hono } from "hono";
import type { MachineSpecSource, MetricsEndpoints } from "../metrics/endpoints.ts";
import type { StatsProvider } from "../stats/types.ts";
import type { ReportedStatuses } from "../status/index.ts";
import type { Logger } from "../util/log.ts";
import { installDefaultRoutes } from "./default-routes.ts";
import { answerErrors } from "./errors.ts";

export interface ReadOnlyOptions {
  statuses: ReportedStatuses;
  health: Hono;
  stats?: StatsProvider;
  metrics?: MetricsEndpoints;
  spec?: MachineSpecSource;
  logger?: Logger;
}

/** Upstream InstallDebuggingDisabledHandlers: these paths (and all below them) answer 405 on a server without debugging handlers. */
export const DEBUGGING_DISABLED_PATHS = ["/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/", "/runningpods/", "/debug/pprof/", "/logs/"] as const;

export function readOnlyApp(opts: ReadOnlyOptions): Hono {
  const app = new Hono();
  answerErrors(app, { logger: opts.logger, failure: "read-only port request failed" });
  installDefaultRoutes(app, { pods: opts.statuses, health: opts.health, stats: opts.stats, metrics: opts.metrics });
  const machine = opts.spec;
  if (machine) for (const path of ["/spec", "/spec/"]) app.get(path, (c) => c.json(machine.spec()));
  for (const path of DEBUGGING_DISABLED_PATHS) app.all(`${path}*`, (c) => c.text("Debug endpoints are disabled.\n", 405));
  return app;
}
