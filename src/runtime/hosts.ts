/**
 * The kubelet-managed /etc/hosts of a pod (upstream kubelet_pods.go
 * ensureHostsFile): written to <rootDir>/pods/<uid>/etc-hosts before each
 * container start and bind-mounted at /etc/hosts into every container that
 * does not mount something there itself. A pod on the pod network gets
 * localhost lines and its own IPs with its hostname (and FQDN with a
 * subdomain); a host-network pod gets the node's hosts file. hostAliases
 * are appended to both.
 */
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { Mount } from "../cri/index.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";

export const ETC_HOSTS_PATH = "/etc/hosts";
const MANAGED_HEADER = "# Kubernetes-managed hosts file.\n";
const MANAGED_HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n";

export interface HostAlias {
  ip: string;
  hostnames: string[];
}

export const hostAliasesOf = (pod: Pod): HostAlias[] =>
  (((pod.spec as { hostAliases?: { ip?: string; hostnames?: string[] }[] }).hostAliases ?? []) as { ip?: string; hostnames?: string[] }[]).map((a) => ({
    ip: a.ip ?? "",
    hostnames: a.hostnames ?? [],
  }));

/** Upstream GeneratePodHostNameAndDomain: the hostname (63 characters at most) and, with a subdomain, the domain. */
export function podHostnameAndDomain(pod: Pod, clusterDomain: string): { hostname: string; domain: string } {
  const hostname = (pod.spec.hostname || (pod.metadata.name ?? "")).slice(0, 63).replace(/[-.]+$/, "");
  const domain = pod.spec.subdomain ? `${pod.spec.subdomain}.${pod.metadata.namespace ?? "default"}.svc.${clusterDomain}` : "";
  return { hostname, domain };
}

function aliasLines(aliases: HostAlias[]): string {
  if (!aliases.length) return "";
  return "\n# Entries added by HostAliases.\n" + aliases.map((a) => `${a.ip}\t${a.hostnames.join("\t")}\n`).join("");
}

/** Upstream managedHostsFileContent. */
export function managedHostsContent(ips: string[], hostname: string, domain: string, aliases: HostAlias[]): string {
  let out =
    MANAGED_HEADER +
    "127.0.0.1\tlocalhost\n" +
    "::1\tlocalhost ip6-localhost ip6-loopback\n" +
    "fe00::0\tip6-localnet\n" +
    "fe00::0\tip6-mcastprefix\n" +
    "fe00::1\tip6-allnodes\n" +
    "fe00::2\tip6-allrouters\n";
  for (const ip of ips) out += domain ? `${ip}\t${hostname}.${domain}\t${hostname}\n` : `${ip}\t${hostname}\n`;
  return out + aliasLines(aliases);
}

/** Upstream nodeHostsFileContent: the node's file under its own header, then the aliases. */
export const nodeHostsContent = (nodeHosts: string, aliases: HostAlias[]): string => MANAGED_HEADER_HOST_NETWORK + nodeHosts + aliasLines(aliases);

export interface HostsFileInput {
  pod: Pod;
  /** The pod's IPs; for a host-network pod any non-empty list (upstream uses the node's). */
  ips: string[];
  clusterDomain: string;
  /** The node's hosts file, for host-network pods. */
  nodeHostsPath: string;
}

/**
 * Writes the pod's hosts file in place (same inode, so running containers
 * that mount it see the update) with mode 0644. Returns false when the pod
 * has no IP yet: upstream mounts no hosts file then.
 */
export function writeHostsFile(path: string, input: HostsFileInput): boolean {
  const { pod } = input;
  if (!input.ips.length && !pod.spec.hostNetwork) return false;
  const aliases = hostAliasesOf(pod);
  const { hostname, domain } = podHostnameAndDomain(pod, input.clusterDomain);
  const content = pod.spec.hostNetwork ? nodeHostsContent(readFileSync(input.nodeHostsPath, "utf8"), aliases) : managedHostsContent(input.ips, hostname, domain, aliases);
  writeFileSync(path, content, { mode: 0o644 });
  chmodSync(path, 0o644);
  return true;
}

/** A container that mounts a volume at /etc/hosts keeps it (upstream). */
export const mountsOwnHosts = (spec: ContainerSpec): boolean => (spec.volumeMounts ?? []).some((m) => m.mountPath === ETC_HOSTS_PATH);

export const hostsMount = (hostPath: string): Mount => Mount.create({ containerPath: ETC_HOSTS_PATH, hostPath, readonly: false });
