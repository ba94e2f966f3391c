/**
 * upstream validateReservedMemoryConfiguration (apis/config/validation): what
 * is wrong with the reservedMemory list itself, before the memory manager
 * checks it against the host's NUMA nodes and Node Allocatable
 * (src/memorymanager/reserved.ts).
 */
import type { KubeletConfiguration } from "./kubelet-config.ts";
import { parseQuantity } from "./quantity.ts";

const supported = (name: string) => name === "memory" || /^hugepages-/.test(name);

/** upstream validateReservedMemoryConfiguration: what is wrong with the list itself, one message each. */
export function reservedMemoryConfigErrors(reservations: KubeletConfiguration["reservedMemory"]): string[] {
  const errors: string[] = [];
  const seen = new Map<number, Set<string>>();
  for (const r of reservations) {
    const names = seen.get(r.numaNode) ?? new Set<string>();
    seen.set(r.numaNode, names);
    for (const [name, q] of Object.entries(r.limits)) {
      if (!supported(name))
        errors.push(`invalid configuration: the limit type "${name}" for NUMA node ${r.numaNode} is not supported, only [memory hugepages-<HugePageSize>] is accepted`);
      if (parseQuantity(String(q)) === 0) errors.push(`invalid configuration: reserved memory may not be zero for NUMA node ${r.numaNode} and resource "${name}"`);
      if (names.has(name)) errors.push(`invalid configuration: the reserved memory has a duplicate value for NUMA node ${r.numaNode} and resource "${name}"`);
      names.add(name);
    }
  }
  return errors;
}
