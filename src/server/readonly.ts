/**
 * The read-only port (10255, off unless `readOnlyPort` is set): `/pods`
 * lists the pods this node runs as a v1 PodList, with their statuses (in
 * standalone mode it is how operators and scripts find pod IPs), `/spec/`
 * the machine, and the health checks.
 */
import { Hono } from "hono";
import type { LocalStatusStore } from "../status/index.ts";
import type { MachineSpecSource } from "../metrics/endpoints.ts";

export function readOnlyApp(opts: { statuses: LocalStatusStore; health: Hono; spec?: MachineSpecSource }): Hono {
  const app = new Hono();
  app.get("/pods", (c) =>
    c.json({
      kind: "PodList",
      apiVersion: "v1",
      metadata: {},
      items: opts.statuses.list().map(({ pod, status, apiStatus }) => ({ ...pod, apiVersion: "v1", kind: "Pod", status: apiStatus ?? status })),
    }),
  );
  const machine = opts.spec;
  // Upstream's read-only server has the default handlers, /spec/ among them.
  if (machine) for (const path of ["/spec", "/spec/"]) app.get(path, (c) => c.json(machine.spec()));
  app.route("/", opts.health);
  return app;
}
