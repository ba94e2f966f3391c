/**
 * "Did the container spec change?" is decided from this explicit list of
 * fields only. Fields that can change without a restart (resources, probes,
 * lifecycle hooks, pull policy) and fields later agent versions may default
 * differently are left out, so upgrading or restarting the agent never
 * restarts a healthy container. Empty values are dropped before hashing so
 * that `args: []` and a missing `args` hash the same.
 */
import { createHash } from "node:crypto";
import type { ContainerSpec } from "../pods/schema.ts";
import { canonicalJson } from "../util/canonical-json.ts";

export const RESTART_FIELDS = [
  "name",
  "image",
  "command",
  "args",
  "workingDir",
  "ports",
  "env",
  "envFrom",
  "volumeMounts",
  "securityContext",
  "stdin",
  "stdinOnce",
  "tty",
] as const satisfies readonly (keyof ContainerSpec)[];

function dropEmpty(value: unknown): unknown {
  if (Array.isArray(value)) {
    const items = value.map(dropEmpty);
    return items.length ? items : undefined;
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value)
      .map(([k, v]) => [k, dropEmpty(v)] as const)
      .filter(([, v]) => v !== undefined);
    return entries.length ? Object.fromEntries(entries) : undefined;
  }
  if (value === "" || value === false || value === null) return undefined;
  return value;
}

export function containerHash(container: ContainerSpec): string {
  const picked = Object.fromEntries(RESTART_FIELDS.map((f) => [f, dropEmpty(container[f])]));
  return createHash("sha256").update(canonicalJson(picked)).digest("hex").slice(0, 16);
}
