/**
 * The pod metadata that both env `fieldRef` and downward API volumes can
 * name: name, namespace, uid and one label or annotation by key. Each
 * caller adds what only it supports (env: spec and status fields; volumes:
 * all labels or annotations as a file).
 */
import type { Pod } from "./schema.ts";
import { podUid } from "./identity.ts";

/** The value of a metadata fieldPath, or undefined when `path` is not one of these. */
export function podMetadataField(pod: Pod, path: string): string | undefined {
  switch (path) {
    case "metadata.name":
      return pod.metadata.name ?? "";
    case "metadata.namespace":
      return pod.metadata.namespace ?? "default";
    case "metadata.uid":
      return podUid(pod);
  }
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
  return m ? ((m[1] === "labels" ? pod.metadata.labels : pod.metadata.annotations)?.[m[2]!] ?? "") : undefined;
}
