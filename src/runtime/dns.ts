/**
 * Pod DNS for dnsPolicy Default (and ClusterFirst when no cluster DNS is
 * configured, where upstream falls back to Default): the node's resolv.conf,
 * within upstream's limits.
 */
export interface DnsSettings {
  servers: string[];
  searches: string[];
  options: string[];
}

const MAX_NAMESERVERS = 3;
const MAX_SEARCHES = 32;

export function parseResolvConf(text: string): DnsSettings {
  const dns: DnsSettings = { servers: [], searches: [], options: [] };
  for (const raw of text.split("\n")) {
    const line = raw.replace(/[#;].*$/, "").trim();
    const [keyword, ...fields] = line.split(/\s+/);
    if (keyword === "nameserver" && fields[0]) dns.servers.push(fields[0]);
    else if (keyword === "search") dns.searches = fields; // the last search line wins, as in libc
    else if (keyword === "options") dns.options.push(...fields);
  }
  dns.servers = dns.servers.slice(0, MAX_NAMESERVERS);
  dns.searches = dns.searches.slice(0, MAX_SEARCHES);
  return dns;
}
