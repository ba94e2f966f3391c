/**
 * Container environment, after upstream makeEnvironmentVariables: service
 * variables (services/: the `kubernetes` service always, the namespace's
 * services unless enableServiceLinks is false) under everything else, then envFrom
 * (configMaps and secrets, with prefix; invalid names skipped with an
 * event), then env in order: `value`s with $(VAR) references expanded
 * against what is defined so far (upstream third_party/forked/golang/expansion),
 * fieldRef, resourceFieldRef (cgroups/downward-api.ts, shared with volume
 * files), configMapKeyRef and secretKeyRef. A missing
 * object or key that is not optional is an EnvError with upstream's
 * message; the pod reports it as CreateContainerConfigError.
 */
import { podMetadataField } from "../pods/fields.ts";
import type { PodObjects } from "../api/objects.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { ServiceEnv } from "../services/index.ts";
import { ResourceFieldRefError, resourceFieldRefValue, type DownwardApiAllocatable } from "../cgroups/downward-api.ts";
import { ConfigSourceAnnotation } from "../pods/source.ts";
import { expand } from "../pods/expansion.ts";

export class EnvError extends Error {
  override readonly name = "EnvError";
}

export interface FieldValues {
  podIP?: string;
  hostIP?: string;
}

function fieldRef(pod: Pod, path: string, values: FieldValues): string {
  const metadata = podMetadataField(pod, path);
  if (metadata !== undefined) return metadata;
  switch (path) {
    case "spec.nodeName":
      return pod.spec.nodeName ?? "";
    case "spec.serviceAccountName":
      return String((pod.spec as Record<string, unknown>).serviceAccountName ?? "");
    case "status.podIP":
      return values.podIP ?? "";
    case "status.podIPs":
      return values.podIP ?? "";
    case "status.hostIP":
    case "status.hostIPs":
      return values.hostIP ?? "";
  }
  throw new EnvError(`unsupported fieldRef.fieldPath "${path}"`);
}

/** A resourceFieldRef's value for this container; a bad reference fails the container's env. */
function resourceEnvValue(pod: Pod, container: ContainerSpec, ref: NonNullable<ValueFrom["resourceFieldRef"]>, node: DownwardApiAllocatable): string {
  try {
    return resourceFieldRefValue(pod, container, { ...ref, resource: ref.resource ?? "" }, node);
  } catch (err) {
    if (err instanceof ResourceFieldRefError) throw new EnvError(err.message);
    throw err;
  }
}

/** Upstream IsEnvVarName (validation.IsEnvVarName). */
const ENV_VAR_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
export const isEnvVarName = (name: string): boolean => ENV_VAR_NAME.test(name);

const decodeBase64 = (value: string): string => Buffer.from(value, "base64").toString("utf8");

export interface EnvContext {
  values: FieldValues;
  /** ConfigMaps and secrets of the pod's namespace. */
  objects: PodObjects;
  /** What resourceFieldRef limits default to when a container sets none (upstream: node allocatable). */
  allocatable: DownwardApiAllocatable;
  /** A warning for the pod (upstream event reason InvalidEnvironmentVariableNames). */
  warn?: (reason: string, message: string) => void;
  /** Service variables (cluster mode); none without it. Throws before the services are first listed. */
  services?: ServiceEnv;
}

type KeyRef = { name?: string; key?: string; optional?: boolean };
type SourceRef = { name?: string; optional?: boolean };
type EnvFromSource = { prefix?: string; configMapRef?: SourceRef; secretRef?: SourceRef };
type ValueFrom = {
  fieldRef?: { fieldPath?: string };
  resourceFieldRef?: { containerName?: string; resource?: string; divisor?: string | number };
  configMapKeyRef?: KeyRef;
  secretKeyRef?: KeyRef;
};

/** Reads each configMap and secret once per container, as upstream's per-call maps. */
class Objects {
  private readonly configMaps = new Map<string, Promise<Record<string, string> | undefined>>();
  private readonly secrets = new Map<string, Promise<Record<string, string> | undefined>>();
  constructor(
    private readonly objects: PodObjects,
    private readonly namespace: string,
  ) {}

  configMap(name: string): Promise<Record<string, string> | undefined> {
    let p = this.configMaps.get(name);
    if (!p) this.configMaps.set(name, (p = this.objects.configMap(this.namespace, name).then((c) => c && { ...c.data })));
    return p;
  }

  secret(name: string): Promise<Record<string, string> | undefined> {
    let p = this.secrets.get(name);
    if (!p) {
      const decoded = this.objects.secret(this.namespace, name).then((s) => s && Object.fromEntries(Object.entries(s.data).map(([k, v]) => [k, decodeBase64(v)])));
      this.secrets.set(name, (p = decoded));
    }
    return p;
  }
}

export async function containerEnv(pod: Pod, container: ContainerSpec, ctx: EnvContext): Promise<{ key: string; value: string }[]> {
  const namespace = pod.metadata.namespace ?? "default";
  const objects = new Objects(ctx.objects, namespace);
  const vars = new Map<string, string>();
  const enableServiceLinks = (pod.spec as { enableServiceLinks?: boolean | null }).enableServiceLinks !== false;
  let serviceVars: Map<string, string>;
  try {
    const source = pod.metadata.annotations?.[ConfigSourceAnnotation];
    serviceVars = ctx.services?.(namespace, enableServiceLinks, source !== undefined && source !== "api") ?? new Map<string, string>();
  } catch (err) {
    throw new EnvError(err instanceof Error ? err.message : String(err));
  }
  // $(VAR) sees the container's own variables first, then the services' (upstream MappingFuncFor(tmpEnv, serviceEnv)).
  const lookup = (name: string) => vars.get(name) ?? serviceVars.get(name);

  for (const from of (container.envFrom ?? []) as EnvFromSource[]) {
    const ref = from.configMapRef ?? from.secretRef;
    if (!ref) continue;
    const kind = from.configMapRef ? "configMap" : "secret";
    const name = ref.name ?? "";
    const data = kind === "configMap" ? await objects.configMap(name) : await objects.secret(name);
    if (!data) {
      if (ref.optional) continue;
      throw new EnvError(`${kind === "configMap" ? "configmap" : "secret"} "${name}" not found`);
    }
    const invalid: string[] = [];
    for (const [k, v] of Object.entries(data)) {
      const key = (from.prefix ?? "") + k;
      if (!isEnvVarName(key)) invalid.push(key);
      else vars.set(key, v);
    }
    if (invalid.length) {
      ctx.warn?.(
        "InvalidEnvironmentVariableNames",
        `Keys [${invalid.sort().join(", ")}] from the EnvFrom ${kind} ${namespace}/${name} were skipped since they are considered invalid environment variable names.`,
      );
    }
  }

  for (const e of container.env ?? []) {
    const from = e.valueFrom as ValueFrom | undefined;
    let value: string;
    if (e.value || !from) {
      value = expand(e.value ?? "", lookup);
    } else if (from.fieldRef) {
      if (!from.fieldRef.fieldPath) throw new EnvError(`env "${e.name}": fieldRef.fieldPath is required`);
      value = fieldRef(pod, from.fieldRef.fieldPath, ctx.values);
    } else if (from.resourceFieldRef) {
      value = resourceEnvValue(pod, container, from.resourceFieldRef, ctx.allocatable);
    } else if (from.configMapKeyRef || from.secretKeyRef) {
      const ref = (from.configMapKeyRef ?? from.secretKeyRef)!;
      const isConfigMap = !!from.configMapKeyRef;
      const name = ref.name ?? "";
      const data = isConfigMap ? await objects.configMap(name) : await objects.secret(name);
      if (!data) {
        if (ref.optional) continue;
        throw new EnvError(`${isConfigMap ? "configmap" : "secret"} "${name}" not found`);
      }
      const found = data[ref.key ?? ""];
      if (found === undefined) {
        if (ref.optional) continue;
        throw new EnvError(`couldn't find key ${ref.key} in ${isConfigMap ? "ConfigMap" : "Secret"} ${namespace}/${name}`);
      }
      value = found;
    } else {
      throw new EnvError(`env "${e.name}": unsupported valueFrom source`);
    }
    vars.set(e.name, value);
  }
  // Service variables first; the container's env and envFrom win on a shared name.
  const merged = new Map([...serviceVars].filter(([key]) => !vars.has(key)));
  for (const [key, value] of vars) merged.set(key, value);
  return [...merged].map(([key, value]) => ({ key, value }));
}
