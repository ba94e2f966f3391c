/**
 * Pod and container security context to the CRI, after upstream's
 * kuberuntime security_context.go: the container's settings override the
 * pod's; runAsNonRoot is checked against the image user before a container
 * is created; unprivileged containers get the default masked and read-only
 * /proc and /sys paths.
 */
import type { ContainerSpec, Pod } from "../pods/schema.ts";

type Capabilities = { add?: string[]; drop?: string[] };
type SELinuxOptions = { user?: string; role?: string; type?: string; level?: string };
type SeccompProfile = { type?: "RuntimeDefault" | "Unconfined" | "Localhost"; localhostProfile?: string };

export interface EffectiveSecurityContext {
  runAsUser?: number;
  runAsGroup?: number;
  runAsNonRoot?: boolean;
  readOnlyRootFilesystem?: boolean;
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  capabilities?: Capabilities;
  seccompProfile?: SeccompProfile;
  /** The container's seLinuxOptions, else the pod's (a whole replacement, as upstream). */
  seLinuxOptions?: SELinuxOptions;
  procMount?: "Default" | "Unmasked";
  supplementalGroups: number[];
}

/** Upstream's default masked paths for containers that are not privileged (pkg/securitycontext). */
export const DEFAULT_MASKED_PATHS = [
  "/proc/asound",
  "/proc/acpi",
  "/proc/interrupts",
  "/proc/kcore",
  "/proc/keys",
  "/proc/latency_stats",
  "/proc/timer_list",
  "/proc/timer_stats",
  "/proc/sched_debug",
  "/proc/scsi",
  "/sys/firmware",
  "/sys/devices/virtual/powercap",
];
export const DEFAULT_READONLY_PATHS = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"];

export function effectiveSecurityContext(pod: Pod, container: ContainerSpec): EffectiveSecurityContext {
  const p = (pod.spec.securityContext ?? {}) as Record<string, unknown>;
  const c = (container.securityContext ?? {}) as Record<string, unknown>;
  const pick = <T>(key: string): T | undefined => (c[key] ?? p[key]) as T | undefined;
  const groups = [...((p.supplementalGroups as number[] | undefined) ?? []), ...(p.fsGroup !== undefined ? [p.fsGroup as number] : [])];
  return {
    ...(pick<number>("runAsUser") !== undefined ? { runAsUser: pick<number>("runAsUser")! } : {}),
    ...(pick<number>("runAsGroup") !== undefined ? { runAsGroup: pick<number>("runAsGroup")! } : {}),
    ...(pick<boolean>("runAsNonRoot") !== undefined ? { runAsNonRoot: pick<boolean>("runAsNonRoot")! } : {}),
    ...(pick<SeccompProfile>("seccompProfile") ? { seccompProfile: pick<SeccompProfile>("seccompProfile")! } : {}),
    ...(pick<SELinuxOptions>("seLinuxOptions") ? { seLinuxOptions: pick<SELinuxOptions>("seLinuxOptions")! } : {}),
    // Container-only fields.
    ...(c.readOnlyRootFilesystem !== undefined ? { readOnlyRootFilesystem: c.readOnlyRootFilesystem as boolean } : {}),
    ...(c.privileged !== undefined ? { privileged: c.privileged as boolean } : {}),
    ...(c.allowPrivilegeEscalation !== undefined ? { allowPrivilegeEscalation: c.allowPrivilegeEscalation as boolean } : {}),
    ...(c.capabilities ? { capabilities: c.capabilities as Capabilities } : {}),
    ...(c.procMount ? { procMount: c.procMount as "Default" | "Unmasked" } : {}),
    supplementalGroups: [...new Set(groups)],
  };
}

export class SecurityContextError extends Error {
  override readonly name = "SecurityContextError";
}

/**
 * Upstream verifyRunAsNonRoot: with runAsNonRoot, the effective user must
 * be known and not 0; an image user given by name cannot be checked.
 */
export function verifyRunAsNonRoot(sc: EffectiveSecurityContext, image: { uid?: number; username: string }): void {
  if (!sc.runAsNonRoot) return;
  if (sc.runAsUser !== undefined) {
    if (sc.runAsUser === 0) throw new SecurityContextError("container's runAsUser breaks non-root policy");
    return;
  }
  if (image.uid !== undefined) {
    if (image.uid === 0) throw new SecurityContextError("container has runAsNonRoot and image will run as root");
    return;
  }
  if (image.username) throw new SecurityContextError(`container has runAsNonRoot and image has non-numeric user (${image.username}), cannot verify user is non-root`);
  throw new SecurityContextError("container has runAsNonRoot and image will run as root");
}

/** The CRI SELinuxOption for core/v1 SELinuxOptions (unset fields are empty strings), or nothing when none is set. */
export function criSELinuxOption(o: SELinuxOptions | undefined): { user: string; role: string; type: string; level: string } | undefined {
  return o ? { user: o.user ?? "", role: o.role ?? "", type: o.type ?? "", level: o.level ?? "" } : undefined;
}

/** The CRI LinuxContainerSecurityContext fields (plain values; the caller builds the message). */
export function criSecurityContext(sc: EffectiveSecurityContext, opts: { seccompProfileRoot: string; seccompDefault: boolean }) {
  const privileged = sc.privileged === true;
  const unmasked = privileged || sc.procMount === "Unmasked";
  const seccomp = sc.seccompProfile?.type ?? (opts.seccompDefault ? "RuntimeDefault" : "Unconfined");
  return {
    privileged,
    ...(sc.runAsUser !== undefined ? { runAsUser: sc.runAsUser } : {}),
    ...(sc.runAsGroup !== undefined ? { runAsGroup: sc.runAsGroup } : {}),
    readonlyRootfs: sc.readOnlyRootFilesystem === true,
    supplementalGroups: sc.supplementalGroups,
    // Upstream: no_new_privs only when allowPrivilegeEscalation is explicitly false.
    noNewPrivs: sc.allowPrivilegeEscalation === false,
    // Names as given, like upstream: the runtime adds CAP_ and understands ALL.
    capabilities: { add: sc.capabilities?.add ?? [], drop: sc.capabilities?.drop ?? [] },
    ...(sc.seLinuxOptions ? { seLinuxOptions: criSELinuxOption(sc.seLinuxOptions)! } : {}),
    maskedPaths: unmasked ? [] : DEFAULT_MASKED_PATHS,
    readonlyPaths: unmasked ? [] : DEFAULT_READONLY_PATHS,
    seccomp: {
      type: privileged ? ("Unconfined" as const) : seccomp,
      localhostRef: seccomp === "Localhost" && !privileged ? `${opts.seccompProfileRoot}/${sc.seccompProfile?.localhostProfile ?? ""}` : "",
    },
  };
}
