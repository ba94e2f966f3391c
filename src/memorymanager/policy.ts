/**
 * The memory manager's policies (upstream memorymanager policy_none.go and
 * policy_static.go) over one state written to the state file after every
 * change.
 *
 * Static: each NUMA node's memory (and huge pages of each size) minus what
 * reservedMemory reserves on it is allocatable. A container of a Guaranteed
 * pod gets its memory and huge pages requests as blocks pinned to the NUMA
 * nodes of the topology manager's hint (or of the narrowest set of nodes
 * with enough free memory), and runs with cpuset.mems on those nodes. Nodes
 * used together by one container form a group that no other container
 * shares partly. Plain init containers hand their memory on to the pod's
 * next containers. A container keeps its blocks until its pod is no longer
 * active.
 */
import { podQosClass } from "../cgroups/qos.ts";
import { containerRequests } from "../cgroups/resources.ts";
import { podLevelResourcesSet } from "../cgroups/pod-resources.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { podUid } from "../pods/identity.ts";
import { staleContainerEntries } from "../pods/active.ts";
import { bitsOf, countOf, isNarrower, maskOf, type NumaMask, type ProviderHints, type TopologyHint } from "../topologymanager/index.ts";
import type { NumaNode } from "../topologymanager/numa.ts";
import { hugePageResourceName } from "../pods/resource-names.ts";
import {
  type Assignments,
  type Block,
  CheckpointError,
  decodeCheckpoint,
  encodeCheckpoint,
  type MachineState,
  type MemoryManagerState,
  type MemoryTable,
  type StateStore,
} from "./checkpoint.ts";

export type MemoryPolicyName = "None" | "Static";

/** The memory manager cannot start with this configuration or state: the agent does not start (upstream: NewContainerManager fails). */
export class MemoryManagerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MemoryManagerError";
  }
}

/** NUMA node id → resource name → bytes reserved there (reservedMemory). */
export type SystemReserved = ReadonlyMap<number, Readonly<Record<string, number>>>;

export interface MemoryPolicyConfig {
  policy: MemoryPolicyName;
  nodes: readonly NumaNode[];
  systemReserved: SystemReserved;
  store: StateStore;
  /** The state file's path, for messages. */
  statePath: string;
  /** PodLevelResources gate: a pod with spec.resources is not pinned (upstream). */
  podLevelResources: boolean;
}

type Requests = Map<string, number>;

const isMemoryResource = (name: string) => name === "memory" || name.startsWith("hugepages-");
const isRestartableInit = (pod: Pod, c: ContainerSpec) => c.restartPolicy === "Always" && (pod.spec.initContainers ?? []).includes(c);
const isRegularInit = (pod: Pod, c: ContainerSpec) => (pod.spec.initContainers ?? []).some((i) => i.name === c.name && i.restartPolicy !== "Always");
const sameGroup = (a: readonly number[] | null, b: readonly number[] | null) => {
  const x = [...(a ?? [])].sort((p, q) => p - q);
  const y = [...(b ?? [])].sort((p, q) => p - q);
  return x.length === y.length && x.every((v, i) => v === y[i]);
};

/** upstream getRequestedResources: a container's memory and huge pages requests (limits stand in for absent requests, as the API server defaults them). */
export function requestedMemory(c: ContainerSpec): Requests {
  const out: Requests = new Map();
  for (const [name, v] of Object.entries(containerRequests(c))) if (isMemoryResource(name)) out.set(name, v);
  return out;
}

/** upstream getPodRequestedResources: sidecars and app containers add up; a plain init container runs with the sidecars before it. */
export function podRequestedMemory(pod: Pod): Requests {
  const init = new Map<string, number>();
  const restartable = new Map<string, number>();
  for (const c of pod.spec.initContainers ?? []) {
    for (const [name, q] of requestedMemory(c)) {
      if (!init.has(name)) init.set(name, 0);
      if (isRestartableInit(pod, c)) restartable.set(name, (restartable.get(name) ?? 0) + q);
      else if ((restartable.get(name) ?? 0) + q > init.get(name)!) init.set(name, (restartable.get(name) ?? 0) + q);
    }
  }
  const app = new Map<string, number>();
  for (const c of pod.spec.containers) for (const [name, q] of requestedMemory(c)) app.set(name, (app.get(name) ?? 0) + q);
  const out: Requests = new Map();
  for (const [name, q] of app) out.set(name, Math.max(q + (restartable.get(name) ?? 0), init.get(name) ?? 0));
  return out;
}

/** upstream findBestHint: preferred first, then the narrowest. */
function bestHint(hints: readonly TopologyHint[]): TopologyHint {
  let best: TopologyHint = { affinity: undefined, preferred: false };
  for (const h of hints) {
    if (best.affinity === undefined) best = h;
    else if (h.preferred && !best.preferred) best = h;
    else if (h.preferred === best.preferred && h.affinity !== undefined && isNarrower(h.affinity, best.affinity)) best = h;
  }
  return best;
}

/** Every non-empty subset of `nodes`, smallest first (upstream bitmask.IterateBitMasks). */
function* subsets(nodes: readonly number[]): Generator<number[]> {
  function* take(from: readonly number[], accum: number[], size: number): Generator<number[]> {
    if (accum.length === size) {
      yield accum;
      return;
    }
    for (let i = 0; i < from.length; i++) yield* take(from.slice(i + 1), [...accum, from[i]!], size);
  }
  for (let size = 1; size <= nodes.length; size++) yield* take(nodes, [], size);
}

export class MemoryPolicy {
  private state: MemoryManagerState;
  /** Pod UID → NUMA mask → resource → bytes its finished init containers hand on (upstream initContainersReusableMemory; one pod at a time). */
  private reusable = new Map<string, Map<NumaMask, Map<string, number>>>();

  constructor(private readonly cfg: MemoryPolicyConfig) {
    if (cfg.policy === "Static") {
      let total = 0;
      for (const r of cfg.systemReserved.values()) total += r["memory"] ?? 0;
      if (total <= 0) throw new MemoryManagerError("[memorymanager] you should specify the system reserved memory");
    }
    this.state = this.restore();
    this.save();
  }

  get name(): MemoryPolicyName {
    return this.cfg.policy;
  }

  snapshot(): MemoryManagerState {
    return { policyName: this.state.policyName, machineState: structuredClone(this.state.machineState), entries: structuredClone(this.state.entries) };
  }

  private restore(): MemoryManagerState {
    const text = this.cfg.store.read();
    let s: MemoryManagerState = { policyName: this.cfg.policy, machineState: new Map(), entries: {} };
    const fail = (why: string) =>
      new MemoryManagerError(
        `could not restore state from checkpoint: ${why}, please drain this node and delete the memory manager checkpoint file "${this.cfg.statePath}" before restarting Kubelet`,
      );
    if (text !== undefined) {
      try {
        s = decodeCheckpoint(text);
      } catch (err) {
        if (err instanceof CheckpointError) throw fail(err.message);
        throw err;
      }
      if (s.policyName !== this.cfg.policy) throw fail(`[memorymanager] configured policy "${this.cfg.policy}" differs from state checkpoint policy "${s.policyName}"`);
    }
    if (this.cfg.policy === "Static") {
      const why = this.validate(s);
      if (why) throw new MemoryManagerError(`${why} (invalid state, please drain node and remove policy state file "${this.cfg.statePath}")`);
    }
    return s;
  }

  private save(): void {
    this.cfg.store.write(encodeCheckpoint(this.state));
  }

  /** upstream getDefaultMachineState: every node's tables from sysfs and reservedMemory. */
  defaultMachineState(): MachineState {
    const out: MachineState = new Map();
    const reserved = (id: number, name: string) => this.cfg.systemReserved.get(id)?.[name] ?? 0;
    for (const node of this.cfg.nodes) {
      const memoryMap: Record<string, MemoryTable> = {};
      let hugeTotal = 0;
      for (const hp of node.hugePages) {
        const name = hugePageResourceName(hp.pageSizeKiB);
        const total = hp.numPages * hp.pageSizeKiB * 1024;
        const allocatable = total - reserved(node.id, name);
        memoryMap[name] = { total, systemReserved: reserved(node.id, name), allocatable, reserved: 0, free: allocatable };
        hugeTotal += total;
      }
      const allocatable = node.memoryBytes - reserved(node.id, "memory") - hugeTotal;
      memoryMap["memory"] = { total: node.memoryBytes, systemReserved: reserved(node.id, "memory"), allocatable, reserved: 0, free: allocatable };
      out.set(node.id, { numberOfAssignments: 0, memoryMap, cells: [node.id] });
    }
    return out;
  }

  /** upstream staticPolicy.validateState: the stored tables must be what the host and the assignments give; an empty state starts fresh. */
  private validate(s: MemoryManagerState): string | undefined {
    const blocksCount = Object.keys(s.entries).length;
    if (s.machineState.size === 0) {
      if (blocksCount) return "[memorymanager] machine state can not be empty when it has memory assignments";
      s.machineState = this.defaultMachineState();
      return undefined;
    }
    const expected = this.defaultMachineState();
    for (const [uid, cs] of Object.entries(s.entries))
      for (const [name, blocks] of Object.entries(cs))
        for (const b of blocks ?? []) {
          let size = b.size;
          for (const id of b.numaAffinity ?? []) {
            const node = expected.get(id);
            if (!node) return `[memorymanager] (pod: ${uid}, container: ${name}) the memory assignment uses the NUMA that does not exist`;
            node.numberOfAssignments++;
            node.cells = b.numaAffinity;
            const t = node.memoryMap?.[b.type];
            if (!t) return `[memorymanager] (pod: ${uid}, container: ${name}) the memory assignment uses memory resource that does not exist`;
            if (size === 0 || t.free <= 0) continue;
            const took = Math.min(t.free, size);
            t.reserved += took;
            t.free -= took;
            size -= took;
          }
        }
    if (!machineStatesEqual(s.machineState, expected)) return "[memorymanager] the expected machine state is different from the real one";
    return undefined;
  }

  /** The NUMA nodes a container's memory is pinned to (upstream GetMemoryNUMANodes); empty: none. */
  numaNodesOf(podUid: string, container: string): number[] {
    const set = new Set<number>();
    for (const b of this.state.entries[podUid]?.[container] ?? []) for (const id of b.numaAffinity ?? []) set.add(id);
    return [...set].sort((a, b) => a - b);
  }

  /** upstream GetMemory: a container's blocks. */
  blocksOf(podUid: string, container: string): readonly Block[] {
    return this.state.entries[podUid]?.[container] ?? [];
  }

  /** upstream GetAllocatableMemory: each node's allocatable amount per type (those not zero). */
  allocatableBlocks(): Block[] {
    const out: Block[] = [];
    for (const id of [...this.state.machineState.keys()].sort((a, b) => a - b))
      for (const [type, t] of Object.entries(this.state.machineState.get(id)!.memoryMap ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
        if (t.allocatable !== 0) out.push({ numaAffinity: [id], type, size: t.allocatable });
    return out;
  }

  private pinned(pod: Pod): boolean {
    if (this.cfg.policy !== "Static" || podQosClass(pod) !== "Guaranteed") return false;
    return !(this.cfg.podLevelResources && podLevelResourcesSet(pod));
  }

  /** upstream GetTopologyHints. */
  containerHints(pod: Pod, c: ContainerSpec): ProviderHints {
    if (!this.pinned(pod)) return undefined;
    const requested = requestedMemory(c);
    const blocks = this.state.entries[podUid(pod)]?.[c.name];
    if (blocks) return regenerateHints(blocks, requested);
    return this.calculateHints(pod, requested);
  }

  /** upstream GetPodTopologyHints. */
  podHints(pod: Pod): ProviderHints {
    if (!this.pinned(pod)) return undefined;
    const requested = podRequestedMemory(pod);
    for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
      const blocks = this.state.entries[podUid(pod)]?.[c.name];
      if (blocks) return regenerateHints(blocks, requested);
    }
    return this.calculateHints(pod, requested);
  }

  private reusableOf(pod: Pod, mask: NumaMask, resource: string): number {
    return this.reusable.get(podUid(pod))?.get(mask)?.get(resource) ?? 0;
  }

  /** upstream calculateHints: every set of nodes that could hold the request; the narrowest are preferred. */
  private calculateHints(pod: Pod, requested: Requests, machine: MachineState = this.state.machineState): Record<string, TopologyHint[]> {
    const nodes = [...machine.keys()].sort((a, b) => a - b);
    let minSize = nodes.length;
    const hints: Record<string, TopologyHint[]> = {};
    const table = (id: number, name: string) => machine.get(id)?.memoryMap?.[name] ?? { total: 0, systemReserved: 0, allocatable: 0, reserved: 0, free: 0 };
    for (const bits of subsets(nodes)) {
      const single = bits.length === 1;
      const free = new Map<string, number>();
      const allocatable = new Map<string, number>();
      for (const id of bits)
        for (const name of requested.keys()) {
          free.set(name, (free.get(name) ?? 0) + table(id, name).free);
          allocatable.set(name, (allocatable.get(name) ?? 0) + table(id, name).allocatable);
        }
      if ([...requested].some(([name, size]) => (allocatable.get(name) ?? 0) < size)) continue;
      if (bits.length < minSize) minSize = bits.length;
      // A node already grouped with others cannot be used alone, and a group is used only whole.
      if (single && (machine.get(bits[0]!)?.cells?.length ?? 0) > 1) continue;
      if (!single && bits.some((id) => machine.get(id)!.numberOfAssignments > 0 && ((machine.get(id)!.cells?.length ?? 0) === 1 || !sameGroup(machine.get(id)!.cells, bits))))
        continue;
      const mask = maskOf(bits);
      if ([...requested].some(([name, size]) => (free.get(name) ?? 0) + this.reusableOf(pod, mask, name) < size)) continue;
      for (const name of requested.keys()) (hints[name] ??= []).push({ affinity: mask, preferred: false });
    }
    for (const list of Object.values(hints)) for (const h of list) h.preferred = countOf(h.affinity!) === minSize;
    return hints;
  }

  /**
   * upstream staticPolicy.Allocate for one container, with the topology
   * manager's hint (undefined: none). Returns an error message when the
   * container's memory cannot be pinned.
   */
  allocate(pod: Pod, c: ContainerSpec, hint: TopologyHint | undefined): string | undefined {
    if (!this.pinned(pod)) return undefined;
    const uid = podUid(pod);
    const existing = this.state.entries[uid]?.[c.name];
    if (existing) {
      this.updateReusable(pod, c, existing);
      return undefined;
    }
    const requested = requestedMemory(c);
    const machine = this.state.machineState;
    let best: TopologyHint = hint ?? { affinity: undefined, preferred: false };
    if (best.affinity === undefined) {
      const hints = this.calculateHints(pod, requested);
      if (Object.keys(hints).length < 1) return "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available";
      const fallback = bestHint(hints["memory"] ?? []);
      if (!fallback.preferred && best.preferred) return "[memorymanager] failed to find the default preferred hint";
      best = fallback;
    }
    if (!this.satisfies(best.affinity ?? 0n, requested)) {
      const inGroup = (this.calculateHints(pod, requested)["memory"] ?? []).filter((h) => (h.affinity! & (best.affinity ?? 0n)) === (best.affinity ?? 0n));
      if (inGroup.length < 1) return "[memorymanager] failed to find NUMA nodes to extend the current topology hint";
      const extended = bestHint(inGroup);
      if (!extended.preferred && best.preferred) return "[memorymanager] failed to find the extended preferred hint";
      best = extended;
    }
    const bits = bitsOf(best.affinity ?? 0n);
    if (violatesGroups(machine, bits)) return "[memorymanager] preferred hint violates NUMA node allocation";
    const blocks: Block[] = [];
    for (const [name, size] of requested) {
      blocks.push({ numaAffinity: bits, type: name, size });
      const reuse = this.reusableOf(pod, best.affinity ?? 0n, name);
      reserve(machine, bits, name, reuse >= size ? 0 : size - reuse);
    }
    this.updateReusable(pod, c, blocks);
    (this.state.entries[uid] ??= {})[c.name] = blocks;
    this.handOnInitMemory(pod, c, blocks);
    this.save();
    return undefined;
  }

  private satisfies(mask: NumaMask, requested: Requests): boolean {
    for (const [name, size] of requested) {
      let free = 0;
      for (const id of bitsOf(mask)) free += this.state.machineState.get(id)?.memoryMap?.[name]?.free ?? 0;
      if (free < size) return false;
    }
    return true;
  }

  /** upstream updatePodReusableMemory. */
  private updateReusable(pod: Pod, c: ContainerSpec, blocks: readonly Block[]): void {
    const uid = podUid(pod);
    for (const other of this.reusable.keys()) if (other !== uid) this.reusable.delete(other);
    if (isRegularInit(pod, c)) {
      const byMask = this.reusable.get(uid) ?? new Map<NumaMask, Map<string, number>>();
      this.reusable.set(uid, byMask);
      for (const b of blocks) {
        const m = maskOf(b.numaAffinity ?? []);
        const byType = byMask.get(m) ?? new Map<string, number>();
        byMask.set(m, byType);
        if (b.size > (byType.get(b.type) ?? 0)) byType.set(b.type, b.size);
      }
      return;
    }
    for (const b of blocks) {
      const m = maskOf(b.numaAffinity ?? []);
      const have = this.reusableOf(pod, m, b.type);
      if (have !== 0)
        this.reusable
          .get(uid)!
          .get(m)!
          .set(b.type, b.size >= have ? 0 : have - b.size);
    }
  }

  /** upstream updateInitContainersMemoryBlocks: memory a later container reuses is taken off the earlier init containers' blocks. */
  private handOnInitMemory(pod: Pod, c: ContainerSpec, blocks: readonly Block[]): void {
    const uid = podUid(pod);
    for (const block of blocks) {
      let size = block.size;
      for (const init of pod.spec.initContainers ?? []) {
        if (init.name === c.name || size === 0) break;
        if (init.restartPolicy === "Always") continue;
        const initBlocks = this.state.entries[uid]?.[init.name];
        if (!initBlocks?.length) continue;
        for (const ib of initBlocks) {
          if (ib.size === 0 || ib.type !== block.type || maskOf(ib.numaAffinity ?? []) !== maskOf(block.numaAffinity ?? [])) continue;
          const took = Math.min(ib.size, size);
          ib.size -= took;
          size -= took;
        }
      }
    }
  }

  /** upstream RemoveContainer: the blocks go back to their nodes. */
  private release(podUid: string, container: string): void {
    const blocks = this.state.entries[podUid]?.[container];
    if (!blocks) return;
    delete this.state.entries[podUid]![container];
    if (Object.keys(this.state.entries[podUid]!).length === 0) delete this.state.entries[podUid];
    for (const b of blocks) {
      let size = b.size;
      for (const id of b.numaAffinity ?? []) {
        const node = this.state.machineState.get(id);
        if (!node) continue;
        node.numberOfAssignments--;
        if (node.numberOfAssignments === 0) node.cells = [id];
        const t = node.memoryMap?.[b.type];
        if (size === 0 || !t || t.reserved === 0) continue;
        const back = Math.min(t.reserved, size);
        t.free += back;
        t.reserved -= back;
        size -= back;
      }
    }
  }

  /** upstream removeStaleState: blocks of containers no active pod has are released. Returns whether anything was. */
  removeStale(active: readonly Pod[]): boolean {
    const stale = staleContainerEntries(this.state.entries, active);
    for (const { uid, container } of stale) this.release(uid, container);
    if (stale.length) this.save();
    return stale.length > 0;
  }

  /** upstream AddContainer: once a container starts, the plain init containers before it have finished and give their blocks back. */
  containerStarted(pod: Pod, c: ContainerSpec): void {
    let changed = false;
    for (const init of pod.spec.initContainers ?? []) {
      if (init.name === c.name) break;
      if (init.restartPolicy === "Always") continue;
      if (this.state.entries[podUid(pod)]?.[init.name]) {
        this.release(podUid(pod), init.name);
        changed = true;
      }
    }
    if (changed) this.save();
  }
}

/** The stored blocks as hints (upstream regenerateHints); undefined when they no longer match the request. */
function regenerateHints(blocks: readonly Block[], requested: Requests): ProviderHints {
  if (blocks.length !== requested.size) return undefined;
  const hints: Record<string, TopologyHint[]> = {};
  for (const name of requested.keys()) hints[name] = [];
  for (const b of blocks) {
    if (!requested.has(b.type) || requested.get(b.type) !== b.size) return undefined;
    hints[b.type]!.push({ affinity: maskOf(b.numaAffinity ?? []), preferred: true });
  }
  return hints;
}

function reserve(machine: MachineState, bits: readonly number[], name: string, size: number): void {
  let left = size;
  for (const id of bits) {
    const node = machine.get(id)!;
    node.numberOfAssignments++;
    node.cells = [...bits];
    if (left === 0) continue;
    const t = node.memoryMap?.[name];
    if (!t || t.free <= 0) continue;
    const took = Math.min(t.free, left);
    t.reserved += took;
    t.free -= took;
    left -= took;
  }
}

/** upstream isAffinityViolatingNUMAAllocations. */
function violatesGroups(machine: MachineState, bits: readonly number[]): boolean {
  if (bits.length === 1) return false;
  for (const id of bits) {
    const node = machine.get(id);
    if (!node || node.numberOfAssignments === 0) continue;
    if ((node.cells?.length ?? 0) === 1 || !sameGroup(node.cells, bits)) return true;
  }
  return false;
}

/** upstream areMachineStatesEqual. */
function machineStatesEqual(a: MachineState, b: MachineState): boolean {
  if (a.size !== b.size) return false;
  for (const [id, n1] of a) {
    const n2 = b.get(id);
    if (!n2 || n1.numberOfAssignments !== n2.numberOfAssignments || !sameGroup(n1.cells, n2.cells)) return false;
    const m1 = n1.memoryMap ?? {};
    const m2 = n2.memoryMap ?? {};
    if (Object.keys(m1).length !== Object.keys(m2).length) return false;
    for (const [name, t1] of Object.entries(m1)) {
      const t2 = m2[name];
      if (!t2 || t1.total !== t2.total || t1.systemReserved !== t2.systemReserved || t1.allocatable !== t2.allocatable) return false;
      let free1 = 0;
      let free2 = 0;
      let res1 = 0;
      let res2 = 0;
      for (const cell of n1.cells ?? []) {
        free1 += a.get(cell)?.memoryMap?.[name]?.free ?? 0;
        res1 += a.get(cell)?.memoryMap?.[name]?.reserved ?? 0;
        free2 += b.get(cell)?.memoryMap?.[name]?.free ?? 0;
        res2 += b.get(cell)?.memoryMap?.[name]?.reserved ?? 0;
      }
      if (free1 !== free2 || res1 !== res2) return false;
    }
  }
  return true;
}

export type { Assignments };
