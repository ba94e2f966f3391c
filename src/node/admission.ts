/**
 * Pod admission on the node (upstream lifecycle/predicate.go, the kubelet's
 * GeneralPredicates): a pod that does not fit what is left of allocatable,
 * or whose node selector, required node affinity, NoExecute tolerations or
 * host ports do not fit this node, is rejected with upstream's reason and
 * message and never started.
 */
import type { Pod } from "../pods/schema.ts";
import { nodeMatchesTerms, type NodeSelectorTerm } from "../pods/node-selector.ts";
import { isHugePageResourceName } from "../cgroups/hugepages.ts";
import { podRequests as aggregatedRequests } from "../cgroups/resources.ts";

export type AdmitResult = { admit: true } | { admit: false; reason: string; message: string };

/** Node admission of a new pod against the pods already running (upstream canAdmitPod over its admit handlers). */
export interface PodAdmitter {
  admit(pod: Pod, active: Pod[]): AdmitResult;
}

export interface NodeFacts {
  name: string;
  labels: Record<string, string>;
  taints: { key: string; value?: string; effect: string }[];
  /** Allocatable: cpu in millicores, memory and ephemeral-storage in bytes, pods as a count. */
  allocatable: { cpu: number; memory: number; "ephemeral-storage": number; pods: number /** hugepages-<size> → bytes, one per pool. */; hugePages?: Record<string, number> };
}

type Resource = "cpu" | "memory" | "ephemeral-storage";
const RESOURCES: Resource[] = ["cpu", "memory", "ephemeral-storage"];

/**
 * The requests the fit is checked with (the scheduler's
 * computePodResourceRequest, resource.PodRequests): app containers and
 * sidecars summed, at least each init container's peak, the pod's own
 * cpu and memory requests (pod-level resources) in their place where it sets
 * them, plus overhead. Cpu in millicores, the rest in bytes.
 */
export function podRequests(pod: Pod): Record<Resource, number> {
  const all = aggregatedRequests(pod);
  return { cpu: all.cpu ?? 0, memory: all.memory ?? 0, "ephemeral-storage": all["ephemeral-storage"] ?? 0 };
}

/**
 * A pod's hugepages-<size> requests in bytes (the pod's own where it sets them), aggregated as upstream's
 * resource.PodRequests (sidecars summed, init containers at their peak,
 * overhead added; a limit without a request counts as the request, as API
 * defaulting makes it, and the API requires them equal for huge pages).
 */
export function podHugePageRequests(pod: Pod): Record<string, number> {
  return Object.fromEntries(Object.entries(aggregatedRequests(pod)).filter(([name]) => isHugePageResourceName(name)));
}

function fitsResources(pod: Pod, others: Pod[], node: NodeFacts): AdmitResult {
  if (others.length + 1 > node.allocatable.pods) {
    return { admit: false, reason: "OutOfpods", message: `Node didn't have enough resource: pods, requested: 1, used: ${others.length}, capacity: ${node.allocatable.pods}` };
  }
  const wanted = podRequests(pod);
  for (const name of RESOURCES) {
    if (wanted[name] === 0) continue;
    const used = others.map((p) => podRequests(p)[name]).reduce((a, b) => a + b, 0);
    const capacity = node.allocatable[name];
    if (used + wanted[name] > capacity) {
      return {
        admit: false,
        reason: `OutOf${name}`,
        message: `Node didn't have enough resource: ${name}, requested: ${wanted[name]}, used: ${used}, capacity: ${capacity}`,
      };
    }
  }
  // Huge pages are scalar resources of the scheduler's Fits: a size the node has no pool of has capacity 0.
  for (const [name, requested] of Object.entries(podHugePageRequests(pod)).sort(([a], [b]) => a.localeCompare(b))) {
    if (requested === 0) continue;
    const used = others.map((p) => podHugePageRequests(p)[name] ?? 0).reduce((a, b) => a + b, 0);
    const capacity = node.allocatable.hugePages?.[name] ?? 0;
    if (used + requested > capacity) {
      return { admit: false, reason: `OutOf${name}`, message: `Node didn't have enough resource: ${name}, requested: ${requested}, used: ${used}, capacity: ${capacity}` };
    }
  }
  return { admit: true };
}

function matchesNodeSelection(pod: Pod, node: NodeFacts): boolean {
  const selector = ((pod.spec as { nodeSelector?: Record<string, string> }).nodeSelector ?? {}) as Record<string, string>;
  if (!Object.entries(selector).every(([k, v]) => node.labels[k] === v)) return false;
  const terms = (
    pod.spec as {
      affinity?: {
        nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms?: NodeSelectorTerm[] } };
      };
    }
  ).affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  return nodeMatchesTerms(terms, node);
}

type Toleration = { key?: string; operator?: string; value?: string; effect?: string };

function tolerates(tolerations: Toleration[], taint: NodeFacts["taints"][number]): boolean {
  return tolerations.some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.operator === "Exists") return !t.key || t.key === taint.key;
    return t.key === taint.key && (t.value ?? "") === (taint.value ?? "");
  });
}

type HostPort = { protocol: string; ip: string; port: number };

function hostPorts(pod: Pod): HostPort[] {
  return pod.spec.containers.flatMap((c) =>
    (c.ports ?? []).filter((p) => p.hostPort).map((p) => ({ protocol: p.protocol ?? "TCP", ip: p.hostIP || "0.0.0.0", port: p.hostPort! })),
  );
}

/** Same protocol and port, on the same address or either on every address. */
const portsClash = (a: HostPort, b: HostPort) => a.protocol === b.protocol && a.port === b.port && (a.ip === b.ip || a.ip === "0.0.0.0" || b.ip === "0.0.0.0");

/** The node's OS as Kubernetes names it (upstream runtime.GOOS): what `spec.os.name` and the `kubernetes.io/os` label must say. */
export const NODE_OS = process.platform === "win32" ? "windows" : process.platform;

/**
 * Upstream rejectPodAdmissionBasedOnOSSelector and ...OSField: a pod whose
 * `kubernetes.io/os` label (its labels, not its node selector, as upstream)
 * or `spec.os.name` names another OS than the node's is not admitted.
 */
export function admitOs(pod: Pod, nodeOs: string = NODE_OS): AdmitResult {
  const label = pod.metadata.labels?.["kubernetes.io/os"];
  if (label !== undefined && label !== nodeOs) {
    return { admit: false, reason: "PodOSSelectorNodeLabelDoesNotMatch", message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label" };
  }
  if (pod.spec.os && pod.spec.os.name !== nodeOs) return { admit: false, reason: "PodOSNotSupported", message: "Failed to admit pod as the OS field doesn't match node OS" };
  return { admit: true };
}

/** Upstream canAdmitPod with the kubelet's predicates; `others` are the pods already admitted and active. */
export function admitPod(pod: Pod, others: Pod[], node: NodeFacts): AdmitResult {
  const os = admitOs(pod);
  if (!os.admit) return os;
  if (pod.spec.nodeName && pod.spec.nodeName !== node.name) {
    return { admit: false, reason: "NodeName", message: "Predicate NodeName failed: node(s) didn't match the requested node name" };
  }
  if (!matchesNodeSelection(pod, node)) {
    return { admit: false, reason: "NodeAffinity", message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector" };
  }
  const tolerations = ((pod.spec as { tolerations?: Toleration[] }).tolerations ?? []) as Toleration[];
  const untolerated = node.taints.find((t) => t.effect === "NoExecute" && !tolerates(tolerations, t));
  if (untolerated) {
    return { admit: false, reason: "TaintToleration", message: `Predicate TaintToleration failed: node(s) had untolerated taint {${untolerated.key}: ${untolerated.value ?? ""}}` };
  }
  const used = others.flatMap(hostPorts);
  if (hostPorts(pod).some((p) => used.some((u) => portsClash(p, u))))
    return { admit: false, reason: "NodePorts", message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports" };
  return fitsResources(pod, others, node);
}

/** The kubelet's predicates against this node (admitPod) as a PodAdmitter: what a resize must still fit. */
export class NodePredicates implements PodAdmitter {
  constructor(private readonly node: NodeFacts) {}

  admit(pod: Pod, active: Pod[]): AdmitResult {
    return admitPod(pod, active, this.node);
  }
}
