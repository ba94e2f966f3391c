/**
 * reservedMemory against the host and Node Allocatable (upstream
 * memory_manager.go getSystemReservedMemory and
 * apis/config/validation/validation_reserved_memory.go): the per-NUMA
 * reservations must name existing nodes and supported types, and per type
 * add up to kubeReserved + systemReserved + the hard eviction threshold
 * (memory.available) exactly.
 */
import type { NumaNode } from "../topologymanager/numa.ts";
import { MemoryManagerError, type SystemReserved } from "./policy.ts";
import { parseQuantity } from "../config/quantity.ts";
import { exactQuantity } from "../pods/resource-names.ts";
import { StartupConfigError } from "../util/errors.ts";

export interface MemoryReservationAmounts {
  numaNode: number;
  /** Resource name → bytes, and the text it was written as (for the format of messages). */
  limits: Record<string, { bytes: number; text: string }>;
}

const supported = (name: string) => name === "memory" || /^hugepages-/.test(name);

export interface NodeAllocatableReservation {
  /** Resource name → bytes of kubeReserved + systemReserved + hard eviction, and whether the first part was written with a binary suffix. */
  [name: string]: { bytes: number; binary: boolean };
}

/** upstream getSystemReservedMemory: the reservation per node and type, or why the agent must not start. */
export function systemReservedMemory(nodes: readonly NumaNode[], reservation: NodeAllocatableReservation, reservations: readonly MemoryReservationAmounts[]): SystemReserved {
  const ids = new Set(nodes.map((n) => n.id));
  const totals = new Map<string, { bytes: number; binary: boolean }>();
  for (const r of reservations) {
    if (!ids.has(r.numaNode)) throw new MemoryManagerError(`the reserved memory configuration references a NUMA node ${r.numaNode} that does not exist on this machine`);
    for (const [name, q] of Object.entries(r.limits)) {
      const t = totals.get(name);
      totals.set(name, t ? { bytes: t.bytes + q.bytes, binary: t.binary } : { bytes: q.bytes, binary: /i$/.test(q.text) });
    }
  }
  const types = new Set([...totals.keys(), ...Object.keys(reservation).filter(supported)]);
  for (const name of [...types].sort()) {
    const want = reservation[name] ?? { bytes: 0, binary: false };
    const got = totals.get(name) ?? { bytes: 0, binary: false };
    if (want.bytes !== got.bytes)
      throw new MemoryManagerError(
        `the total amount "${exactQuantity(got.bytes, got.binary)}" of type "${name}" is not equal to the value "${exactQuantity(want.bytes, want.binary)}" determined by Node Allocatable feature`,
      );
  }
  const out = new Map<number, Record<string, number>>();
  for (const n of nodes) out.set(n.id, {});
  for (const r of reservations) for (const [name, q] of Object.entries(r.limits)) out.get(r.numaNode)![name] = q.bytes;
  return out;
}

/**
 * reservedMemory (--reserved-memory) as the configuration holds it, against
 * the host's NUMA nodes and Node Allocatable's reservation; one that does
 * not match stops the agent (exit 2) naming the field and what it must add up to.
 */
export function systemReservedFromConfig(
  nodes: readonly NumaNode[],
  reservation: NodeAllocatableReservation,
  reservedMemory: readonly { numaNode: number; limits: Record<string, string | number> }[],
): SystemReserved {
  const amounts = reservedMemory.map((r) => ({
    numaNode: r.numaNode,
    limits: Object.fromEntries(Object.entries(r.limits).map(([name, q]) => [name, { bytes: parseQuantity(String(q)), text: String(q) }])),
  }));
  try {
    return new Map(systemReservedMemory(nodes, reservation, amounts));
  } catch (err) {
    if (err instanceof MemoryManagerError)
      throw new StartupConfigError(
        `reservedMemory (--reserved-memory): ${err.message} (kubeReserved + systemReserved + evictionHard memory.available; NUMA nodes ${nodes.map((n) => n.id).join(", ")} in /sys/devices/system/node)`,
      );
    throw err;
  }
}
