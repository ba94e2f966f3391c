/**
 * Pod sysctls at admission (upstream pkg/kubelet/sysctl/allowlist.go): a
 * pod may set the safe sysctls and those matching allowedUnsafeSysctls
 * (names, or prefixes ending in `*`), each only when it is namespaced in a
 * namespace the pod does not share with the host. Anything else rejects
 * the pod with reason SysctlForbidden before it starts.
 */
import type { Pod } from "../pods/schema.ts";
import type { AdmitResult } from "./admission.ts";
import { normalizeSysctlName, sysctlNamespace, sysctlPatternProblem, type SysctlNamespace } from "../config/sysctl-names.ts";

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

export class SysctlConfigError extends Error {
  override readonly name = "SysctlConfigError";
}

export interface SysctlAllowlist {
  /** Admission of one pod: rejects a forbidden sysctl with reason SysctlForbidden. */
  admit(pod: Pod): AdmitResult;
}

/** The safe sysctls plus `allowedUnsafe`; throws SysctlConfigError for a pattern that is invalid or not namespaced (upstream refuses to start). */
export function sysctlAllowlist(allowedUnsafe: readonly string[]): SysctlAllowlist {
  const exact = new Map<string, SysctlNamespace>();
  const prefixes = new Map<string, SysctlNamespace>();
  for (const raw of [...SAFE_SYSCTLS, ...allowedUnsafe]) {
    const problem = sysctlPatternProblem(raw);
    if (problem) throw new SysctlConfigError(`allowedUnsafeSysctls: ${problem}`);
    const pattern = normalizeSysctlName(raw);
    const prefixed = pattern.endsWith("*");
    const nameOrPrefix = prefixed ? pattern.slice(0, -1) : pattern;
    (prefixed ? prefixes : exact).set(nameOrPrefix, sysctlNamespace(nameOrPrefix)!);
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
