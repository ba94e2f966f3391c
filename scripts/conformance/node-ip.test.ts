import { expect, test } from "bun:test";
import { chooseNodeIP, hostAddresses, nodeIPProblem, routeSource } from "./node-ip.ts";

const routeGet = "1.1.1.1 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0 \n    cache \n";
const addrShow =
  "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n" +
  "4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever preferred_lft forever\n" +
  "9: cni-t1    inet 10.88.0.1/16 brd 10.88.255.255 scope global cni-t1\\       valid_lft forever preferred_lft forever\n";

test("the default route's source address, from ip route get", () => {
  expect(routeSource(routeGet)).toBe("192.0.2.2");
  expect(routeSource("10.0.0.9 dev eth1 src 10.0.0.5 uid 0\n")).toBe("10.0.0.5");
  expect(routeSource("")).toBeUndefined();
  expect(routeSource("RTNETLINK answers: Network is unreachable")).toBeUndefined();
});

test("the host's IPv4 addresses, from ip -o addr show", () => {
  expect(hostAddresses(addrShow)).toEqual(["127.0.0.1", "192.0.2.2", "10.88.0.1"]);
});

test("a node IP is refused as the upstream kubelet's node status setter refuses it", () => {
  const host = hostAddresses(addrShow);
  expect(nodeIPProblem("192.0.2.2", host)).toBeUndefined();
  expect(nodeIPProblem("127.0.0.1", host)).toBe("nodeIP can't be loopback address");
  expect(nodeIPProblem("127.1.2.3", host)).toBe("nodeIP can't be loopback address");
  expect(nodeIPProblem("224.0.0.1", host)).toBe("nodeIP can't be a multicast address");
  expect(nodeIPProblem("169.254.1.1", host)).toBe("nodeIP can't be a link-local unicast address");
  expect(nodeIPProblem("0.0.0.0", host)).toBe("nodeIP can't be an all zeros address");
  expect(nodeIPProblem("192.0.2.3", host)).toBe(`node IP: "192.0.2.3" not found in the host's network interfaces`);
  expect(nodeIPProblem("fe80::1", host)).toContain("is not an IPv4 address");
});

test("the node IP: the given one, else the default route's source; a clear error without one", () => {
  expect(
    chooseNodeIP(
      undefined,
      () => routeGet,
      () => addrShow,
    ),
  ).toBe("192.0.2.2");
  expect(
    chooseNodeIP(
      "10.88.0.1",
      () => routeGet,
      () => addrShow,
    ),
  ).toBe("10.88.0.1");
  expect(() =>
    chooseNodeIP(
      undefined,
      () => "",
      () => addrShow,
    ),
  ).toThrow(/names no source address .*--node-ip=IP/);
  expect(() =>
    chooseNodeIP(
      "127.0.0.1",
      () => routeGet,
      () => addrShow,
    ),
  ).toThrow("node IP 127.0.0.1 (--node-ip) is not usable: nodeIP can't be loopback address");
  expect(() =>
    chooseNodeIP(
      undefined,
      () => "1.1.1.1 dev lo src 127.0.0.1",
      () => addrShow,
    ),
  ).toThrow("node IP 127.0.0.1 (the default route's source) is not usable: nodeIP can't be loopback address");
});
