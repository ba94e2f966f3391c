import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeDocuments } from "../../util/decode.ts";
import { upstreamPodDump, upstreamStaticPodUid } from "./index.ts";
import { decodeQuantity } from "./quantity.ts";

// uids.json: what the upstream kubelet v1.34.12 computes for each manifest
// (scripts/staticuid/fixtures.sh runs its code on them).
const dir = join(import.meta.dir, "testdata");
const expected = JSON.parse(readFileSync(join(dir, "uids.json"), "utf8")) as Record<string, { file: string; url: string }>;
const manifests = readdirSync(dir).filter((f) => f !== "uids.json");

describe("upstream static pod UID", () => {
  test("every manifest has an oracle UID", () => {
    expect(manifests.sort()).toEqual(Object.keys(expected).sort());
    expect(manifests.length).toBeGreaterThanOrEqual(17);
  });

  for (const name of manifests) {
    test(`${name}: the file and URL UIDs are upstream's`, () => {
      const text = readFileSync(join(dir, name), "utf8");
      const doc = decodeDocuments(text)[0] as { kind?: string; items?: unknown[] };
      const pods = doc.kind === "PodList" ? doc.items! : [doc];
      const uids = (at: Parameters<typeof upstreamStaticPodUid>[1]) =>
        pods
          .map((p) => upstreamStaticPodUid(p, at))
          .map((r) => (r.ok ? r.uid : `${r.field}: ${r.reason}`))
          .join(",");
      expect(uids({ source: "file", nodeName: "node-1", path: `/etc/kubernetes/manifests/${name}` })).toBe(expected[name]!.file);
      expect(uids({ source: "http", url: `http://config.example/${name}` })).toBe(expected[name]!.url);
    });
  }

  test("the dump is go-spew's for a minimal pod (the shape the hash covers)", () => {
    const dump = upstreamPodDump({ metadata: { name: "web" }, spec: { containers: [{ name: "c", image: "busybox" }] } });
    expect(dump.startsWith("(*core.Pod){TypeMeta:(v1.TypeMeta){Kind:(string) APIVersion:(string)} ObjectMeta:(v1.ObjectMeta){Name:(string)web ")).toBe(true);
    expect(dump).toContain("ImagePullPolicy:(core.PullPolicy)Always");
    expect(dump).toContain("SecurityContext:(*core.PodSecurityContext){HostNetwork:(bool)false");
    expect(dump).toContain("EnableServiceLinks:(*bool)true");
  });

  test("a manifest using what is not modelled names the field instead of a wrong UID", () => {
    const base = { metadata: { name: "p" }, spec: { containers: [{ name: "c", image: "i" }] } };
    const at = { source: "file", nodeName: "n", path: "/m/p.yaml" } as const;
    expect(upstreamStaticPodUid({ ...base, metadata: { name: "p", creationTimestamp: "2024-01-01T00:00:00Z" } }, at)).toMatchObject({
      ok: false,
      field: "metadata.creationTimestamp",
    });
    expect(upstreamStaticPodUid({ ...base, spec: { ...base.spec, resources: { limits: { cpu: "1" } } } }, at)).toMatchObject({ ok: false, field: "spec.resources" });
    expect(upstreamStaticPodUid({ ...base, spec: { ...base.spec, volumes: [{ name: "v", ephemeral: {} }] } }, at)).toMatchObject({ ok: false, field: "spec.volumes[0].ephemeral" });
    expect(upstreamStaticPodUid({ ...base, status: { phase: "Running" } }, at)).toMatchObject({ ok: false, field: "status" });
    expect(upstreamStaticPodUid({ ...base, spec: { containers: [{ name: "c", image: "i", resources: { limits: { cpu: "1x" } } }] } }, at)).toMatchObject({
      ok: false,
      field: "spec.containers[0].resources.limits.cpu",
    });
    expect(upstreamStaticPodUid({ ...base, spec: { containers: [{ name: "c", image: 5 }] } }, at)).toMatchObject({ ok: false, field: "spec.containers[0].image" });
    expect(upstreamStaticPodUid({ ...base, spec: { containers: [{ name: "c", image: "i", resources: { limits: { cpu: 1e-7 } } }] } }, at)).toMatchObject({ ok: false });
    // An integer beyond 2^53 lost digits when parsed here; Go keeps them.
    expect(upstreamStaticPodUid({ ...base, spec: { containers: [{ name: "c", image: "i", resources: { limits: { memory: 2 ** 63 } } }] } }, at)).toMatchObject({
      ok: false,
      field: "spec.containers[0].resources.limits.memory",
    });
    expect(upstreamStaticPodUid({ ...base, spec: { ...base.spec, securityContext: { runAsUser: 2 ** 60 } } }, at)).toMatchObject({
      ok: false,
      field: "spec.securityContext.runAsUser",
    });
    expect(upstreamStaticPodUid(base, at).ok).toBe(true);
  });

  test("quantities: the canonical string is kept, others are rounded to milli", () => {
    expect(decodeQuantity("100m", { roundToMilli: true })).toEqual({ i: { value: 100n, scale: -3 }, d: { Dec: null }, s: "100m", Format: "DecimalSI" });
    expect(decodeQuantity("1n", { roundToMilli: true })).toEqual({ i: { value: 1n, scale: -3 }, d: { Dec: null }, s: "", Format: "DecimalSI" });
    expect(decodeQuantity("1n", { roundToMilli: false })).toEqual({ i: { value: 1n, scale: -9 }, d: { Dec: null }, s: "1n", Format: "DecimalSI" });
    expect(decodeQuantity("1000m", { roundToMilli: true }).s).toBe("");
    expect(decodeQuantity("1.5Gi", { roundToMilli: true }).d.Dec).toEqual({ unscaled: { neg: false, abs: [1610612736000n] }, scale: 3 });
  });
});
