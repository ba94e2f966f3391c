import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parsePod } from "../pods/schema.ts";
import { decodeDocuments } from "../util/decode.ts";
import { legacyStaticPodUid } from "./defaults.ts";
import { parseManifest } from "./file.ts";
import { podsFromBody } from "./url.ts";

const testdata = join(import.meta.dir, "upstream-uid", "testdata");
const oracle = JSON.parse(readFileSync(join(testdata, "uids.json"), "utf8")) as Record<string, { file: string; url: string }>;

function manifest(name: string): string {
  return readFileSync(join(testdata, name), "utf8");
}

describe("static pod UIDs of the file and URL sources", () => {
  test("a manifest without a UID gets the upstream kubelet's, and the config hash annotation says it", () => {
    const r = parseManifest(manifest("kubeadm-apiserver.yaml"), { file: "/etc/kubernetes/manifests/kubeadm-apiserver.yaml", nodeName: "node-1" });
    if (!r.ok) throw new Error(r.error);
    expect(r.pod.metadata.uid).toBe(oracle["kubeadm-apiserver.yaml"]!.file);
    expect(r.pod.metadata.annotations?.["kubernetes.io/config.hash"]).toBe(oracle["kubeadm-apiserver.yaml"]!.file);
    expect(r.uidNote).toBeUndefined();
    const u = podsFromBody(manifest("probes.yaml"), { url: "http://config.example/probes.yaml", nodeName: "node-1" });
    if (!u.ok) throw new Error(u.error);
    expect(u.pods[0]!.metadata.uid).toBe(oracle["probes.yaml"]!.url);
    expect(u.uidNotes).toEqual([]);
    const list = podsFromBody(manifest("podlist.yaml"), { url: "http://config.example/podlist.yaml", nodeName: "node-1" });
    if (!list.ok) throw new Error(list.error);
    expect(list.pods.map((p) => p.metadata.uid).join(",")).toBe(oracle["podlist.yaml"]!.url);
  });

  test("a manifest's own UID wins", () => {
    const r = parseManifest('{"metadata":{"name":"p","uid":"given"},"spec":{"containers":[{"name":"c","image":"i"}]}}', { file: "/m/p.json", nodeName: "n" });
    expect(r.ok && r.pod.metadata.uid).toBe("given");
  });

  test("a pod the runtime runs under this agent's earlier UID keeps it; otherwise upstream's", () => {
    const text = manifest("minimal.yaml");
    const opts = { file: "/etc/kubernetes/manifests/minimal.yaml", nodeName: "node-1" };
    const parsed = parsePod(decodeDocuments(text)[0]);
    if (!parsed.ok) throw new Error(parsed.error);
    const legacy = legacyStaticPodUid(parsed.value, { nodeName: "node-1", source: "file", location: opts.file });
    expect(legacy).not.toBe(oracle["minimal.yaml"]!.file);
    const kept = parseManifest(text, { ...opts, runtimePodUids: new Set([legacy, "other"]) });
    expect(kept.ok && kept.pod.metadata.uid).toBe(legacy);
    expect(kept.ok && kept.uidNote).toEqual({ kind: "kept-running", uid: legacy, upstreamUid: oracle["minimal.yaml"]!.file });
    // Upstream's UID already running (a node taken over from the upstream kubelet): upstream's.
    const both = parseManifest(text, { ...opts, runtimePodUids: new Set([legacy, oracle["minimal.yaml"]!.file]) });
    expect(both.ok && both.pod.metadata.uid).toBe(oracle["minimal.yaml"]!.file);
    const fresh = parseManifest(text, { ...opts, runtimePodUids: new Set(["other"]) });
    expect(fresh.ok && fresh.pod.metadata.uid).toBe(oracle["minimal.yaml"]!.file);
  });

  test("a manifest using what is not modelled keeps this agent's own rule and says which field", () => {
    const text = "metadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: i\n  volumes:\n  - name: v\n    ephemeral: {}\n";
    const r = parseManifest(text, { file: "/m/p.yaml", nodeName: "n" });
    if (!r.ok) throw new Error(r.error);
    const parsed = parsePod(decodeDocuments(text)[0]);
    expect(parsed.ok && r.pod.metadata.uid).toBe(parsed.ok ? legacyStaticPodUid(parsed.value, { nodeName: "n", source: "file", location: "/m/p.yaml" }) : "");
    expect(r.uidNote).toMatchObject({ kind: "unmodelled", field: "spec.volumes[0].ephemeral" });
    // YAML 1.1 scalars decode as upstream decodes them (util/yaml11.ts), so they need no exception (testdata/yaml11-scalars.yaml).
    const octal = parseManifest(
      "metadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: i\n  volumes:\n  - name: s\n    secret:\n      secretName: s\n      defaultMode: 0400\n",
      { file: "/m/p.yaml", nodeName: "n" },
    );
    expect(octal.ok && octal.uidNote).toBeUndefined();
    expect(octal.ok && octal.pod.spec.volumes?.[0]?.secret?.defaultMode).toBe(0o400);
  });
});
