/**
 * The UID the upstream kubelet (v1.34.12, pkg/kubelet/config/common.go
 * applyDefaults) gives a static pod whose manifest sets none: the md5 of
 * go-spew's dump of the decoded internal Pod (dump.ForHash, as
 * hash.DeepHashObject writes it), then `host:<node>file:<path>` for a file
 * or `url:<url>` for a URL; hex. Computing the same UID lets a node switch
 * between upstream's kubelet and this agent without recreating static pods.
 *
 * Defaulting (v1-defaults.ts), conversion (convert.ts), quantities
 * (quantity.ts) and printing (spew.ts) follow upstream; a manifest using
 * something they do not model yields `ok: false` naming the field, so that
 * the caller falls back to its own rule rather than using a wrong UID.
 */
import { createHash } from "node:crypto";
import { convert } from "./convert.ts";
import { UnmodelledField } from "./errors.ts";
import { spewForHash } from "./spew.ts";
import { setPodDefaults } from "./v1-defaults.ts";

export { UnmodelledField } from "./errors.ts";

export type StaticPodLocation = { source: "file"; nodeName: string; path: string } | { source: "http"; url: string };

export type UpstreamUidResult = { ok: true; uid: string } | { ok: false; field: string; reason: string };

/** go-spew's dump of the manifest as upstream decodes it (dump.ForHash of the internal *core.Pod). */
export function upstreamPodDump(manifest: unknown): string {
  if (typeof manifest !== "object" || manifest === null || Array.isArray(manifest)) throw new UnmodelledField("", "the manifest is not an object");
  const pod = structuredClone(manifest) as Record<string, unknown>;
  setPodDefaults(pod);
  return spewForHash("*core.Pod", convert("core.Pod", pod, ""));
}

export function upstreamStaticPodUid(manifest: unknown, at: StaticPodLocation): UpstreamUidResult {
  let dump: string;
  try {
    dump = upstreamPodDump(manifest);
  } catch (err) {
    if (err instanceof UnmodelledField) return { ok: false, field: err.field || "(manifest)", reason: err.reason };
    throw err;
  }
  const hash = createHash("md5").update(dump);
  hash.update(at.source === "file" ? `host:${at.nodeName}file:${at.path}` : `url:${at.url}`);
  return { ok: true, uid: hash.digest("hex") };
}
