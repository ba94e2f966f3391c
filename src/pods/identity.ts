/**
 * A pod's identity: the one `{uid, name, namespace}` every subsystem keys
 * pods by (the runtime's labels, stats, events, the workers), built one way.
 * A pod from a manifest may lack a UID until its source defaults it; the
 * empty string stands for "none" as upstream's zero value does.
 */
import type { Pod } from "./schema.ts";

export interface PodRef {
  uid: string;
  name: string;
  namespace: string;
}

interface PodMeta {
  metadata: { name?: string; namespace?: string; uid?: string };
}

export const podUid = (pod: PodMeta): string => pod.metadata.uid ?? "";

export const podRef = (pod: PodMeta): PodRef => ({
  uid: podUid(pod),
  name: pod.metadata.name ?? "",
  namespace: pod.metadata.namespace ?? "default",
});

/** Upstream's kubecontainer.GetPodFullName: `name_namespace`. */
export const podFullName = (pod: Pod): string => `${pod.metadata.name}_${pod.metadata.namespace ?? "default"}`;
