/**
 * The topology manager's admission (upstream topologymanager scope*.go): for
 * each container (scope "container") or once for the whole pod (scope "pod")
 * it asks every hint provider for its hints, merges them with the policy,
 * refuses the pod with TopologyAffinityError when the policy says so, and
 * then lets each provider allocate with the chosen hint. With policy "none"
 * nothing is merged: each provider allocates without a hint.
 */
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { Logger } from "../util/log.ts";
import { bitsOf, mergePolicy, type NumaInfo, type PolicyName, type PolicyOptions, type ProviderHints, type TopologyHint } from "./policy.ts";

export type TopologyAdmitResult = { admit: true } | { admit: false; reason: string; message: string };

/**
 * Why a provider could not allocate: an admission error of its own (upstream's
 * admission.Error, e.g. SMTAlignmentError) or a message that is reported as
 * UnexpectedAdmissionError.
 */
export type AllocateFailure = string | { reason: string; message: string };

/** A resource manager that takes part in alignment (upstream HintProvider): the device, CPU and memory managers, in that order. */
export interface HintProvider {
  containerHints(pod: Pod, container: ContainerSpec): ProviderHints;
  podHints(pod: Pod): ProviderHints;
  /** Allocates with the merged hint (undefined: no hint, policy "none"); why it failed, or undefined. */
  allocate(pod: Pod, container: ContainerSpec, hint: TopologyHint | undefined): AllocateFailure | undefined;
  /** An admission of the pod starts: what allocate() gives from now on is what rollback() gives back. */
  beginAdmission?(pod: Pod): void;
  /** The pod was not admitted: what this admission allocated to it is given back. */
  rollback?(pod: Pod): void;
}

export type Scope = "container" | "pod";

export interface TopologyManagerOptions {
  policy: PolicyName;
  scope: Scope;
  options: PolicyOptions;
  numa: NumaInfo;
  providers: readonly HintProvider[];
  logger: Logger;
}

export const TOPOLOGY_AFFINITY_ERROR = { reason: "TopologyAffinityError", message: "Resources cannot be allocated with Topology locality" } as const;

const failure = (err: AllocateFailure): TopologyAdmitResult =>
  typeof err === "string" ? { admit: false, reason: "UnexpectedAdmissionError", message: `Allocate failed due to ${err}, which is unexpected` } : { admit: false, ...err };

const allContainers = (pod: Pod): ContainerSpec[] => [...(pod.spec.initContainers ?? []), ...pod.spec.containers];

export class TopologyManager {
  constructor(private readonly o: TopologyManagerOptions) {}

  get policy(): PolicyName {
    return this.o.policy;
  }

  admit(pod: Pod): TopologyAdmitResult {
    for (const p of this.o.providers) p.beginAdmission?.(pod);
    const result = this.admitAligned(pod);
    if (!result.admit) for (const p of this.o.providers) p.rollback?.(pod);
    return result;
  }

  private admitAligned(pod: Pod): TopologyAdmitResult {
    const { policy, scope, providers } = this.o;
    const allocate = (c: ContainerSpec, hint: TopologyHint | undefined): TopologyAdmitResult | undefined => {
      for (const p of providers) {
        const err = p.allocate(pod, c, hint);
        if (err !== undefined) return failure(err);
      }
      return undefined;
    };
    if (policy === "none") {
      for (const c of allContainers(pod)) {
        const failed = allocate(c, undefined);
        if (failed) return failed;
      }
      return { admit: true };
    }
    const merge = (hints: ProviderHints[]) => mergePolicy(policy, this.o.numa, this.o.options, hints);
    const refuse = (hint: TopologyHint, container?: string): TopologyAdmitResult => {
      this.o.logger.warn("topology manager: pod not admitted", { pod: pod.metadata.name, ...(container ? { container } : {}), policy, scope, hint: describe(hint) });
      return { admit: false, ...TOPOLOGY_AFFINITY_ERROR };
    };
    if (scope === "pod") {
      const { hint, admit } = merge(providers.map((p) => p.podHints(pod)));
      if (!admit) return refuse(hint);
      for (const c of allContainers(pod)) {
        const failed = allocate(c, hint);
        if (failed) return failed;
      }
      return { admit: true };
    }
    for (const c of allContainers(pod)) {
      const { hint, admit } = merge(providers.map((p) => p.containerHints(pod, c)));
      if (!admit) return refuse(hint, c.name);
      const failed = allocate(c, hint);
      if (failed) return failed;
    }
    return { admit: true };
  }
}

/** A hint as upstream logs it: {0 1} preferred=true; {} for no preference. */
export function describe(h: TopologyHint): string {
  return `{${h.affinity === undefined ? "" : bitsOf(h.affinity).join(" ")}} preferred=${h.preferred}`;
}
