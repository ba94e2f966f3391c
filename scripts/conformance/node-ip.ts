// The node IP of the conformance cluster: an address of this host the
// upstream kubelet accepts. Upstream's node status setter refuses a loopback
// node IP (validateNodeIP in pkg/kubelet/kubelet_node_status.go: "nodeIP
// can't be loopback address"), and its Node then has no addresses, so every
// request the API server proxies to the kubelet (logs, exec, port-forward)
// fails. Both kubelets get the same address, so their runs compare.
import { isIPv4 } from "node:net";

/** The `src` address of `ip -4 route get ADDR`'s answer (`1.1.1.1 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0`). */
export function routeSource(output: string): string | undefined {
  const m = output.match(/\bsrc (\S+)/);
  return m?.[1] !== undefined && isIPv4(m[1]) ? m[1] : undefined;
}

/** The IPv4 addresses of `ip -4 -o addr show` (`4: eth0    inet 192.0.2.2/24 brd ... scope global eth0 ...`). */
export function hostAddresses(output: string): string[] {
  return [...output.matchAll(/\binet (\d+\.\d+\.\d+\.\d+)\//g)].map((m) => m[1] ?? "").filter(Boolean);
}

/**
 * Why `ip` cannot be the node IP, in upstream's words (validateNodeIP's IPv4
 * checks), or undefined when it can: an IPv4 address held by one of the host's
 * interfaces that is not loopback, multicast, link-local or all zeros.
 */
export function nodeIPProblem(ip: string, addresses: string[]): string | undefined {
  if (!isIPv4(ip)) return `${JSON.stringify(ip)} is not an IPv4 address`;
  const first = Number(ip.split(".")[0]);
  if (first === 127) return "nodeIP can't be loopback address";
  if (first >= 224 && first <= 239) return "nodeIP can't be a multicast address";
  if (ip.startsWith("169.254.")) return "nodeIP can't be a link-local unicast address";
  if (ip === "0.0.0.0") return "nodeIP can't be an all zeros address";
  if (!addresses.includes(ip)) return `node IP: "${ip}" not found in the host's network interfaces`;
  return undefined;
}

/**
 * The node IP: `given` (run.ts --node-ip) or the source address of the default
 * route; throws naming the reason when there is none the upstream kubelet would accept.
 */
export function chooseNodeIP(given: string | undefined, routeGet: () => string, addrShow: () => string): string {
  const ip = given ?? routeSource(routeGet());
  if (ip === undefined)
    throw new Error(
      "conformance needs a non-loopback IPv4 address of this host as the node IP (the upstream kubelet refuses 127.0.0.1), " +
        "and `ip -4 route get 1.1.1.1` names no source address (no default route?): pass --node-ip=IP",
    );
  const problem = nodeIPProblem(ip, hostAddresses(addrShow()));
  if (problem) throw new Error(`node IP ${ip}${given ? " (--node-ip)" : " (the default route's source)"} is not usable: ${problem}`);
  return ip;
}

/** `chooseNodeIP` on this host. */
export function hostNodeIP(given?: string): string {
  const ip = (args: string[]) => {
    const r = Bun.spawnSync(["ip", ...args], { stdout: "pipe", stderr: "pipe" });
    return r.exitCode === 0 ? r.stdout.toString() : "";
  };
  return chooseNodeIP(
    given,
    () => ip(["-4", "route", "get", "1.1.1.1"]),
    () => ip(["-4", "-o", "addr", "show"]),
  );
}
