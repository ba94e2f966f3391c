/**
 * The CPU manager's state file, `<root-dir>/cpu_manager_state`, in upstream's
 * shape (cpumanager/state CPUManagerCheckpoint v2) so that an upstream
 * kubelet and this agent read each other's file:
 *   {"policyName":"static","defaultCpuSet":"0,2-3","entries":{"<pod uid>":{"<container>":"1"}},"checksum":N}
 * `entries` is left out when empty (Go's omitempty). The checksum is FNV-1a
 * 32 over the text upstream's checkpointmanager hashes: go-spew's `%#v` of the
 * checkpoint struct with its checksum zeroed (dump.ForHash: sorted map keys,
 * no pointer addresses). A checksum of 0 is accepted, as upstream does.
 */
import { type CpuSet, formatCpuSet, parseCpuSet } from "../util/cpuset.ts";
import { fnv32a } from "../util/fnv.ts";

export interface CpuManagerState {
  policyName: string;
  defaultCpuSet: CpuSet;
  /** Pod UID → container name → its exclusive CPUs. */
  entries: Record<string, Record<string, CpuSet>>;
}

export class CheckpointError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CheckpointError";
  }
}

const byKey = <T>(o: Record<string, T>): [string, T][] => Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

type Entries = Record<string, Record<string, string>>;

/** upstream checksum.New(checkpoint) with the checksum field zeroed. */
export function checkpointChecksum(policyName: string, defaultCpuSet: string, entries: Entries): number {
  const map = (inner: [string, string][]) => `map[${inner.map(([k, v]) => `${k}:${v}`).join(" ")}]`;
  const entriesText = `map[${byKey(entries)
    .map(([uid, cs]) => `${uid}:${map(byKey(cs))}`)
    .join(" ")}]`;
  return fnv32a(
    `(*state.CPUManagerCheckpoint){PolicyName:(string)${policyName} DefaultCPUSet:(string)${defaultCpuSet} Entries:(map[string]map[string]string)${entriesText} Checksum:(checksum.Checksum)0}`,
  );
}

const textEntries = (s: CpuManagerState): Entries =>
  Object.fromEntries(
    byKey(s.entries)
      .filter(([, cs]) => Object.keys(cs).length > 0)
      .map(([uid, cs]) => [uid, Object.fromEntries(byKey(cs).map(([name, set]) => [name, formatCpuSet(set)]))]),
  );

export function encodeCheckpoint(s: CpuManagerState): string {
  const entries = textEntries(s);
  const defaultCpuSet = formatCpuSet(s.defaultCpuSet);
  const checksum = checkpointChecksum(s.policyName, defaultCpuSet, entries);
  return JSON.stringify({ policyName: s.policyName, defaultCpuSet, ...(Object.keys(entries).length ? { entries } : {}), checksum });
}

export function decodeCheckpoint(text: string): CpuManagerState {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new CheckpointError(`not JSON: ${(err as Error).message}`);
  }
  const o = raw as { policyName?: unknown; defaultCpuSet?: unknown; entries?: unknown; checksum?: unknown };
  if (typeof o !== "object" || o === null || typeof o.policyName !== "string" || typeof o.defaultCpuSet !== "string" || typeof o.checksum !== "number")
    throw new CheckpointError("policyName, defaultCpuSet and checksum are required");
  const entries: Entries = {};
  if (o.entries !== undefined && o.entries !== null) {
    if (typeof o.entries !== "object") throw new CheckpointError("entries is not an object");
    for (const [uid, cs] of Object.entries(o.entries as Record<string, unknown>)) {
      // A v1 file (entries: container ID → cpuset) is not read: upstream migrates it with a container map this agent does not keep.
      if (typeof cs !== "object" || cs === null) throw new CheckpointError(`entries[${JSON.stringify(uid)}] is not a map of containers (a v1 checkpoint?)`);
      entries[uid] = {};
      for (const [name, set] of Object.entries(cs as Record<string, unknown>)) {
        if (typeof set !== "string") throw new CheckpointError(`cpuset of container ${JSON.stringify(name)} in pod ${JSON.stringify(uid)} is not a string`);
        entries[uid]![name] = set;
      }
    }
  }
  if (o.checksum !== 0) {
    const actual = checkpointChecksum(o.policyName, o.defaultCpuSet, entries);
    if (actual !== o.checksum) throw new CheckpointError(`checkpoint is corrupted (checksum ${o.checksum}, content hashes to ${actual})`);
  }
  const parse = (what: string, s: string) => {
    try {
      return parseCpuSet(s);
    } catch (err) {
      throw new CheckpointError(`could not parse ${what} ${JSON.stringify(s)}: ${(err as Error).message}`);
    }
  };
  return {
    policyName: o.policyName,
    defaultCpuSet: parse("default cpu set", o.defaultCpuSet),
    entries: Object.fromEntries(
      Object.entries(entries).map(([uid, cs]) => [
        uid,
        Object.fromEntries(Object.entries(cs).map(([name, s]) => [name, parse(`cpuset for container ${JSON.stringify(name)} in pod ${JSON.stringify(uid)}`, s)])),
      ]),
    ),
  };
}

export { fileStateStore, type StateStore } from "../util/state-file.ts";
