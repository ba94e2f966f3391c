/**
 * The device manager's checkpoint, `<rootDir>/device-plugins/kubelet_internal_checkpoint`,
 * in upstream's shape (devicemanager/checkpoint): one entry per pod, container
 * and resource with the device IDs by NUMA node (upstream's DevicesPerNUMA:
 * a device is listed under each node its plugin reports it on, under "-1"
 * when it reports none) and the plugin's Allocate answer for that container
 * (protobuf, base64 in JSON), and the devices each registered resource had.
 * Files written before this agent kept the nodes (every device under "-1")
 * read as devices without topology. The checksum is upstream's: FNV-1a 32
 * over go-spew's `%#v` of `Data` as Go decodes it (checkpointmanager's
 * checksum.New), so the upstream kubelet and this agent read each other's
 * file; one with the checksum this agent wrote before (FNV-1a of the JSON of
 * `Data`) is still read. Anything else is refused, not misread.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync, openSync, fsyncSync, closeSync } from "node:fs";
import { posix } from "node:path";
import * as v from "valibot";
import { fnv32a } from "../util/fnv.ts";

export const CHECKPOINT_FILE = "kubelet_internal_checkpoint";

/** Devices without topology sit under this NUMA node, as upstream's nodeWithoutTopology. */
const NO_NUMA = "-1";

const Entry = v.object({
  PodUID: v.string(),
  ContainerName: v.string(),
  ResourceName: v.string(),
  // Keys are NUMA node IDs (Go's map[int64][]string), "-1" for devices without topology.
  DeviceIDs: v.record(v.pipe(v.string(), v.regex(/^-?\d+$/)), v.array(v.string())),
  AllocResp: v.optional(v.nullable(v.string())),
});
const File = v.object({
  Data: v.object({
    PodDeviceEntries: v.nullable(v.array(Entry)),
    RegisteredDevices: v.nullable(v.record(v.string(), v.nullable(v.array(v.string())))),
  }),
  Checksum: v.number(),
});

export interface CheckpointEntry {
  podUid: string;
  container: string;
  resource: string;
  /** The container's devices, each once, in the order they were chosen (a file gives them by node, ascending). */
  deviceIds: string[];
  /** Device ID → the NUMA nodes it was on when allocated; a device without topology has none. */
  numa: Record<string, number[]>;
  /** The plugin's ContainerAllocateResponse, serialized; absent when Allocate was not answered yet. */
  allocResp?: Uint8Array;
}

export interface CheckpointData {
  entries: CheckpointEntry[];
  /** Resource name → the IDs of its devices when last written. */
  registered: Record<string, string[]>;
}

/** upstream's DevicesPerNUMA of one container's devices: node (as a JSON key) → its device IDs. */
export function devicesPerNuma(ids: readonly string[], numa: Readonly<Record<string, readonly number[]>>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const id of ids) {
    const nodes = numa[id] ?? [];
    for (const node of nodes.length ? nodes : [NO_NUMA]) (out[String(node)] ??= []).push(id);
  }
  return out;
}

/** The device IDs of a DevicesPerNUMA (each once, nodes ascending, "-1" last) and each one's nodes. */
function fromDevicesPerNuma(byNode: Record<string, string[]>): { deviceIds: string[]; numa: Record<string, number[]> } {
  const deviceIds: string[] = [];
  const numa: Record<string, number[]> = {};
  const keys = Object.keys(byNode).sort((a, b) => (a === NO_NUMA ? 1 : b === NO_NUMA ? -1 : Number(a) - Number(b)));
  for (const key of keys) {
    for (const id of byNode[key] ?? []) {
      if (!deviceIds.includes(id)) deviceIds.push(id);
      if (key !== NO_NUMA) (numa[id] ??= []).push(Number(key));
    }
  }
  return { deviceIds, numa };
}

export function encodeCheckpoint(data: CheckpointData): string {
  const Data = {
    PodDeviceEntries: data.entries.map((e) => ({
      PodUID: e.podUid,
      ContainerName: e.container,
      ResourceName: e.resource,
      DeviceIDs: devicesPerNuma(e.deviceIds, e.numa),
      AllocResp: e.allocResp ? Buffer.from(e.allocResp).toString("base64") : null,
    })),
    RegisteredDevices: data.registered,
  };
  return JSON.stringify({ Data, Checksum: checkpointChecksum(Data) });
}

type FileData = v.InferOutput<typeof File>["Data"];

const spewStrings = (ids: readonly string[] | null | undefined): string => (ids == null ? "<nil>" : `[${ids.join(" ")}]`);
const goStringOrder = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/**
 * go-spew's `%#v` of upstream's checkpointData (dump.ForHash: sorted map keys,
 * nil as `<nil>`, types only where not an element): the text upstream's
 * checksum hashes.
 */
export function spewText(data: FileData): string {
  const entry = (e: v.InferOutput<typeof Entry>): string => {
    const nodes = Object.keys(e.DeviceIDs).sort((a, b) => Number(a) - Number(b));
    const deviceIds = `map[${nodes.map((n) => `${Number(n)}:${spewStrings(e.DeviceIDs[n])}`).join(" ")}]`;
    const alloc = e.AllocResp == null ? "<nil>" : `[${[...Buffer.from(e.AllocResp, "base64")].join(" ")}]`;
    return `{PodUID:(string)${e.PodUID} ContainerName:(string)${e.ContainerName} ResourceName:(string)${e.ResourceName} DeviceIDs:(checkpoint.DevicesPerNUMA)${deviceIds} AllocResp:([]uint8)${alloc}}`;
  };
  const entries = data.PodDeviceEntries == null ? "<nil>" : `[${data.PodDeviceEntries.map(entry).join(" ")}]`;
  const registered =
    data.RegisteredDevices == null
      ? "<nil>"
      : `map[${Object.keys(data.RegisteredDevices)
          .sort(goStringOrder)
          .map((k) => `${k}:${spewStrings(data.RegisteredDevices![k])}`)
          .join(" ")}]`;
  return `(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)${entries} RegisteredDevices:(map[string][]string)${registered}}`;
}

/** upstream checksum.New(checkpointData). */
export const checkpointChecksum = (data: FileData): number => fnv32a(spewText(data));

export type DecodeResult = { ok: true; data: CheckpointData } | { ok: false; error: string };

export function decodeCheckpoint(text: string): DecodeResult {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  const parsed = v.safeParse(File, raw);
  if (!parsed.success) return { ok: false, error: `unexpected shape at ${v.getDotPath(parsed.issues[0]) ?? "root"}: ${parsed.issues[0].message}` };
  const { Checksum } = parsed.output;
  // Upstream's checksum, or the one this agent wrote before it had upstream's (the JSON of Data).
  if (checkpointChecksum(parsed.output.Data) !== Checksum && fnv32a(JSON.stringify((raw as { Data: unknown }).Data)) !== Checksum) return { ok: false, error: "checksum mismatch" };
  const { PodDeviceEntries, RegisteredDevices } = parsed.output.Data;
  return {
    ok: true,
    data: {
      entries: (PodDeviceEntries ?? []).map((e) => ({
        podUid: e.PodUID,
        container: e.ContainerName,
        resource: e.ResourceName,
        ...fromDevicesPerNuma(e.DeviceIDs),
        ...(e.AllocResp ? { allocResp: new Uint8Array(Buffer.from(e.AllocResp, "base64")) } : {}),
      })),
      registered: Object.fromEntries(Object.entries(RegisteredDevices ?? {}).map(([k, ids]) => [k, ids ?? []])),
    },
  };
}

/** Replaces the file atomically and durably (temporary file, fsync, rename). */
export function writeCheckpointFile(dir: string, data: CheckpointData): void {
  mkdirSync(dir, { recursive: true });
  const path = posix.join(dir, CHECKPOINT_FILE);
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, encodeCheckpoint(data), { mode: 0o600 });
  const fd = openSync(tmp, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/** The checkpoint, nothing when there is none, or why it cannot be used. */
export function readCheckpointFile(dir: string): DecodeResult | undefined {
  let text: string;
  try {
    text = readFileSync(posix.join(dir, CHECKPOINT_FILE), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    return { ok: false, error: (err as Error).message };
  }
  return decodeCheckpoint(text);
}
