/**
 * Service environment variables, after upstream pkg/kubelet/envvars
 * (FromServices, makeLinkVariables) and the kubelet's getServiceEnvVarMap:
 * the `kubernetes` service of the master namespace (`default`) always, and
 * the services of the pod's own namespace when enableServiceLinks is not
 * false; services without a cluster IP (headless, or none yet) give none.
 */
import * as v from "valibot";

export const ServicePort = v.looseObject({
  name: v.optional(v.string()),
  protocol: v.optional(v.string()),
  port: v.pipe(v.number(), v.integer()),
});

export const Service = v.looseObject({
  metadata: v.looseObject({ name: v.string(), namespace: v.string(), resourceVersion: v.optional(v.string()) }),
  spec: v.optional(v.looseObject({ clusterIP: v.optional(v.string()), ports: v.optional(v.array(ServicePort)) }), {}),
});

export type Service = v.InferOutput<typeof Service>;

/** Upstream's masterServiceNamespace (metav1.NamespaceDefault) and its masterServices set. */
export const MASTER_SERVICE_NAMESPACE = "default";
const MASTER_SERVICES = new Set(["kubernetes"]);

/** Upstream v1helper.IsServiceIPSet: a cluster IP that is neither empty nor "None". */
export const isServiceIPSet = (s: Service): boolean => !!s.spec.clusterIP && s.spec.clusterIP !== "None";

/** Upstream makeEnvVariableName: upper case, dashes to underscores. */
const envName = (name: string): string => name.replaceAll("-", "_").toUpperCase();

/** Go's net.JoinHostPort: IPv6 addresses in brackets. */
const joinHostPort = (host: string, port: number): string => (host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);

/** Upstream envvars.FromServices for the given services, in order. */
export function fromServices(services: readonly Service[]): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  for (const s of services) {
    const ports = s.spec.ports ?? [];
    const ip = s.spec.clusterIP ?? "";
    // Validation requires a port for a service with a cluster IP; one without would make upstream panic.
    if (!isServiceIPSet(s) || !ports.length) continue;
    const prefix = envName(s.metadata.name);
    out.push({ name: `${prefix}_SERVICE_HOST`, value: ip });
    out.push({ name: `${prefix}_SERVICE_PORT`, value: String(ports[0]!.port) });
    for (const p of ports) if (p.name) out.push({ name: `${prefix}_SERVICE_PORT_${envName(p.name)}`, value: String(p.port) });
    // Docker link variables; the first port also gets the bare <NAME>_PORT.
    ports.forEach((p, i) => {
      const protocol = (p.protocol || "TCP").toLowerCase();
      const url = `${protocol}://${joinHostPort(ip, p.port)}`;
      if (i === 0) out.push({ name: `${prefix}_PORT`, value: url });
      const portPrefix = `${prefix}_PORT_${p.port}_${protocol.toUpperCase()}`;
      out.push({ name: portPrefix, value: url });
      out.push({ name: `${portPrefix}_PROTO`, value: protocol });
      out.push({ name: `${portPrefix}_PORT`, value: String(p.port) });
      out.push({ name: `${portPrefix}_ADDR`, value: ip });
    });
  }
  return out;
}

/**
 * Upstream getServiceEnvVarMap: the master services from `default` even when
 * enableServiceLinks is false, and the pod namespace's services when it is
 * not. Sorted by service name so that the result does not depend on the
 * order the watch delivered them in.
 */
export function serviceEnvVars(services: readonly Service[], namespace: string, enableServiceLinks: boolean): Map<string, string> {
  const chosen = new Map<string, Service>();
  for (const s of services) {
    if (!isServiceIPSet(s)) continue;
    const name = s.metadata.name;
    if (s.metadata.namespace === MASTER_SERVICE_NAMESPACE && MASTER_SERVICES.has(name)) {
      if (!chosen.has(name)) chosen.set(name, s);
    } else if (s.metadata.namespace === namespace && enableServiceLinks) {
      chosen.set(name, s);
    }
  }
  const ordered = [...chosen.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, s]) => s);
  return new Map(fromServices(ordered).map((e) => [e.name, e.value]));
}
