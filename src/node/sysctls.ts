/**
 * Pod sysctls at admission (upstream pkg/kubelet/sysctl/allowlist.go): a
 * pod may set the safe sysctls and those matching allowedUnsafeSysctls
 * (names, or prefixes ending in `*`), each only when it is namespaced in a
 * namespace the pod does not share with the host. Anything else rejects
 * the pod with reason SysctlForbidden before it starts.
 */
import type { Pod } from "../pods/schema.ts";
import type { AdmitResult } from "./admission.ts";

/** Upstream SafeSysctlAllowlist. */
export const SAFE_SYSCTLS = [
  "kernel.shm_rmid_forced",
  "net.ipv4.ip_local_port_range",
  "net.ipv4.tcp_syncookies",
  "net.ipv4.ping_group_range",
  "net.ipv4.ip_unprivileged_port_start",
  "net.ipv4.ip_local_reserved_ports",
  "net.ipv4.tcp_keepalive_time",
  "net.ipv4.tcp_fin_timeout",
  "net.ipv4.tcp_keepalive_intvl",
  "net.ipv4.tcp_keepalive_probes",
  "net.ipv4.tcp_rmem",
  "net.ipv4.tcp_wmem",
] as const;

type Namespace = "ipc" | "net";

/** Upstream sysctl.NamespacedBy: which kernel namespace isolates a sysctl (or prefix). */
function namespaceOf(nameOrPrefix: string): Namespace | undefined {
  if (nameOrPrefix === "kernel.sem" || nameOrPrefix.startsWith("kernel.shm") || nameOrPrefix.startsWith("kernel.msg") || nameOrPrefix.startsWith("fs.mqueue.")) return "ipc";
  if (nameOrPrefix.startsWith("net.")) return "net";
  return undefined;
}

/**
 * Upstream NormalizeName: a name whose first separator is `/` uses `/`
 * between parts and may contain dots inside one (`net/ipv4/conf/eno2.100/rp_filter`).
 */
export function normalizeSysctlName(name: string): string {
  const dot = name.indexOf(".");
  const slash = name.indexOf("/");
  if (slash === -1 || (dot !== -1 && dot < slash)) return name;
  return name.replace(/[./]/g, (c) => (c === "/" ? "." : "/"));
}

/** A sysctl name or a prefix ending in `*` (`kernel.msg*`, `net.*`), dots or slashes between parts. */
const PATTERN = /^(\*|[a-z0-9]([-_./a-z0-9]*[a-z0-9])?\*?|[a-z0-9][-_./a-z0-9]*[./]\*)$/;

/** Why an allowedUnsafeSysctls entry cannot be used (upstream NewAllowlist refuses it), or undefined. */
export function sysctlPatternProblem(raw: string): string | undefined {
  if (raw.length > 253 || !PATTERN.test(raw)) return `sysctl ${JSON.stringify(raw)} must have at most 253 characters and be a sysctl name or a prefix ending in "*"`;
  const pattern = normalizeSysctlName(raw);
  const nameOrPrefix = pattern.endsWith("*") ? pattern.slice(0, -1) : pattern;
  return namespaceOf(nameOrPrefix) ? undefined : `the sysctls "${nameOrPrefix}" are not known to be namespaced`;
}

export class SysctlConfigError extends Error {
  override readonly name = "SysctlConfigError";
}

export interface SysctlAllowlist {
  /** Admission of one pod: rejects a forbidden sysctl with reason SysctlForbidden. */
  admit(pod: Pod): AdmitResult;
}

/** The safe sysctls plus `allowedUnsafe`; throws SysctlConfigError for a pattern that is invalid or not namespaced (upstream refuses to start). */
export function sysctlAllowlist(allowedUnsafe: readonly string[]): SysctlAllowlist {
  const exact = new Map<string, Namespace>();
  const prefixes = new Map<string, Namespace>();
  for (const raw of [...SAFE_SYSCTLS, ...allowedUnsafe]) {
    const problem = sysctlPatternProblem(raw);
    if (problem) throw new SysctlConfigError(`allowedUnsafeSysctls: ${problem}`);
    const pattern = normalizeSysctlName(raw);
    const prefixed = pattern.endsWith("*");
    const nameOrPrefix = prefixed ? pattern.slice(0, -1) : pattern;
    (prefixed ? prefixes : exact).set(nameOrPrefix, namespaceOf(nameOrPrefix)!);
  }

  const validate = (rawName: string, hostNet: boolean, hostIPC: boolean): string | undefined => {
    const name = normalizeSysctlName(rawName);
    const ns = exact.get(name) ?? [...prefixes].find(([p]) => name.startsWith(p))?.[1];
    if (!ns) return `"${name}" not allowlisted`;
    if ((ns === "ipc" && hostIPC) || (ns === "net" && hostNet)) return `"${name}" not allowed with host ${ns} enabled`;
    return undefined;
  };

  return {
    admit(pod) {
      for (const s of sysctlsOf(pod)) {
        const problem = validate(s.name, !!pod.spec.hostNetwork, !!pod.spec.hostIPC);
        if (problem) return { admit: false, reason: "SysctlForbidden", message: `forbidden sysctl: ${problem}` };
      }
      return { admit: true };
    },
  };
}

export const sysctlsOf = (pod: Pod): { name: string; value: string }[] =>
  ((pod.spec.securityContext as { sysctls?: { name?: string; value?: string }[] } | undefined)?.sysctls ?? []).map((s) => ({ name: s.name ?? "", value: s.value ?? "" }));

/** The sandbox's sysctls for the runtime, names with dots (upstream ConvertPodSysctlsVariableToDotsSeparator). */
export const sandboxSysctls = (pod: Pod): Record<string, string> => Object.fromEntries(sysctlsOf(pod).map((s) => [normalizeSysctlName(s.name), s.value]));
