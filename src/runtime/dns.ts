/**
 * Pod DNS as upstream's dns.Configurer.GetPodDNS: the base from the policy
 * (ClusterFirst: the cluster DNS servers, the cluster search domains before
 * the node's, ndots:5; Default, and ClusterFirst without cluster DNS: the
 * node's resolv.conf; None: nothing), then the pod's dnsConfig merged in,
 * then upstream's limits (3 nameservers, 32 search domains of at most 253
 * characters and 2048 in all), each cut reported as a DNSConfigForming
 * warning.
 */
import type { Pod } from "../pods/schema.ts";
import { readFileSync } from "node:fs";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";

export interface DnsSettings {
  servers: string[];
  searches: string[];
  options: string[];
}

/** Upstream validation.MaxDNSNameservers, MaxDNSSearchPathsExpanded, MaxDNSSearchListCharsExpanded, DNS1123SubdomainMaxLength. */
const MAX_NAMESERVERS = 3;
const MAX_SEARCHES = 32;
const MAX_SEARCH_LINE_CHARS = 2048;
const MAX_SEARCH_DOMAIN_CHARS = 253;

/** A resolv.conf as the pod DNS base; limits are applied per pod, as upstream. */
export function parseResolvConf(text: string): DnsSettings {
  const dns: DnsSettings = { servers: [], searches: [], options: [] };
  for (const raw of text.split("\n")) {
    const line = raw.replace(/[#;].*$/, "").trim();
    const [keyword, ...fields] = line.split(/\s+/);
    if (keyword === "nameserver" && fields[0]) dns.servers.push(fields[0]);
    else if (keyword === "search")
      dns.searches = fields; // the last search line wins, as in libc
    else if (keyword === "options") dns.options.push(...fields);
  }
  return dns;
}

export interface PodDnsNode {
  /** The node's resolv.conf. */
  hostDns: DnsSettings;
  clusterDns: string[];
  clusterDomain: string;
  /** resolvConf is "": the node's resolver is not inherited (upstream: Default pods get 127.0.0.1 and search "."). */
  resolvConfDisabled?: boolean;
}

export interface DnsWarning {
  reason: "DNSConfigForming" | "MissingClusterDNS";
  message: string;
  /** Upstream records MissingClusterDNS on the Node too, with this message. */
  nodeMessage?: string;
}

type PodDnsConfig = { nameservers?: string[]; searches?: string[]; options?: { name?: string; value?: string }[] };

const unique = (xs: string[]): string[] => [...new Set(xs)];

/** Upstream mergeDNSOptions: the pod's options override the base's of the same name. */
function mergeOptions(base: string[], extra: PodDnsConfig["options"]): string[] {
  const merged = new Map<string, string>();
  for (const op of base) {
    const i = op.indexOf(":");
    if (i === -1) merged.set(op, "");
    else merged.set(op.slice(0, i), op.slice(i + 1));
  }
  for (const op of extra ?? []) if (op.name) merged.set(op.name, op.value ?? "");
  return [...merged].map(([name, value]) => (value ? `${name}:${value}` : name));
}

function fitSearches(searches: string[], warnings: DnsWarning[]): string[] {
  let out = searches;
  let cut = false;
  if (out.length > MAX_SEARCHES) {
    out = out.slice(0, MAX_SEARCHES);
    cut = true;
  }
  const fitting = out.filter((s) => s.length <= MAX_SEARCH_DOMAIN_CHARS);
  if (fitting.length !== out.length) cut = true;
  out = fitting;
  while (out.join(" ").length > MAX_SEARCH_LINE_CHARS) {
    out = out.slice(0, -1);
    cut = true;
  }
  if (cut) {
    warnings.push({
      reason: "DNSConfigForming",
      message: `Search Line limits were exceeded, some search paths have been omitted, the applied search line is: ${out.join(" ")}`,
    });
  }
  return out;
}

export function podDnsConfig(pod: Pod, node: PodDnsNode): { config: DnsSettings; warnings: DnsWarning[] } {
  const warnings: DnsWarning[] = [];
  const policy = pod.spec.dnsPolicy ?? "ClusterFirst";
  const cluster = policy === "ClusterFirstWithHostNet" || (policy === "ClusterFirst" && !pod.spec.hostNetwork);
  let config: DnsSettings;
  if (policy === "None") {
    config = { servers: [], searches: [], options: [] };
  } else if (cluster && node.clusterDns.length) {
    const ns = pod.metadata.namespace ?? "default";
    const d = node.clusterDomain;
    const searches = d ? unique([`${ns}.svc.${d}`, `svc.${d}`, d, ...node.hostDns.searches]) : [...node.hostDns.searches];
    config = { servers: [...node.clusterDns], searches, options: ["ndots:5"] };
  } else {
    if (cluster) {
      const nodeMessage = `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`;
      warnings.push({
        reason: "MissingClusterDNS",
        message: `pod: "${pod.metadata.name}_${pod.metadata.namespace ?? "default"}(${pod.metadata.uid})". ${nodeMessage}`,
        nodeMessage,
      });
    }
    config = node.resolvConfDisabled
      ? { servers: ["127.0.0.1"], searches: ["."], options: [] }
      : { servers: [...node.hostDns.servers], searches: [...node.hostDns.searches], options: [...node.hostDns.options] };
  }
  const extra = (pod.spec as { dnsConfig?: PodDnsConfig }).dnsConfig;
  if (extra) {
    config = {
      servers: unique([...config.servers, ...(extra.nameservers ?? [])]),
      searches: unique([...config.searches, ...(extra.searches ?? [])]),
      options: mergeOptions(config.options, extra.options),
    };
  }
  if (config.servers.length > MAX_NAMESERVERS) {
    config.servers = config.servers.slice(0, MAX_NAMESERVERS);
    warnings.push({
      reason: "DNSConfigForming",
      message: `Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: ${config.servers.join(" ")}`,
    });
  }
  config.searches = fitSearches(config.searches, warnings);
  return { config, warnings };
}

/** The node's resolv.conf (upstream --resolv-conf); "" disables it, an unreadable file is warned about and gives nothing. */
export function readHostDns(path: string, logger: Logger): DnsSettings {
  if (path === "") return { servers: [], searches: [], options: [] }; // disabled on purpose (--resolv-conf="")
  try {
    return parseResolvConf(readFileSync(path, "utf8"));
  } catch (err) {
    logger.warn("could not read resolv.conf; pods get no DNS servers from the node", { path, err: errorMessage(err) });
    return { servers: [], searches: [], options: [] };
  }
}
