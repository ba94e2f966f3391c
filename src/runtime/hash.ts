/**
 * "Did the container spec change?" is decided from an explicit list of
 * fields, the same as upstream's (1.31 and later hash only a container's
 * name and image: for an API pod only the image can change, and any change
 * of a static pod's manifest gives it a new UID).
 *
 * The hash written to `io.kubernetes.container.hash` is upstream's own
 * value, so that the upstream kubelet and this agent each recognise the
 * other's containers as unchanged and a node can switch kubelets with no
 * restart. Containers this agent created before it wrote upstream's hash
 * carry the older one (LEGACY_RESTART_FIELDS), which is still recognised:
 * upgrading the agent restarts nothing.
 */
import { createHash } from "node:crypto";
import type { ContainerSpec } from "../pods/schema.ts";
import { canonicalJson } from "../util/canonical-json.ts";
import { fnv32a } from "../util/fnv.ts";

/** The fields whose change restarts a running container (upstream pickFieldsToHash). */
export const RESTART_FIELDS = ["image", "name"] as const satisfies readonly (keyof ContainerSpec)[];

/**
 * Upstream's container hash: FNV-32a over its deep-hash printing of the
 * JSON `{"image":…,"name":…}` (a Go byte slice printed as
 * `([]uint8)[b0 b1 …]` in decimal), written in lower-case hex without
 * leading zeros.
 */
export function containerHash(container: Pick<ContainerSpec, "name" | "image">): string {
  const json = `{"image":${goJsonString(container.image ?? "")},"name":${goJsonString(container.name)}}`;
  const printed = `([]uint8)[${[...new TextEncoder().encode(json)].join(" ")}]`;
  return fnv32a(printed).toString(16);
}

/** What differs between `spec` and a running container (a field, or the hash), or undefined when it runs the spec as it is. */
export function specChange(spec: ContainerSpec, running: { hash: string; image: string }): string | undefined {
  if (running.hash === containerHash(spec) || running.hash === legacyContainerHash(spec)) return undefined;
  // Only the hash is kept with the container, so the field is named when the runtime shows it differs.
  if (running.image && running.image !== spec.image) return `image ${JSON.stringify(running.image)} → ${JSON.stringify(spec.image)}`;
  return `hash ${running.hash || "(none)"} → ${containerHash(spec)}: image or name`;
}

/** A string as Go's encoding/json writes it (HTML-safe escapes, as json.Marshal does). */
function goJsonString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (code < 0x20 || ch === "<" || ch === ">" || ch === "&" || code === 0x2028 || code === 0x2029) out += `\\u${code.toString(16).padStart(4, "0")}`;
    else if (code >= 0xd800 && code <= 0xdfff)
      out += "\\ufffd"; // a lone surrogate is invalid UTF-8 to Go
    else out += ch;
  }
  return `${out}"`;
}

/** What this agent wrote before it wrote upstream's hash: recognised so that its own upgrade restarts nothing. */
const LEGACY_RESTART_FIELDS = [
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

export function legacyContainerHash(container: ContainerSpec): string {
  const picked = Object.fromEntries(LEGACY_RESTART_FIELDS.map((f) => [f, dropEmpty(container[f])]));
  return createHash("sha256").update(canonicalJson(picked)).digest("hex").slice(0, 16);
}
