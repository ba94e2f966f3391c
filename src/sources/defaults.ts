import { createHash } from "node:crypto";
import type { Pod } from "../pods/schema.ts";
import type { Logger } from "../util/log.ts";
import { ConfigHashAnnotation, ConfigSourceAnnotation } from "../pods/source.ts";
import { canonicalJson } from "../util/canonical-json.ts";
import { upstreamStaticPodUid } from "./upstream-uid/index.ts";

/** Why a static pod's UID is not upstream's: logged by the sources, once per manifest change. */
export type StaticUidNote = { kind: "unmodelled"; field: string; reason: string } | { kind: "kept-running"; uid: string; upstreamUid: string };

export interface StaticPodDefaultsOptions {
  nodeName: string;
  source: "file" | "http";
  location: string;
  /** The manifest as decoded (before parsePod), for upstream's UID; without it, this agent's own rule. */
  manifest?: unknown;
  /** Pod UIDs the container runtime has sandboxes for when the agent started. */
  runtimePodUids?: ReadonlySet<string>;
  onUidNote?: (note: StaticUidNote) => void;
}

/** The UID rule of this agent before it computed upstream's: sha256 of canonical JSON of the parsed pod. */
export function legacyStaticPodUid(pod: Pod, opts: { nodeName: string; source: "file" | "http"; location: string }): string {
  const hash = createHash("sha256");
  hash.update(canonicalJson(pod));
  hash.update(opts.source === "file" ? `host:${opts.nodeName}file:${opts.location}` : `url:${opts.location}`);
  return hash.digest("hex").slice(0, 32);
}

/**
 * A static pod's UID when its manifest sets none: the upstream kubelet's
 * (upstream-uid/), so a node switches between the two without recreating its
 * static pods. Two exceptions keep this agent's earlier rule: a manifest using
 * what upstream-uid does not model (never a wrong "upstream" UID), and a pod
 * the runtime already runs under the earlier rule's UID (an upgrade of this
 * agent restarts nothing; the pod moves to upstream's UID when its manifest
 * next changes, since both UIDs change then).
 */
export function staticPodUid(pod: Pod, opts: StaticPodDefaultsOptions): string {
  const legacy = legacyStaticPodUid(pod, opts);
  if (opts.manifest === undefined) return legacy;
  let upstream: ReturnType<typeof upstreamStaticPodUid>;
  try {
    upstream = upstreamStaticPodUid(
      opts.manifest,
      opts.source === "file" ? { source: "file", nodeName: opts.nodeName, path: opts.location } : { source: "http", url: opts.location },
    );
  } catch (err) {
    // A defect of upstream-uid/ on some input must not stop the pod: its earlier rule still names it.
    upstream = { ok: false, field: "(manifest)", reason: `computing upstream's UID failed: ${(err as Error).message}` };
  }
  if (!upstream.ok) {
    opts.onUidNote?.({ kind: "unmodelled", field: upstream.field, reason: upstream.reason });
    return legacy;
  }
  if (opts.runtimePodUids?.has(legacy) && !opts.runtimePodUids.has(upstream.uid)) {
    opts.onUidNote?.({ kind: "kept-running", uid: legacy, upstreamUid: upstream.uid });
    return legacy;
  }
  return upstream.uid;
}

/**
 * Static pod defaults as upstream applies them (pkg/kubelet/config/common.go):
 * the UID (when the manifest sets none) is a hash of the manifest, the node
 * and the file (staticPodUid), so it is stable across agent restarts and
 * changes whenever the manifest does; the name gets the node name as suffix;
 * the pod is bound to this node.
 */
export function applyStaticPodDefaults(pod: Pod, opts: StaticPodDefaultsOptions): Pod {
  const copy: Pod = structuredClone(pod);
  if (!copy.metadata.uid) copy.metadata.uid = staticPodUid(pod, opts);
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

/** The log line for a static pod whose UID is not upstream's. */
export function logUidNote(logger: Logger, where: Record<string, string>, note: StaticUidNote): void {
  if (note.kind === "unmodelled") {
    logger.warn(
      "static pod UID: upstream's rule is not modelled for a field of this manifest, so this agent's own rule applies (switching to or from the upstream kubelet recreates this pod)",
      { ...where, field: note.field, reason: note.reason },
    );
  } else {
    logger.info("static pod keeps the UID it runs under (this agent's earlier rule) rather than the upstream kubelet's; it takes upstream's when its manifest changes", {
      ...where,
      uid: note.uid,
      upstreamUid: note.upstreamUid,
    });
  }
}
