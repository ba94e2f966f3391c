import { createHash } from "node:crypto";
import type { Pod } from "../pods/schema.ts";
import { ConfigHashAnnotation, ConfigSourceAnnotation } from "../pods/source.ts";
import { canonicalJson } from "../util/canonical-json.ts";

/**
 * Static pod defaults as upstream applies them (pkg/kubelet/config/common.go):
 * the UID is a hash of the manifest, the node and the file, so it is stable
 * across agent restarts and changes whenever the manifest does; the name
 * gets the node name as suffix; the pod is bound to this node.
 */
export function applyStaticPodDefaults(pod: Pod, opts: { nodeName: string; source: "file" | "http"; location: string }): Pod {
  const copy: Pod = structuredClone(pod);
  if (!copy.metadata.uid) {
    const hash = createHash("sha256");
    hash.update(canonicalJson(pod));
    hash.update(opts.source === "file" ? `host:${opts.nodeName}file:${opts.location}` : `url:${opts.location}`);
    copy.metadata.uid = hash.digest("hex").slice(0, 32);
  }
  copy.metadata.name = `${copy.metadata.name}-${opts.nodeName}`;
  copy.metadata.namespace ||= "default";
  copy.spec.nodeName = opts.nodeName;
  copy.metadata.annotations = {
    ...copy.metadata.annotations,
    [ConfigHashAnnotation]: copy.metadata.uid,
    [ConfigSourceAnnotation]: opts.source,
  };
  return copy;
}
