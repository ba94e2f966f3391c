/**
 * apimachinery's meta/v1 messages in protobuf (generated.proto field numbers)
 * to and from their JSON shape: ObjectMeta with its owner references and
 * managed fields, Time (seconds, as its JSON) and MicroTime (microseconds).
 * Shared by the object codecs in proto-objects.ts.
 */
import { ProtobufError, type Reader, readFields, Writer } from "./protobuf.ts";

export type Json = Record<string, unknown>;

/** `v` as a JSON object whose keys are all in `known` (null values count as absent). */
export function jsonObject(v: unknown, where: string, known: readonly string[]): Json {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ProtobufError(`${where}: not an object`);
  for (const [k, x] of Object.entries(v)) if (x !== null && x !== undefined && !known.includes(k)) throw new ProtobufError(`${where}.${k} has no protobuf encoding here`);
  return v as Json;
}

export const present = (v: unknown): boolean => v !== undefined && v !== null;

export function str(v: unknown, where: string): string {
  if (!present(v)) return "";
  if (typeof v !== "string") throw new ProtobufError(`${where}: not a string`);
  return v;
}

export function int(v: unknown, where: string): number {
  if (!present(v)) return 0;
  if (typeof v !== "number" || !Number.isSafeInteger(v)) throw new ProtobufError(`${where}: not an integer`);
  return v;
}

function bool(v: unknown, where: string): boolean {
  if (typeof v !== "boolean") throw new ProtobufError(`${where}: not a boolean`);
  return v;
}

function array(v: unknown, where: string): unknown[] {
  if (!present(v)) return [];
  if (!Array.isArray(v)) throw new ProtobufError(`${where}: not an array`);
  return v;
}

const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|([+-])(\d\d):(\d\d))$/;

/**
 * A Time or MicroTime in JSON (RFC 3339) as a Timestamp message; absent is
 * the empty message Go writes for a zero time. MicroTime keeps microseconds,
 * as Go's ProtoMicroTime truncates; Time keeps what the text holds, as Go
 * marshals a parsed time.
 */
export function encodeTime(v: unknown, where: string, micro: boolean): Uint8Array {
  if (!present(v)) return new Uint8Array();
  const m = typeof v === "string" ? RFC3339.exec(v) : null;
  if (!m) throw new ProtobufError(`${where}: not an RFC 3339 time`);
  const offset = m[9] ? (m[9] === "-" ? -1 : 1) * (Number(m[10]) * 3600 + Number(m[11]) * 60) : 0;
  const seconds = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])) / 1000 - offset;
  let nanos = Number((m[7] ?? "").padEnd(9, "0"));
  if (micro) nanos -= nanos % 1000;
  return new Writer().varint(1, seconds).varint(2, nanos).finish();
}

/** A Timestamp message as JSON: undefined for the zero time; Time in seconds (Go's Time drops nanoseconds when it reads protobuf), MicroTime with six digits. */
export function decodeTime(raw: Uint8Array, where: string, micro: boolean): string | undefined {
  if (raw.length === 0) return undefined;
  let seconds = 0;
  let nanos = 0;
  readFields(raw, where, (r, field, wire) => {
    if (field === 1) seconds = r.int(wire, `${where}.seconds`);
    else if (field === 2) nanos = r.int(wire, `${where}.nanos`);
    else return false;
    return true;
  });
  const base = new Date(seconds * 1000).toISOString().slice(0, 19);
  return micro ? `${base}.${String(Math.floor(nanos / 1000)).padStart(6, "0")}Z` : `${base}Z`;
}

const META_KEYS = [
  "name",
  "generateName",
  "namespace",
  "selfLink",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "labels",
  "annotations",
  "ownerReferences",
  "finalizers",
  "managedFields",
] as const;

function encodeStringMap(w: Writer, field: number, v: unknown, where: string): void {
  if (!present(v)) return;
  const map = jsonObject(v, where, Object.keys(v as object));
  for (const key of Object.keys(map).sort())
    w.bytes(
      field,
      new Writer()
        .string(1, key)
        .string(2, str(map[key], `${where}.${key}`))
        .finish(),
    );
}

function encodeOwnerReference(v: unknown, where: string): Uint8Array {
  const o = jsonObject(v, where, ["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"]);
  const w = new Writer()
    .string(1, str(o.kind, `${where}.kind`))
    .string(3, str(o.name, `${where}.name`))
    .string(4, str(o.uid, `${where}.uid`))
    .string(5, str(o.apiVersion, `${where}.apiVersion`));
  if (present(o.controller)) w.bool(6, bool(o.controller, `${where}.controller`));
  if (present(o.blockOwnerDeletion)) w.bool(7, bool(o.blockOwnerDeletion, `${where}.blockOwnerDeletion`));
  return w.finish();
}

function encodeManagedFields(v: unknown, where: string): Uint8Array {
  const o = jsonObject(v, where, ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"]);
  const w = new Writer()
    .string(1, str(o.manager, `${where}.manager`))
    .string(2, str(o.operation, `${where}.operation`))
    .string(3, str(o.apiVersion, `${where}.apiVersion`));
  if (present(o.time)) w.bytes(4, encodeTime(o.time, `${where}.time`, false));
  w.string(6, str(o.fieldsType, `${where}.fieldsType`));
  // FieldsV1 is raw JSON, inline in the object's JSON.
  if (present(o.fieldsV1)) w.bytes(7, new Writer().string(1, JSON.stringify(o.fieldsV1)).finish());
  return w.string(8, str(o.subresource, `${where}.subresource`)).finish();
}

export function encodeObjectMeta(v: unknown): Uint8Array {
  const o = present(v) ? jsonObject(v, "metadata", META_KEYS) : {};
  const w = new Writer()
    .string(1, str(o.name, "metadata.name"))
    .string(2, str(o.generateName, "metadata.generateName"))
    .string(3, str(o.namespace, "metadata.namespace"))
    .string(4, str(o.selfLink, "metadata.selfLink"))
    .string(5, str(o.uid, "metadata.uid"))
    .string(6, str(o.resourceVersion, "metadata.resourceVersion"))
    .varint(7, int(o.generation, "metadata.generation"))
    .bytes(8, encodeTime(o.creationTimestamp, "metadata.creationTimestamp", false));
  if (present(o.deletionTimestamp)) w.bytes(9, encodeTime(o.deletionTimestamp, "metadata.deletionTimestamp", false));
  if (present(o.deletionGracePeriodSeconds)) w.varint(10, int(o.deletionGracePeriodSeconds, "metadata.deletionGracePeriodSeconds"));
  encodeStringMap(w, 11, o.labels, "metadata.labels");
  encodeStringMap(w, 12, o.annotations, "metadata.annotations");
  array(o.ownerReferences, "metadata.ownerReferences").forEach((r, i) => w.bytes(13, encodeOwnerReference(r, `metadata.ownerReferences[${i}]`)));
  array(o.finalizers, "metadata.finalizers").forEach((f, i) => w.string(14, str(f, `metadata.finalizers[${i}]`)));
  array(o.managedFields, "metadata.managedFields").forEach((m, i) => w.bytes(17, encodeManagedFields(m, `metadata.managedFields[${i}]`)));
  return w.finish();
}

/** Sets `key` to `value` unless it is empty (the JSON fields marked omitempty). */
function setNonEmpty(out: Json, key: string, value: string | number | undefined): void {
  if (value !== undefined && value !== "" && value !== 0) out[key] = value;
}

function decodeStringEntry(r: Reader, wire: number, where: string, into: Record<string, string>): void {
  let key = "";
  let value = "";
  readFields(r.bytes(wire, where), where, (e, f, w) => {
    if (f === 1) key = e.string(w, `${where} key`);
    else if (f === 2) value = e.string(w, `${where} value`);
    else return false;
    return true;
  });
  into[key] = value;
}

function decodeOwnerReference(raw: Uint8Array, where: string): Json {
  const o: Json = { apiVersion: "", kind: "", name: "", uid: "" };
  readFields(raw, where, (r, field, wire) => {
    if (field === 1) o.kind = r.string(wire, `${where}.kind`);
    else if (field === 3) o.name = r.string(wire, `${where}.name`);
    else if (field === 4) o.uid = r.string(wire, `${where}.uid`);
    else if (field === 5) o.apiVersion = r.string(wire, `${where}.apiVersion`);
    else if (field === 6) o.controller = r.bool(wire, `${where}.controller`);
    else if (field === 7) o.blockOwnerDeletion = r.bool(wire, `${where}.blockOwnerDeletion`);
    else return false;
    return true;
  });
  return o;
}

function decodeManagedFields(raw: Uint8Array, where: string): Json {
  const o: Json = {};
  readFields(raw, where, (r, field, wire) => {
    if (field === 1) setNonEmpty(o, "manager", r.string(wire, `${where}.manager`));
    else if (field === 2) setNonEmpty(o, "operation", r.string(wire, `${where}.operation`));
    else if (field === 3) setNonEmpty(o, "apiVersion", r.string(wire, `${where}.apiVersion`));
    else if (field === 4) setNonEmpty(o, "time", decodeTime(r.bytes(wire, `${where}.time`), `${where}.time`, false));
    else if (field === 6) setNonEmpty(o, "fieldsType", r.string(wire, `${where}.fieldsType`));
    else if (field === 7)
      readFields(r.bytes(wire, `${where}.fieldsV1`), `${where}.fieldsV1`, (f, n, w) => {
        if (n !== 1) return false;
        const text = f.string(w, `${where}.fieldsV1.Raw`);
        try {
          o.fieldsV1 = JSON.parse(text);
        } catch {
          throw new ProtobufError(`${where}.fieldsV1: not JSON`);
        }
        return true;
      });
    else if (field === 8) setNonEmpty(o, "subresource", r.string(wire, `${where}.subresource`));
    else return false;
    return true;
  });
  return o;
}

/** ObjectMeta as the API server's JSON shows it (empty fields left out). */
export function decodeObjectMeta(raw: Uint8Array): Json {
  const o: Json = {};
  const labels: Record<string, string> = {};
  const annotations: Record<string, string> = {};
  const ownerReferences: Json[] = [];
  const finalizers: string[] = [];
  const managedFields: Json[] = [];
  readFields(raw, "ObjectMeta", (r, field, wire) => {
    const where = `metadata.${META_KEYS[field - 1] ?? field}`;
    switch (field) {
      case 1:
      case 2:
      case 3:
      case 4:
      case 5:
      case 6:
        setNonEmpty(o, META_KEYS[field - 1]!, r.string(wire, where));
        break;
      case 7:
        setNonEmpty(o, "generation", r.int(wire, where));
        break;
      case 8:
      case 9:
        setNonEmpty(o, META_KEYS[field - 1]!, decodeTime(r.bytes(wire, where), where, false));
        break;
      case 10:
        o.deletionGracePeriodSeconds = r.int(wire, where);
        break;
      case 11:
        decodeStringEntry(r, wire, where, labels);
        break;
      case 12:
        decodeStringEntry(r, wire, where, annotations);
        break;
      case 13:
        ownerReferences.push(decodeOwnerReference(r.bytes(wire, where), `${where}[${ownerReferences.length}]`));
        break;
      case 14:
        finalizers.push(r.string(wire, where));
        break;
      case 17:
        managedFields.push(decodeManagedFields(r.bytes(wire, "metadata.managedFields"), `metadata.managedFields[${managedFields.length}]`));
        break;
      default:
        return false;
    }
    return true;
  });
  if (Object.keys(labels).length) o.labels = labels;
  if (Object.keys(annotations).length) o.annotations = annotations;
  if (ownerReferences.length) o.ownerReferences = ownerReferences;
  if (finalizers.length) o.finalizers = finalizers;
  if (managedFields.length) o.managedFields = managedFields;
  return o;
}
