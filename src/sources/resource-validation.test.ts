import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { parseManifest } from "./file.ts";
import { podsFromBody } from "./url.ts";
import { invalidPodMessage, podResourceErrors, quantityString, resourceRequirementErrors } from "./resource-validation.ts";

const C = "spec.containers[0].resources";

describe("the API server's validation of resources that cannot be overcommitted (upstream validateResourceRequirements)", () => {
  test.each([
    ["huge pages with memory, limit only (the request defaults to it)", { limits: { memory: "64Mi", "hugepages-2Mi": "4Mi" } }, []],
    ["huge pages with cpu, request equal to limit", { limits: { cpu: "1", "hugepages-2Mi": "4Mi" }, requests: { "hugepages-2Mi": "4194304" } }, []],
    [
      "a huge page request below its limit",
      { limits: { memory: "64Mi", "hugepages-2Mi": "4Mi" }, requests: { "hugepages-2Mi": "2Mi" } },
      [`${C}.requests: Invalid value: "2Mi": must be equal to hugepages-2Mi limit of 4Mi`],
    ],
    [
      "a huge page request without a limit",
      { requests: { memory: "64Mi", "hugepages-2Mi": "2Mi" } },
      [`${C}.limits: Required value: Limit must be set for non overcommitable resources`],
    ],
    ["huge pages without cpu or memory", { limits: { "hugepages-1Gi": "1Gi" } }, [`${C}: Forbidden: HugePages require cpu or memory`]],
    [
      "an amount that is not a whole number of pages (limit and the request defaulted from it)",
      { limits: { memory: "64Mi", "hugepages-2Mi": "3Mi" } },
      [
        `${C}.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi`,
        `${C}.requests[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi`,
      ],
    ],
    [
      "an extended resource request below its limit",
      { limits: { "example.com/dev": "2" }, requests: { "example.com/dev": "1" } },
      [`${C}.requests: Invalid value: "1": must be equal to example.com/dev limit of 2`],
    ],
    ["cpu and memory may be overcommitted", { limits: { cpu: "2", memory: "1Gi" }, requests: { cpu: "500m", memory: "64Mi" } }, []],
  ] as const)("%s", (_what, resources, errors) => {
    expect(resourceRequirementErrors(resources, C)).toEqual([...errors]);
  });

  test("quantities print as resource.Quantity's String()", () => {
    expect([quantityString("2048Ki"), quantityString("4194304"), quantityString("4000000"), quantityString("1536Mi"), quantityString("500m")]).toEqual([
      "2Mi",
      "4194304",
      "4M",
      "1536Mi",
      "500m",
    ]);
  });

  test("init containers too, each at its path; upstream's decode error", () => {
    const pod = {
      metadata: { name: "p" },
      spec: {
        initContainers: [{ name: "i", image: "x", resources: { limits: { "hugepages-2Mi": "2Mi" } } }],
        containers: [{ name: "c", image: "x", resources: { limits: { memory: "1Gi", "hugepages-2Mi": "4Mi" }, requests: { "hugepages-2Mi": "2Mi" } } }],
      },
    } as unknown as Pod;
    const errors = podResourceErrors(pod);
    expect(errors).toEqual([
      "spec.initContainers[0].resources: Forbidden: HugePages require cpu or memory",
      `${C}.requests: Invalid value: "2Mi": must be equal to hugepages-2Mi limit of 4Mi`,
    ]);
    expect(invalidPodMessage(errors)).toBe(
      'invalid pod: [spec.initContainers[0].resources: Forbidden: HugePages require cpu or memory spec.containers[0].resources.requests: Invalid value: "2Mi": must be equal to hugepages-2Mi limit of 4Mi]',
    );
  });

  test("pod-level spec.resources is left alone, as the kubelet's validation of static pods (PodLevelResourcesEnabled off) leaves it", () => {
    const pod = {
      metadata: { name: "p" },
      spec: { resources: { limits: { "hugepages-2Mi": "2Mi" }, requests: { "hugepages-2Mi": "4Mi" } }, containers: [{ name: "c", image: "x" }] },
    } as unknown as Pod;
    expect(podResourceErrors(pod)).toEqual([]);
  });

  test("a static pod manifest (file or URL) failing it is refused with that error, as upstream skips it", () => {
    const manifest = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "hp" },
      spec: { containers: [{ name: "c", image: "x", resources: { limits: { "hugepages-2Mi": "2Mi" } } }] },
    };
    expect(parseManifest(JSON.stringify(manifest), { file: "/m/hp.json", nodeName: "n" })).toEqual({
      ok: false,
      error: `invalid pod: [${C}: Forbidden: HugePages require cpu or memory]`,
    });
    expect(podsFromBody(JSON.stringify({ kind: "PodList", items: [manifest] }), { url: "http://x", nodeName: "n" })).toEqual({
      ok: false,
      error: `items[0]: invalid pod: [${C}: Forbidden: HugePages require cpu or memory]`,
    });
    const fine = { ...manifest, spec: { containers: [{ name: "c", image: "x", resources: { limits: { memory: "64Mi", "hugepages-2Mi": "2Mi" } } }] } };
    expect(parseManifest(JSON.stringify(fine), { file: "/m/hp.json", nodeName: "n" })).toMatchObject({ ok: true });
  });
});
