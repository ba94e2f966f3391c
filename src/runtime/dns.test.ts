import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { parseResolvConf, podDnsConfig, type PodDnsNode } from "./dns.ts";

const node: PodDnsNode = { hostDns: { servers: ["192.168.1.1"], searches: ["corp.example"], options: ["edns0"] }, clusterDns: ["10.96.0.10"], clusterDomain: "cluster.local" };
const pod = (spec: Record<string, unknown> = {}): Pod => ({
  metadata: { name: "p", namespace: "ns", uid: "u" },
  spec: { containers: [{ name: "c", image: "i" }], ...spec } as Pod["spec"],
});

test("parseResolvConf keeps every server, the last search line and options", () => {
  const text = "# comment\nnameserver 1.1.1.1\nnameserver 8.8.8.8 ; x\nnameserver 9.9.9.9\nnameserver 4.4.4.4\nsearch a.com\nsearch b.com c.com\noptions ndots:2 edns0\n";
  expect(parseResolvConf(text)).toEqual({ servers: ["1.1.1.1", "8.8.8.8", "9.9.9.9", "4.4.4.4"], searches: ["b.com", "c.com"], options: ["ndots:2", "edns0"] });
});

describe("podDnsConfig", () => {
  test("ClusterFirst: cluster servers, cluster searches before the node's, ndots:5; host network falls back to the node's", () => {
    expect(podDnsConfig(pod(), node)).toEqual({
      config: { servers: ["10.96.0.10"], searches: ["ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"], options: ["ndots:5"] },
      warnings: [],
    });
    expect(podDnsConfig(pod({ hostNetwork: true }), node).config).toEqual(node.hostDns);
    expect(podDnsConfig(pod({ hostNetwork: true, dnsPolicy: "ClusterFirstWithHostNet" }), node).config.servers).toEqual(["10.96.0.10"]);
  });

  test('resolvConf "": Default pods get 127.0.0.1 and search "."; ClusterFirst gets no node searches', () => {
    const disabled = { ...node, hostDns: { servers: [], searches: [], options: [] }, resolvConfDisabled: true };
    expect(podDnsConfig(pod({ dnsPolicy: "Default" }), disabled).config).toEqual({ servers: ["127.0.0.1"], searches: ["."], options: [] });
    expect(podDnsConfig(pod(), disabled).config.searches).toEqual(["ns.svc.cluster.local", "svc.cluster.local", "cluster.local"]);
  });

  test("ClusterFirst without cluster DNS falls back to Default with a MissingClusterDNS warning", () => {
    const { config, warnings } = podDnsConfig(pod(), { ...node, clusterDns: [] });
    expect(config).toEqual(node.hostDns);
    expect(warnings.map((w) => w.reason)).toEqual(["MissingClusterDNS"]);
  });

  test("dnsConfig merges: servers and searches appended without duplicates, options override by name", () => {
    const { config } = podDnsConfig(
      pod({
        dnsConfig: {
          nameservers: ["1.1.1.1", "10.96.0.10"],
          searches: ["extra.example", "svc.cluster.local"],
          options: [{ name: "ndots", value: "2" }, { name: "single-request" }],
        },
      }),
      node,
    );
    expect(config).toEqual({
      servers: ["10.96.0.10", "1.1.1.1"],
      searches: ["ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "extra.example"],
      options: ["ndots:2", "single-request"],
    });
  });

  test("dnsPolicy None uses only the pod's dnsConfig", () => {
    expect(
      podDnsConfig(pod({ dnsPolicy: "None", dnsConfig: { nameservers: ["9.9.9.9"], searches: ["only.example"], options: [{ name: "timeout", value: "1" }] } }), node).config,
    ).toEqual({
      servers: ["9.9.9.9"],
      searches: ["only.example"],
      options: ["timeout:1"],
    });
  });

  test("limits: 3 nameservers, 32 search domains, 253 characters each, 2048 in all; each cut is a DNSConfigForming warning", () => {
    const many = podDnsConfig(
      pod({ dnsPolicy: "None", dnsConfig: { nameservers: ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"], searches: Array.from({ length: 40 }, (_, i) => `d${i}.example`) } }),
      node,
    );
    expect(many.config.servers).toEqual(["1.1.1.1", "2.2.2.2", "3.3.3.3"]);
    expect(many.config.searches).toHaveLength(32);
    expect(many.warnings).toEqual([
      { reason: "DNSConfigForming", message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1.1.1.1 2.2.2.2 3.3.3.3" },
      {
        reason: "DNSConfigForming",
        message: `Search Line limits were exceeded, some search paths have been omitted, the applied search line is: ${many.config.searches.join(" ")}`,
      },
    ]);
    const long = "a".repeat(250);
    const tooLong = podDnsConfig(pod({ dnsPolicy: "None", dnsConfig: { searches: ["x".repeat(254), ...Array.from({ length: 10 }, (_, i) => `${long}${i}.e`)] } }), node);
    expect(tooLong.config.searches.join(" ").length).toBeLessThanOrEqual(2048);
    expect(tooLong.config.searches).toHaveLength(8); // 8 × 254 + 7 spaces = 2039
    expect(tooLong.config.searches[0]).toBe(`${long}0.e`);
  });
});
