/**
 * `/configz`, as upstream's component-base configz handler serves it on the
 * kubelet: `{"kubeletconfig": {...}}` with the effective
 * KubeletConfiguration in its file form (camelCase fields, durations as Go
 * duration strings such as "1m0s"). The agent keeps durations in
 * milliseconds; the config file schema says which fields are durations
 * (fields.ts marks them), so the conversion follows the schema instead of a
 * hand-kept list.
 */
import * as v from "valibot";
import { formatDuration, KubeletConfigurationFileSchema, type KubeletConfiguration } from "../config/index.ts";

type AnySchema = v.GenericSchema & {
  type: string;
  wrapped?: AnySchema;
  entries?: Record<string, AnySchema>;
  value?: AnySchema;
  item?: AnySchema;
  options?: AnySchema[];
};

const isDuration = (s: AnySchema) => (v.getMetadata(s as never) as { goType?: string } | undefined)?.goType === "duration";

/** `value` with every duration the schema declares rendered as a Go duration string. */
export function toGoForm(schema: AnySchema, value: unknown): unknown {
  if (value === undefined || value === null) return value;
  let s = schema;
  while (s.wrapped) s = s.wrapped; // optional, nullable, ...
  if (isDuration(s) || (s.options?.some(isDuration) ?? false)) return typeof value === "number" ? formatDuration(value) : value;
  if (s.entries && typeof value === "object" && !Array.isArray(value)) {
    return Object.fromEntries(Object.entries(value).map(([k, x]) => [k, s.entries![k] ? toGoForm(s.entries![k]!, x) : x]));
  }
  if (s.type === "record" && s.value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, x]) => [k, toGoForm(s.value!, x)]));
  }
  if (s.item && Array.isArray(value)) return value.map((x) => toGoForm(s.item!, x));
  return value;
}

/** The body of GET /configz: no apiVersion/kind, as upstream converts into a bare versioned struct. */
export function configzBody(config: KubeletConfiguration): { kubeletconfig: Record<string, unknown> } {
  const { apiVersion: _apiVersion, kind: _kind, ...rest } = config as KubeletConfiguration & { apiVersion?: string; kind?: string };
  return { kubeletconfig: toGoForm(KubeletConfigurationFileSchema as unknown as AnySchema, rest) as Record<string, unknown> };
}
