/**
 * String checks shared by the config file schema and the flag parser, after
 * k8s.io/apimachinery/pkg/util/validation and the kubelet's flag checks
 * (cmd/kubelet/app/options ValidateKubeletFlags, pkg/util/taints).
 * Each check returns null when the value is fine, else a message that says
 * what was expected.
 */
import { isIP } from "node:net";

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

export function checkIP(s: string): string | null {
  return isIP(s) ? null : `expected an IP address, got ${JSON.stringify(s)}`;
}

export function checkDns1123Subdomain(s: string): string | null {
  if (s.length > 253) return `${JSON.stringify(s)} must be no more than 253 characters`;
  if (!DNS1123_SUBDOMAIN.test(s)) return `${JSON.stringify(s)} must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or digit)`;
  return null;
}

/** A label or annotation key: an optional DNS subdomain prefix, "/", and a name of at most 63 characters. */
export function checkQualifiedName(s: string): string | null {
  const parts = s.split("/");
  let name = s;
  if (parts.length === 2) {
    const prefix = parts[0] ?? "";
    if (prefix === "") return `key ${JSON.stringify(s)}: prefix part must not be empty`;
    if (checkDns1123Subdomain(prefix)) return `key ${JSON.stringify(s)}: prefix must be a lowercase RFC 1123 subdomain`;
    name = parts[1] ?? "";
  } else if (parts.length > 2) {
    return `key ${JSON.stringify(s)}: must consist of an optional prefix, "/", and a name`;
  }
  if (name === "") return `key ${JSON.stringify(s)}: name part must not be empty`;
  if (name.length > 63) return `key ${JSON.stringify(s)}: name part must be no more than 63 characters`;
  if (!QUALIFIED_NAME_PART.test(name)) return `key ${JSON.stringify(s)}: name part must consist of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  return null;
}

export function checkLabelValue(s: string): string | null {
  if (s === "") return null;
  if (s.length > 63) return `value ${JSON.stringify(s)} must be no more than 63 characters`;
  if (!QUALIFIED_NAME_PART.test(s)) return `value ${JSON.stringify(s)} must consist of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  return null;
}

// k8s.io/kubelet/pkg/apis: the kubernetes.io labels a kubelet may set on its own Node.
const KUBELET_LABELS = new Set([
  "kubernetes.io/hostname",
  "kubernetes.io/arch",
  "kubernetes.io/os",
  "beta.kubernetes.io/arch",
  "beta.kubernetes.io/os",
  "beta.kubernetes.io/instance-type",
  "node.kubernetes.io/instance-type",
  "failure-domain.beta.kubernetes.io/region",
  "failure-domain.beta.kubernetes.io/zone",
  "topology.kubernetes.io/region",
  "topology.kubernetes.io/zone",
]);
const KUBELET_LABEL_NAMESPACES = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/** Checks one --node-labels entry like upstream ValidateKubeletFlags. */
export function checkNodeLabel(key: string, value: string): string | null {
  const keyErr = checkQualifiedName(key);
  if (keyErr) return keyErr;
  const valueErr = checkLabelValue(value);
  if (valueErr) return valueErr;
  const ns = key.includes("/") ? (key.split("/")[0] ?? "") : "";
  const isK8s = (n: string) => n === "kubernetes.io" || n.endsWith(".kubernetes.io") || n === "k8s.io" || n.endsWith(".k8s.io");
  const allowed = KUBELET_LABELS.has(key) || KUBELET_LABEL_NAMESPACES.some((a) => ns === a || ns.endsWith(`.${a}`));
  if (isK8s(ns) && !allowed)
    return `label ${JSON.stringify(key)} is in the 'kubernetes.io' or 'k8s.io' namespace; a kubelet may only set labels with the prefixes ${KUBELET_LABEL_NAMESPACES.join(", ")} or one of ${[...KUBELET_LABELS].join(", ")}`;
  return null;
}

export const TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"] as const;
export type TaintEffect = (typeof TAINT_EFFECTS)[number];

export function checkTaintEffect(effect: string): string | null {
  return (TAINT_EFFECTS as readonly string[]).includes(effect) ? null : `taint effect ${JSON.stringify(effect)} must be one of ${TAINT_EFFECTS.join(", ")}`;
}

/** Parses "key=value:effect" or "key:effect", as pkg/util/taints parseTaint does for --register-with-taints. */
export function parseTaintSpec(spec: string): { key: string; value?: string; effect: TaintEffect } {
  const parts = spec.split(":");
  if (parts.length !== 2) throw new Error(`invalid taint ${JSON.stringify(spec)}: expected <key>=<value>:<effect> or <key>:<effect>`);
  const [kv = "", effect = ""] = parts;
  const effectErr = checkTaintEffect(effect);
  if (effectErr) throw new Error(`invalid taint ${JSON.stringify(spec)}: ${effectErr}`);
  const kvParts = kv.split("=");
  if (kvParts.length > 2) throw new Error(`invalid taint ${JSON.stringify(spec)}: more than one '='`);
  const [key = "", value] = kvParts;
  const err = checkQualifiedName(key) ?? (value === undefined ? null : checkLabelValue(value));
  if (err) throw new Error(`invalid taint ${JSON.stringify(spec)}: ${err}`);
  return value === undefined ? { key, effect: effect as TaintEffect } : { key, value, effect: effect as TaintEffect };
}

/**
 * Parses --node-ip: one IP, or a dual-stack pair (one IPv4, one IPv6), after
 * upstream nodeutil.ParseNodeIPArgument. "0.0.0.0" or "::" alone mean "pick
 * the default address of that family" and are kept as given.
 */
export function parseNodeIPs(s: string): string[] {
  if (s.trim() === "") return [];
  const ips = s.split(",").map((p) => p.trim());
  for (const ip of ips) {
    const err = checkIP(ip);
    if (err) throw new Error(err);
  }
  if (ips.length > 2 || (ips.length === 2 && isIP(ips[0] ?? "") === isIP(ips[1] ?? "")))
    throw new Error(`expected a single IP or a dual-stack pair (one IPv4, one IPv6), got ${JSON.stringify(s)}`);
  if (ips.length === 2 && ips.some((ip) => ip === "0.0.0.0" || ip === "::"))
    throw new Error(`an unspecified address (0.0.0.0 or ::) is only allowed alone, got ${JSON.stringify(s)}`);
  return ips;
}

/** Edit distance, for "did you mean" hints on misspelled flags and fields. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDist = Math.max(2, Math.floor(word.length / 4)) + 1;
  for (const c of candidates) {
    const d = distance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDist) {
      best = c;
      bestDist = d;
    }
  }
  return best;
}

function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length] ?? 0;
}
