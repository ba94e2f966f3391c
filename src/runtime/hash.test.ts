import { describe, expect, test } from "bun:test";
import type { ContainerSpec } from "../pods/schema.ts";
import { containerHash, legacyContainerHash, specChange } from "./hash.ts";

const base: ContainerSpec = { name: "web", image: "busybox", command: ["httpd"], args: ["-f"] };

describe("containerHash", () => {
  // Printed by upstream's HashContainer (k8s.io/kubernetes v1.34.12, pkg/kubelet/container) for the same
  // name and image, written as upstream writes io.kubernetes.container.hash (strconv.FormatUint(h, 16)).
  // A change here makes the upstream kubelet and this agent restart each other's containers.
  const upstream: [name: string, image: string, hash: string][] = [
    ["c1", "busybox:1.36", "b47ec1e2"],
    ["app", "localhost/bunlet/busybox:1.0", "58ca1c83"],
    ["web", "registry.example.com:5000/team/nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "7af2626d"],
    ["x", "a<b>&c", "8d3d6ea6"],
    ["uni", "ïmage\u2028é", "28dd82bd"],
    ["q", 'with "quote" and \\back\\ \t tab', "28520db1"],
    ["", "", "edd67cc4"],
  ];
  test.each(upstream)("is upstream's value for %p %p", (name, image, hash) => {
    expect(containerHash({ name, image })).toBe(hash);
  });

  test("depends on the name and image only", () => {
    const other: ContainerSpec = { ...base, resources: { limits: { cpu: "1" } }, env: [{ name: "A", value: "1" }], args: ["-v"] };
    expect(containerHash(other)).toBe(containerHash(base));
    expect(containerHash({ ...base, image: "busybox:2" })).not.toBe(containerHash(base));
    expect(containerHash({ ...base, name: "web2" })).not.toBe(containerHash(base));
  });
});

describe("legacyContainerHash", () => {
  test("is what this agent wrote before: containers it created then are still recognised", () => {
    expect(legacyContainerHash(base)).toBe("95ecc6bd854fd0a9"); // the value the earlier snapshot held
  });
});

describe("specChange", () => {
  test("nothing changed for upstream's hash or this agent's earlier one", () => {
    expect(specChange(base, { hash: containerHash(base), image: "busybox" })).toBeUndefined();
    expect(specChange(base, { hash: legacyContainerHash(base), image: "busybox" })).toBeUndefined();
  });

  test("names the image when the runtime shows another one", () => {
    expect(specChange({ ...base, image: "busybox:2" }, { hash: containerHash(base), image: "busybox" })).toBe('image "busybox" → "busybox:2"');
  });
});
