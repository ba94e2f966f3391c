/**
 * What a container carries for a kill without its pod's spec (an orphan: no
 * source wants its pod any more, for instance a static manifest removed while
 * no kubelet ran). Upstream writes the container's preStop handler and ports
 * as JSON annotations when it creates a container (labels.go), and restores
 * them for such a kill (restoreSpecsFromContainerLabels), so that the preStop
 * hook still runs, an httpGet on a named port included. This agent writes the
 * same annotations and reads those of either kubelet.
 */
import * as v from "valibot";
import { ContainerPort, type ContainerSpec } from "../pods/schema.ts";
import type { LifecycleHandler } from "./hooks.ts";
import { ContainerPortsAnnotation } from "./labels.ts";

export const ContainerPreStopHandlerAnnotation = "io.kubernetes.container.preStopHandler";

const Handler = v.looseObject({
  exec: v.optional(v.looseObject({ command: v.optional(v.array(v.string())) })),
  httpGet: v.optional(
    v.looseObject({
      scheme: v.optional(v.picklist(["HTTP", "HTTPS"])),
      host: v.optional(v.string()),
      port: v.union([v.number(), v.string()]),
      path: v.optional(v.string()),
      httpHeaders: v.optional(v.array(v.object({ name: v.string(), value: v.string() }))),
    }),
  ),
  sleep: v.optional(v.object({ seconds: v.number() })),
});

/** The annotations upstream writes for a container's preStop handler and ports (none when the spec has neither). */
export function orphanSpecAnnotations(container: ContainerSpec): Record<string, string> {
  const preStop = (container as { lifecycle?: { preStop?: unknown } }).lifecycle?.preStop;
  return {
    ...(preStop ? { [ContainerPreStopHandlerAnnotation]: JSON.stringify(preStop) } : {}),
    ...(container.ports?.length ? { [ContainerPortsAnnotation]: JSON.stringify(container.ports) } : {}),
  };
}

export type RestoredSpec = { ok: true; container: ContainerSpec & { lifecycle?: { preStop?: LifecycleHandler } } } | { ok: false; error: string };

function parseJson<T>(raw: string | undefined, schema: v.GenericSchema<unknown, T>, what: string): { ok: true; value: T | undefined } | { ok: false; error: string } {
  if (raw === undefined) return { ok: true, value: undefined };
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    return { ok: false, error: `${what}: ${(err as Error).message}` };
  }
  const r = v.safeParse(schema, json);
  return r.success ? { ok: true, value: r.output } : { ok: false, error: `${what}: ${r.issues.map((i) => i.message).join("; ")}` };
}

/**
 * The container's spec as far as its annotations restore it: its name, its
 * preStop handler and its ports. An annotation that does not parse is an
 * error naming it (the kill then goes on without the hook, as upstream's).
 */
export function restoreOrphanSpec(name: string, annotations: Record<string, string>): RestoredSpec {
  const preStop = parseJson(annotations[ContainerPreStopHandlerAnnotation], Handler, ContainerPreStopHandlerAnnotation);
  if (!preStop.ok) return preStop;
  const ports = parseJson(annotations[ContainerPortsAnnotation], v.array(ContainerPort), ContainerPortsAnnotation);
  if (!ports.ok) return ports;
  return {
    ok: true,
    container: {
      name,
      image: "",
      ...(ports.value ? { ports: ports.value } : {}),
      ...(preStop.value ? { lifecycle: { preStop: preStop.value as LifecycleHandler } } : {}),
    },
  };
}
