/**
 * What configMap, secret, downwardAPI and projected volumes hold, as an
 * AtomicWriter payload: pure functions of the API objects and the pod, with
 * upstream's defaults (mode 0644) and messages (a missing key of a
 * non-optional source fails the volume).
 */
import type { ConfigMapData, SecretData } from "../api/objects.ts";
import { ResourceFieldRefError, resourceFieldRefValue, type DownwardApiAllocatable } from "../cgroups/downward-api.ts";
import { podMetadataField } from "../pods/fields.ts";
import type { Pod } from "../pods/schema.ts";
import type { DownwardAPIFileSpec, KeyToPathSpec } from "../pods/volume-schema.ts";
import type { Payload } from "./atomic-writer.ts";

export const DEFAULT_MODE = 0o644;

export class ProjectionError extends Error {
  override readonly name = "ProjectionError";
}

const utf8 = (s: string) => new TextEncoder().encode(s);
const base64 = (s: string) => new Uint8Array(Buffer.from(s, "base64"));

/** Every key of a configMap (data and binaryData) as bytes. */
export const configMapBytes = (cm: ConfigMapData): Map<string, Uint8Array> =>
  new Map([...Object.entries(cm.data).map(([k, s]) => [k, utf8(s)] as const), ...Object.entries(cm.binaryData).map(([k, s]) => [k, base64(s)] as const)]);

export const secretBytes = (s: SecretData): Map<string, Uint8Array> => new Map(Object.entries(s.data).map(([k, v]) => [k, base64(v)] as const));

/**
 * Keys to files: all keys under their own names without `items`, else just
 * the listed ones at their paths. `missingKey` words upstream's error.
 */
export function projectKeys(
  into: Payload,
  keys: Map<string, Uint8Array>,
  items: KeyToPathSpec[] | null | undefined,
  defaultMode: number,
  optional: boolean,
  missingKey: (key: string) => string,
): void {
  if (!items?.length) {
    for (const [key, content] of keys) into.set(key, { content, mode: defaultMode });
    return;
  }
  for (const item of items) {
    const content = keys.get(item.key);
    if (!content) {
      if (optional) continue;
      throw new ProjectionError(missingKey(item.key));
    }
    into.set(item.path, { content, mode: item.mode ?? defaultMode });
  }
}

export const configMapMissingKey = (key: string) => `configmap references non-existent config key: ${key}`;
export const secretMissingKey = (key: string) => `references non-existent secret key: ${key}`;

/** Go's %q for the common case (JSON escaping agrees with it for printable text). */
const quote = (s: string) => JSON.stringify(s);

/** fieldpath.FormatMap: `key="value"` lines in key order. */
export const formatMap = (m: Record<string, string> | undefined): string =>
  Object.keys(m ?? {})
    .sort()
    .map((k) => `${k}=${quote(m![k]!)}`)
    .join("\n");

function fieldValue(pod: Pod, path: string): string {
  if (path === "metadata.labels") return formatMap(pod.metadata.labels);
  if (path === "metadata.annotations") return formatMap(pod.metadata.annotations);
  const value = podMetadataField(pod, path);
  if (value === undefined) throw new ProjectionError(`unsupported fieldPath: ${path}`);
  return value;
}

function resourceValue(pod: Pod, ref: NonNullable<DownwardAPIFileSpec["resourceFieldRef"]>, node: DownwardApiAllocatable): string {
  try {
    return resourceFieldRefValue(pod, undefined, ref, node);
  } catch (err) {
    if (err instanceof ResourceFieldRefError) throw new ProjectionError(err.message);
    throw err;
  }
}

/** downwardAPI items: pod metadata and container resources, one file each. */
export function projectDownwardAPI(into: Payload, pod: Pod, items: DownwardAPIFileSpec[] | null | undefined, defaultMode: number, node: DownwardApiAllocatable): void {
  for (const item of items ?? []) {
    const value = item.fieldRef ? fieldValue(pod, item.fieldRef.fieldPath) : item.resourceFieldRef ? resourceValue(pod, item.resourceFieldRef, node) : undefined;
    if (value === undefined) throw new ProjectionError(`downwardAPI item ${JSON.stringify(item.path)}: one of fieldRef and resourceFieldRef is required`);
    into.set(item.path, { content: utf8(value), mode: item.mode ?? defaultMode });
  }
}
