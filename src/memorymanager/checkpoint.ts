/**
 * The memory manager's state file, `<root-dir>/memory_manager_state`, in
 * upstream's shape (memorymanager/state MemoryManagerCheckpoint) so that an
 * upstream kubelet and this agent read each other's file:
 *   {"policyName":"Static","machineState":{"0":{"numberOfAssignments":1,
 *    "memoryMap":{"memory":{"total":N,"systemReserved":N,"allocatable":N,"reserved":N,"free":N}},"cells":[0]}},
 *    "entries":{"<pod uid>":{"<container>":[{"numaAffinity":[0],"type":"memory","size":N}]}},"checksum":N}
 * `entries` is left out when empty (Go's omitempty). The checksum is FNV-1a 32
 * over go-spew's `%#v` of the checkpoint with its checksum zeroed (upstream's
 * dump.ForHash: sorted map keys, no pointer addresses, `<*>` before a pointer
 * inside a map, `<nil>` for a nil slice or map), so a Go `null` and an empty
 * list are kept apart here as they are there.
 */
import { fnv32a } from "../util/fnv.ts";

export interface MemoryTable {
  total: number;
  systemReserved: number;
  allocatable: number;
  reserved: number;
  free: number;
}

export interface NumaNodeState {
  numberOfAssignments: number;
  /** Resource name (memory, hugepages-2Mi, ...) → its table; null as Go's nil map. */
  memoryMap: Record<string, MemoryTable> | null;
  /** This node and the nodes it is grouped with for a multi-node assignment; null as Go's nil slice. */
  cells: number[] | null;
}

/** NUMA node id → its state. */
export type MachineState = Map<number, NumaNodeState>;

export interface Block {
  numaAffinity: number[] | null;
  type: string;
  size: number;
}

/** Pod UID → container name → its blocks (null as Go's nil slice). */
export type Assignments = Record<string, Record<string, Block[] | null>>;

export interface MemoryManagerState {
  policyName: string;
  machineState: MachineState;
  entries: Assignments;
}

export class CheckpointError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CheckpointError";
  }
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const ints = (xs: number[] | null) => (xs === null ? "<nil>" : `[${xs.join(" ")}]`);

/** go-spew's `%#v` of the checkpoint with Checksum 0 (what upstream's checksum.New hashes). */
export function spewText(s: MemoryManagerState): string {
  const table = (t: MemoryTable) =>
    `<*>{TotalMemSize:(uint64)${t.total} SystemReserved:(uint64)${t.systemReserved} Allocatable:(uint64)${t.allocatable} Reserved:(uint64)${t.reserved} Free:(uint64)${t.free}}`;
  const memoryMap = (m: Record<string, MemoryTable> | null) =>
    m === null
      ? "<nil>"
      : `map[${Object.keys(m)
          .sort(byString)
          .map((k) => `${k}:${table(m[k]!)}`)
          .join(" ")}]`;
  const node = (n: NumaNodeState) =>
    `<*>{NumberOfAssignments:(int)${n.numberOfAssignments} MemoryMap:(map[v1.ResourceName]*state.MemoryTable)${memoryMap(n.memoryMap)} Cells:([]int)${ints(n.cells)}}`;
  const machine = `map[${[...s.machineState.keys()]
    .sort((a, b) => a - b)
    .map((id) => `${id}:${node(s.machineState.get(id)!)}`)
    .join(" ")}]`;
  const block = (b: Block) => `{NUMAAffinity:([]int)${ints(b.numaAffinity)} Type:(v1.ResourceName)${b.type} Size:(uint64)${b.size}}`;
  const blocks = (bs: Block[] | null) => (bs === null ? "<nil>" : `[${bs.map(block).join(" ")}]`);
  const entries = `map[${Object.keys(s.entries)
    .sort(byString)
    .map((uid) => {
      const cs = s.entries[uid]!;
      return `${uid}:map[${Object.keys(cs)
        .sort(byString)
        .map((name) => `${name}:${blocks(cs[name]!)}`)
        .join(" ")}]`;
    })
    .join(" ")}]`;
  return `(*state.MemoryManagerCheckpoint){PolicyName:(string)${s.policyName} MachineState:(state.NUMANodeMap)${machine} Entries:(state.ContainerMemoryAssignments)${entries} Checksum:(checksum.Checksum)0}`;
}

export const checkpointChecksum = (s: MemoryManagerState): number => fnv32a(spewText(s));

/** JSON as Go's encoding/json writes it: struct fields in order, map keys sorted as strings. */
export function encodeCheckpoint(s: MemoryManagerState): string {
  const j = JSON.stringify;
  const sortedMap = (keys: string[], value: (k: string) => string) =>
    `{${keys
      .sort(byString)
      .map((k) => `${j(k)}:${value(k)}`)
      .join(",")}}`;
  const table = (t: MemoryTable) => j({ total: t.total, systemReserved: t.systemReserved, allocatable: t.allocatable, reserved: t.reserved, free: t.free });
  const node = (n: NumaNodeState) =>
    `{"numberOfAssignments":${n.numberOfAssignments},"memoryMap":${n.memoryMap === null ? "null" : sortedMap(Object.keys(n.memoryMap), (k) => table(n.memoryMap![k]!))},"cells":${j(n.cells)}}`;
  const machine = sortedMap([...s.machineState.keys()].map(String), (k) => node(s.machineState.get(Number(k))!));
  const block = (b: Block) => j({ numaAffinity: b.numaAffinity, type: b.type, size: b.size });
  const entries = sortedMap(Object.keys(s.entries), (uid) =>
    sortedMap(Object.keys(s.entries[uid]!), (name) => {
      const bs = s.entries[uid]![name]!;
      return bs === null ? "null" : `[${bs.map(block).join(",")}]`;
    }),
  );
  return `{"policyName":${j(s.policyName)},"machineState":${machine}${Object.keys(s.entries).length ? `,"entries":${entries}` : ""},"checksum":${checkpointChecksum(s)}}`;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
const uint = (x: unknown, what: string): number => {
  if (x === undefined) return 0;
  if (typeof x !== "number" || !Number.isSafeInteger(x) || x < 0) throw new CheckpointError(`${what} is not an unsigned integer`);
  return x;
};
const intList = (x: unknown, what: string): number[] | null => {
  if (x === undefined || x === null) return null;
  if (!Array.isArray(x) || !x.every((n) => Number.isInteger(n))) throw new CheckpointError(`${what} is not a list of integers`);
  return x as number[];
};

export function decodeCheckpoint(text: string): MemoryManagerState & { checksum: number } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new CheckpointError(`not JSON: ${(err as Error).message}`);
  }
  if (!isObject(raw)) throw new CheckpointError("not a JSON object");
  if (typeof raw["policyName"] !== "string") throw new CheckpointError("policyName is not a string");
  const machineState: MachineState = new Map();
  const ms = raw["machineState"] ?? {};
  if (!isObject(ms)) throw new CheckpointError("machineState is not an object");
  for (const [id, n] of Object.entries(ms)) {
    if (!/^-?\d+$/.test(id)) throw new CheckpointError(`machineState key ${JSON.stringify(id)} is not a NUMA node id`);
    if (!isObject(n)) throw new CheckpointError(`machineState[${id}] is not an object`);
    let memoryMap: Record<string, MemoryTable> | null = null;
    if (n["memoryMap"] !== undefined && n["memoryMap"] !== null) {
      if (!isObject(n["memoryMap"])) throw new CheckpointError(`machineState[${id}].memoryMap is not an object`);
      memoryMap = {};
      for (const [name, t] of Object.entries(n["memoryMap"])) {
        if (!isObject(t)) throw new CheckpointError(`machineState[${id}].memoryMap[${name}] is not an object`);
        const f = (k: string) => uint(t[k], `machineState[${id}].memoryMap[${name}].${k}`);
        memoryMap[name] = { total: f("total"), systemReserved: f("systemReserved"), allocatable: f("allocatable"), reserved: f("reserved"), free: f("free") };
      }
    }
    const assignments = n["numberOfAssignments"] ?? 0;
    if (!Number.isInteger(assignments)) throw new CheckpointError(`machineState[${id}].numberOfAssignments is not an integer`);
    machineState.set(Number(id), { numberOfAssignments: assignments as number, memoryMap, cells: intList(n["cells"], `machineState[${id}].cells`) });
  }
  const entries: Assignments = {};
  const es = raw["entries"] ?? {};
  if (!isObject(es)) throw new CheckpointError("entries is not an object");
  for (const [uid, cs] of Object.entries(es)) {
    if (!isObject(cs)) throw new CheckpointError(`entries[${JSON.stringify(uid)}] is not a map of containers`);
    entries[uid] = {};
    for (const [name, bs] of Object.entries(cs)) {
      const what = `entries[${JSON.stringify(uid)}][${JSON.stringify(name)}]`;
      if (bs === null) {
        entries[uid]![name] = null;
        continue;
      }
      if (!Array.isArray(bs)) throw new CheckpointError(`${what} is not a list of blocks`);
      entries[uid]![name] = bs.map((b, i) => {
        if (!isObject(b)) throw new CheckpointError(`${what}[${i}] is not an object`);
        if (b["type"] !== undefined && typeof b["type"] !== "string") throw new CheckpointError(`${what}[${i}].type is not a string`);
        return {
          numaAffinity: intList(b["numaAffinity"], `${what}[${i}].numaAffinity`),
          type: (b["type"] as string | undefined) ?? "",
          size: uint(b["size"], `${what}[${i}].size`),
        };
      });
    }
  }
  const checksum = raw["checksum"] ?? 0;
  if (typeof checksum !== "number") throw new CheckpointError("checksum is not a number");
  const state = { policyName: raw["policyName"], machineState, entries };
  const actual = checkpointChecksum(state);
  if (actual !== checksum) throw new CheckpointError(`checkpoint is corrupted (checksum ${checksum}, content hashes to ${actual})`);
  return { ...state, checksum };
}

export { fileStateStore, type StateStore } from "../util/state-file.ts";
