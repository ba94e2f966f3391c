import { describe, expect, test } from "bun:test";
import { EndpointError, parseEndpoint } from "./endpoint.ts";

describe("parseEndpoint", () => {
  const ok: [string, string, boolean][] = [
    ["unix:///run/containerd/containerd.sock", "/run/containerd/containerd.sock", false],
    ["/run/containerd/containerd.sock", "/run/containerd/containerd.sock", true],
    ["unix:/run/crio/crio.sock", "/run/crio/crio.sock", false],
    ["UNIX:///run/x.sock", "/run/x.sock", false],
    ["  unix:///run/x.sock\n", "/run/x.sock", false],
    ["unix:////run//x.sock", "/run/x.sock", false],
  ];
  for (const [input, path, deprecated] of ok) {
    test(`accepts ${JSON.stringify(input)}`, () => {
      expect(parseEndpoint(input)).toEqual({ path, target: `unix://${path}`, deprecatedForm: deprecated });
    });
  }

  const bad: [string, RegExp][] = [
    ["", /empty/],
    ["tcp://127.0.0.1:1234", /protocol "tcp".*only unix/],
    ["npipe:////./pipe/containerd", /protocol "npipe"/],
    ["unix://host/run/x.sock", /host part/],
    ["run/x.sock", /not an absolute path/],
    ["unix:///run/", /directory/],
    ["unix:///", /directory/],
    [`unix:///${"a".repeat(120)}.sock`, /limited to 107/],
  ];
  for (const [input, message] of bad) {
    test(`rejects ${JSON.stringify(input.slice(0, 40))}`, () => {
      expect(() => parseEndpoint(input)).toThrow(EndpointError);
      expect(() => parseEndpoint(input)).toThrow(message);
    });
  }
});
