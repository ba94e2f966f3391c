/**
 * Sysctl names as upstream's kubelet reads them (pkg/kubelet/sysctl): the
 * two spellings (dots or slashes), the kernel namespace that isolates a
 * name, and the patterns allowedUnsafeSysctls accepts. The configuration
 * validates its patterns with these; node/sysctls.ts admits pods with them.
 */

export type SysctlNamespace = "ipc" | "net";

/** Upstream sysctl.NamespacedBy: which kernel namespace isolates a sysctl (or prefix). */
export function sysctlNamespace(nameOrPrefix: string): SysctlNamespace | undefined {
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
  return sysctlNamespace(nameOrPrefix) ? undefined : `the sysctls "${nameOrPrefix}" are not known to be namespaced`;
}
