/**
 * Which devices a container gets, as upstream's devicesToAllocate chooses
 * them (devicemanager/manager.go), without I/O: the plugin's
 * GetPreferredAllocation answer is an input. `plan()` returns the question the
 * plugin would be asked (none when the container's devices are settled
 * without it) and `choose(answer)` the devices.
 *
 *   1. the pod's reusable devices (those of its finished init containers);
 *   2. when the remaining devices fit strictly inside the ones aligned with
 *      the container's NUMA affinity: the plugin's preferred ones among the
 *      aligned, then the other aligned ones (the plugin is asked with the
 *      aligned devices only);
 *   3. otherwise: every aligned device, then the plugin's preferred ones among
 *      all available, then the unaligned, then those without topology.
 *
 * An answer is used for the IDs it names that were offered; the rest of it is
 * ignored and the container's devices are filled up from the fallback order
 * (upstream intersects the answer with the offered set). Within a group
 * devices are taken in ID order (upstream takes them from a Go set).
 */

/** Where a device is relative to the container's NUMA affinity (upstream filterByAffinity). */
export type Placement = "aligned" | "unaligned" | "none";

export interface ChoiceInput {
  resource: string;
  /** Devices the container asks for. */
  required: number;
  /** The pod's devices the container may take over (its plain init containers'), in order. */
  reusable: readonly string[];
  /** Healthy devices no one else holds, sorted. */
  available: readonly string[];
  /** Every device is "none" when the container has no NUMA affinity or the resource no topology. */
  placement: (id: string) => Placement;
}

/** upstream's PreferredAllocationRequest for one container. */
export interface PreferredQuestion {
  available: string[];
  mustInclude: string[];
  size: number;
}

export type Choice = { ok: true; ids: string[] } | { ok: false; error: string };

export interface ChoicePlan {
  /** What GetPreferredAllocation is asked, when the choice depends on it. */
  question: PreferredQuestion | undefined;
  /** The devices, given the plugin's answer (undefined: not asked, the plugin does not offer it). */
  choose(answer: readonly string[] | undefined): Choice;
}

export function planDevices(input: ChoiceInput): ChoicePlan {
  const { required, resource } = input;
  const start: string[] = [];
  const takeInto = (into: string[], ids: Iterable<string>): boolean => {
    for (const id of ids) {
      if (into.length === required) break;
      if (!into.includes(id)) into.push(id);
    }
    return into.length === required;
  };
  const done = (ids: string[]): ChoicePlan => ({ question: undefined, choose: () => ({ ok: true, ids }) });
  if (required <= 0 || takeInto(start, input.reusable)) return done(start);

  const available = input.available.filter((id) => !start.includes(id));
  const needed = required - start.length;
  if (available.length < needed) {
    const error = `requested number of devices unavailable for ${resource}. Requested: ${needed}, Available: ${available.length}`;
    return { question: undefined, choose: () => ({ ok: false, error }) };
  }
  const aligned = available.filter((id) => input.placement(id) === "aligned");
  const unaligned = available.filter((id) => input.placement(id) === "unaligned");
  const none = available.filter((id) => input.placement(id) === "none");
  const short = (got: number): Choice => ({ ok: false, error: `unexpectedly allocated less resources than required. Requested: ${required}, Got: ${got}` });
  const among = (answer: readonly string[] | undefined, offered: readonly string[]) => (answer ?? []).filter((id) => offered.includes(id));

  if (needed < aligned.length) {
    // The plugin chooses inside the aligned devices only.
    return {
      question: { available: [...aligned, ...start], mustInclude: [...start], size: required },
      choose: (answer) => {
        const ids = [...start];
        return takeInto(ids, among(answer, aligned)) || takeInto(ids, aligned) ? { ok: true, ids } : short(ids.length);
      },
    };
  }
  // All aligned devices first, so the topology manager's alignment holds as far as it can.
  const withAligned = [...start];
  if (takeInto(withAligned, aligned)) return done(withAligned);
  return {
    question: { available: [...available.filter((id) => !withAligned.includes(id)), ...withAligned], mustInclude: [...withAligned], size: required },
    choose: (answer) => {
      const ids = [...withAligned];
      return takeInto(ids, among(answer, available)) || takeInto(ids, unaligned) || takeInto(ids, none) ? { ok: true, ids } : short(ids.length);
    },
  };
}
