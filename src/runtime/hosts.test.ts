import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pod } from "../pods/schema.ts";
import { managedHostsContent, mountsOwnHosts, podHostnameAndDomain, writeHostsFile } from "./hosts.ts";

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "hosts-"))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const pod = (spec: Partial<Pod["spec"]> = {}): Pod => ({ metadata: { name: "web", namespace: "ns", uid: "u" }, spec: { containers: [{ name: "c", image: "i" }], ...spec } });
const LOCAL =
  "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

describe("managed /etc/hosts", () => {
  test("the pod IP with its hostname, the FQDN with a subdomain, host aliases at the end (upstream bytes)", () => {
    expect(managedHostsContent(["10.1.0.5"], "web", "", [])).toBe(LOCAL + "10.1.0.5\tweb\n");
    expect(managedHostsContent(["10.1.0.5", "fd00::5"], "web", "sub.ns.svc.cluster.local", [{ ip: "1.2.3.4", hostnames: ["a", "b"] }])).toBe(
      LOCAL + "10.1.0.5\tweb.sub.ns.svc.cluster.local\tweb\nfd00::5\tweb.sub.ns.svc.cluster.local\tweb\n\n# Entries added by HostAliases.\n1.2.3.4\ta\tb\n",
    );
  });

  test("hostname: spec.hostname over the pod name, cut to 63 characters; the domain needs a subdomain", () => {
    expect(podHostnameAndDomain(pod({ hostname: "h", subdomain: "s" }), "cluster.local")).toEqual({ hostname: "h", domain: "s.ns.svc.cluster.local" });
    const long: Pod = { metadata: { name: "a".repeat(62) + "-b" + "c".repeat(10) }, spec: { containers: [] as never } };
    expect(podHostnameAndDomain(long, "x").hostname).toBe("a".repeat(62));
  });

  test("written with mode 0644; a host-network pod gets the node's file and its aliases; no IP, no file", () => {
    const path = join(dir, "etc-hosts");
    writeFileSync(join(dir, "node-hosts"), "127.0.0.1 localhost node1\n");
    const aliased = pod({ hostAliases: [{ ip: "9.9.9.9", hostnames: ["nine"] }] } as Partial<Pod["spec"]>);
    expect(writeHostsFile(path, { pod: aliased, ips: ["10.0.0.2"], clusterDomain: "cluster.local", nodeHostsPath: join(dir, "node-hosts") })).toBe(true);
    expect(readFileSync(path, "utf8")).toBe(LOCAL + "10.0.0.2\tweb\n\n# Entries added by HostAliases.\n9.9.9.9\tnine\n");
    expect(statSync(path).mode & 0o777).toBe(0o644);
    const inode = statSync(path).ino;
    writeHostsFile(path, { pod: { ...aliased, spec: { ...aliased.spec, hostNetwork: true } }, ips: [], clusterDomain: "cluster.local", nodeHostsPath: join(dir, "node-hosts") });
    expect(readFileSync(path, "utf8")).toBe("# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost node1\n\n# Entries added by HostAliases.\n9.9.9.9\tnine\n");
    expect(statSync(path).ino).toBe(inode); // rewritten in place: running containers' bind mounts see it
    expect(writeHostsFile(join(dir, "none"), { pod: pod(), ips: [], clusterDomain: "", nodeHostsPath: "" })).toBe(false);
  });

  test("a container that mounts /etc/hosts itself keeps its own", () => {
    expect(mountsOwnHosts({ name: "c", image: "i", volumeMounts: [{ name: "v", mountPath: "/etc/hosts" }] })).toBe(true);
    expect(mountsOwnHosts({ name: "c", image: "i", volumeMounts: [{ name: "v", mountPath: "/etc" }] })).toBe(false);
  });
});
