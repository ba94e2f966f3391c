/**
 * The read-only port (10255, off unless `readOnlyPort` is set): `/pods`
 * lists the pods this node runs as a v1 PodList, with their statuses; in
 * standalone mode it is how operators and scripts find pod IPs.
 */
import { Hono } from "hono";
import type { LocalStatusStore } from "../status/index.ts";

export function readOnlyApp(opts: { statuses: LocalStatusStore; health: Hono }): Hono {
  const app = new Hono();
  app.get("/pods", (c) =>
    c.json({
      kind: "PodList",
      apiVersion: "v1",
      metadata: {},
      items: opts.statuses.list().map(({ pod, status }) => ({ ...pod, apiVersion: "v1", kind: "Pod", status })),
    }),
  );
  app.route("/", opts.health);
  return app;
}
