import { ContainerConfig, NamespaceMode, type Mount, PodSandboxConfig, Protocol, SecurityProfile_ProfileType, type UserNamespace } from "../cri/index.ts";
import { criSecurityContext, criSELinuxOption, effectiveSecurityContext } from "./security.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { podDnsConfig, type DnsSettings } from "./dns.ts";
import { containerHash } from "./hash.ts";
import * as L from "./labels.ts";
import { orphanSpecAnnotations } from "./orphan-spec.ts";
import { podHostnameAndDomain } from "./hosts.ts";
import { sandboxSysctls } from "../node/sysctls.ts";
import { podLogDirectory } from "../pods/dirs.ts";
import { expandCommand } from "../pods/expansion.ts";
import { podUid } from "../pods/identity.ts";

export interface NodeSettings {
  /** The node's name, for the events upstream records on the Node (MissingClusterDNS). */
  nodeName: string;
  /** Root of pod log directories (podLogsDir, upstream /var/log/pods). */
  podLogsDir: string;
  /** Parent cgroup of all pods (cgroupRoot + kubepods), or "" for the runtime's default. */
  podsCgroupParent: string;
  /** The node's resolv.conf, for dnsPolicy Default. */
  hostDns: DnsSettings;
  clusterDns: string[];
  clusterDomain: string;
  /** resolvConf is "": pods do not inherit the node's resolver. */
  resolvConfDisabled?: boolean;
  /** Where Localhost seccomp profiles live (<rootDir>/seccomp). */
  seccompProfileRoot?: string;
  /** seccompDefault: RuntimeDefault for containers that set no profile. */
  seccompDefault?: boolean;
}

/** Relative to the pod log directory: <container>/<restartCount>.log. */
export const containerLogPath = (name: string, restartCount: number): string => `${name}/${restartCount}.log`;

/**
 * The sandbox's hostname: the pod's hostname, or with setHostnameAsFQDN and
 * a subdomain its FQDN (upstream; sandboxHostnameProblem refuses one longer
 * than 64 characters before the sandbox is created).
 */
export function sandboxHostname(pod: Pod, clusterDomain: string): string {
  const { hostname, domain } = podHostnameAndDomain(pod, clusterDomain);
  return (pod.spec as { setHostnameAsFQDN?: boolean }).setHostnameAsFQDN && domain ? `${hostname}.${domain}` : hostname;
}

/** Upstream's check of a setHostnameAsFQDN hostname; undefined when it fits. */
export function sandboxHostnameProblem(pod: Pod, clusterDomain: string): string | undefined {
  const name = sandboxHostname(pod, clusterDomain);
  return name.length > 64
    ? `failed to construct FQDN from pod hostname and cluster domain, FQDN ${name} is too long (64 characters is the max, ${name.length} characters requested)`
    : undefined;
}

/** Upstream NamespacesForPod; `userns` is the pod's user namespace (userns/index.ts), the same for the sandbox and its containers. */
function namespaceOptions(pod: Pod, userns: UserNamespace | undefined) {
  return {
    network: pod.spec.hostNetwork ? NamespaceMode.NODE : NamespaceMode.POD,
    pid: pod.spec.hostPID ? NamespaceMode.NODE : pod.spec.shareProcessNamespace ? NamespaceMode.POD : NamespaceMode.CONTAINER,
    ipc: pod.spec.hostIPC ? NamespaceMode.NODE : NamespaceMode.POD,
    targetId: "",
    ...(userns ? { usernsOptions: userns } : {}),
  };
}

function protocolOf(p: string | undefined): Protocol {
  return p === "UDP" ? Protocol.UDP : p === "SCTP" ? Protocol.SCTP : Protocol.TCP;
}

export function sandboxConfig(pod: Pod, attempt: number, node: NodeSettings, cgroupParent: string, userns?: UserNamespace): PodSandboxConfig {
  const id = { uid: podUid(pod), name: pod.metadata.name ?? "", namespace: pod.metadata.namespace ?? "default" };
  const ports = pod.spec.containers.flatMap((c) => c.ports ?? []).filter((p) => p.hostPort);
  // Upstream generatePodSandboxLinuxConfig: the pod's seLinuxOptions label the sandbox.
  const selinux = criSELinuxOption(pod.spec.securityContext?.seLinuxOptions);
  return PodSandboxConfig.create({
    metadata: { ...id, attempt },
    hostname: pod.spec.hostNetwork ? "" : sandboxHostname(pod, node.clusterDomain),
    logDirectory: podLogDirectory(node.podLogsDir, id),
    dnsConfig: podDnsConfig(pod, node).config,
    portMappings: ports.map((p) => ({ protocol: protocolOf(p.protocol), containerPort: p.containerPort, hostPort: p.hostPort!, hostIp: p.hostIP ?? "" })),
    labels: { ...pod.metadata.labels, ...L.podLabels(id) },
    annotations: { ...pod.metadata.annotations },
    linux: {
      cgroupParent,
      sysctls: sandboxSysctls(pod),
      securityContext: {
        namespaceOptions: namespaceOptions(pod, userns),
        readonlyRootfs: false,
        supplementalGroups: [],
        // containerd refuses a privileged container in an unprivileged sandbox.
        privileged: [...(pod.spec.initContainers ?? []), ...pod.spec.containers].some((c) => (c.securityContext as { privileged?: boolean } | undefined)?.privileged === true),
        seccompProfilePath: "",
        ...(selinux ? { selinuxOptions: selinux } : {}),
      },
    },
  });
}

/** The sandbox config a container is created with, carrying the pod's user namespace (a sandbox from an earlier sync was built without it). */
export function withUserNamespace(sandbox: PodSandboxConfig, userns: UserNamespace | undefined): PodSandboxConfig {
  const sc = sandbox.linux?.securityContext;
  if (!userns || !sc?.namespaceOptions) return sandbox;
  return { ...sandbox, linux: { ...sandbox.linux!, securityContext: { ...sc, namespaceOptions: { ...sc.namespaceOptions, usernsOptions: userns } } } };
}

/**
 * Upstream applyPlatformSpecificContainerConfig: with a user namespace, every
 * mount (volumes, devices, the pod's own files) carries its mappings, so the
 * runtime makes it an idmapped mount (the pod's root writes host files as
 * the host's root, not as the unmapped high ID).
 */
export function idmappedMounts(mounts: Mount[], userns: UserNamespace | undefined): Mount[] {
  return userns ? mounts.map((m) => ({ ...m, uidMappings: userns.uids, gidMappings: userns.gids })) : mounts;
}

export function containerConfig(
  pod: Pod,
  container: ContainerSpec,
  restartCount: number,
  imageRef: string,
  /** The resolved environment (env.ts containerEnv). */
  envs: { key: string; value: string }[],
  node: Pick<NodeSettings, "seccompProfileRoot" | "seccompDefault"> = {},
  /** Volumes and the pod's own files (hosts file, termination log), resolved on the host by the caller. */
  mounts: Mount[] = [],
  /** The sandbox's user namespace: its containers share it (upstream sets the same userns_options on both). */
  userns?: UserNamespace,
): ContainerConfig {
  const sc = criSecurityContext(effectiveSecurityContext(pod, container), {
    seccompProfileRoot: node.seccompProfileRoot ?? "/var/lib/kubelet/seccomp",
    seccompDefault: node.seccompDefault ?? false,
  });
  const id = { uid: podUid(pod), name: pod.metadata.name ?? "", namespace: pod.metadata.namespace ?? "default" };
  return ContainerConfig.create({
    metadata: { name: container.name, attempt: restartCount },
    image: { image: imageRef, userSpecifiedImage: container.image, annotations: {}, runtimeHandler: "" },
    command: expandCommand(container.command, envs),
    args: expandCommand(container.args, envs),
    workingDir: container.workingDir ?? "",
    envs,
    mounts,
    labels: { ...L.podLabels(id), [L.ContainerNameLabel]: container.name },
    annotations: {
      [L.ContainerHashAnnotation]: containerHash(container),
      [L.ContainerRestartCountAnnotation]: String(restartCount),
      [L.TerminationMessagePathAnnotation]: container.terminationMessagePath ?? "/dev/termination-log",
      [L.TerminationMessagePolicyAnnotation]: container.terminationMessagePolicy ?? "File",
      [L.PodTerminationGracePeriodAnnotation]: String(pod.spec.terminationGracePeriodSeconds ?? 30),
      ...(pod.metadata.deletionGracePeriodSeconds !== undefined ? { [L.PodDeletionGracePeriodAnnotation]: String(pod.metadata.deletionGracePeriodSeconds) } : {}),
      // preStop handler and ports, as upstream: what a kill without the pod's spec (an orphan) restores.
      ...orphanSpecAnnotations(container),
    },
    logPath: containerLogPath(container.name, restartCount),
    stdin: container.stdin ?? false,
    stdinOnce: container.stdinOnce ?? false,
    tty: container.tty ?? false,
    linux: {
      securityContext: {
        namespaceOptions: namespaceOptions(pod, userns),
        privileged: sc.privileged,
        ...(sc.runAsUser !== undefined ? { runAsUser: { value: BigInt(sc.runAsUser) } } : {}),
        ...(sc.runAsGroup !== undefined ? { runAsGroup: { value: BigInt(sc.runAsGroup) } } : {}),
        readonlyRootfs: sc.readonlyRootfs,
        supplementalGroups: sc.supplementalGroups.map(BigInt),
        noNewPrivs: sc.noNewPrivs,
        capabilities: { addCapabilities: sc.capabilities.add, dropCapabilities: sc.capabilities.drop, addAmbientCapabilities: [] },
        maskedPaths: sc.maskedPaths,
        readonlyPaths: sc.readonlyPaths,
        ...(sc.seLinuxOptions ? { selinuxOptions: sc.seLinuxOptions } : {}),
        seccomp: {
          profileType: {
            RuntimeDefault: SecurityProfile_ProfileType.RuntimeDefault,
            Unconfined: SecurityProfile_ProfileType.Unconfined,
            Localhost: SecurityProfile_ProfileType.Localhost,
          }[sc.seccomp.type],
          localhostRef: sc.seccomp.localhostRef,
        },
      },
    },
  });
}

/** Upstream: no tag (or :latest) and no digest means Always. */
export function pullPolicyOf(container: ContainerSpec): "Always" | "IfNotPresent" | "Never" {
  if (container.imagePullPolicy) return container.imagePullPolicy;
  const image = container.image;
  if (image.includes("@")) return "IfNotPresent";
  const lastPart = image.slice(image.lastIndexOf("/") + 1);
  const tag = lastPart.includes(":") ? lastPart.slice(lastPart.indexOf(":") + 1) : "";
  return tag === "" || tag === "latest" ? "Always" : "IfNotPresent";
}
