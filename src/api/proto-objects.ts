/**
 * The objects this agent sends as protobuf, as upstream's kubelet does:
 * coordination.k8s.io/v1 Lease (written every 10 s and read back) and core/v1
 * Event (written; the answer is not read). Each codec takes the JSON shape of
 * the object and throws ProtobufError for a field it does not know.
 */
import { decodeObjectMeta, decodeTime, encodeObjectMeta, encodeTime, int, type Json, jsonObject, present, str } from "./proto-meta.ts";
import { envelope, ProtobufError, readFields, unwrap, Writer } from "./protobuf.ts";

export interface ObjectCodec {
  readonly apiVersion: string;
  readonly kind: string;
  /** The object (JSON shape) as the envelope's bytes. */
  encode(object: unknown): Uint8Array;
  /** The envelope's bytes as the object's JSON shape; absent for a codec that only writes. */
  decode?(bytes: Uint8Array): Json;
}

function checkType(o: Json, apiVersion: string, kind: string): void {
  if (present(o.apiVersion) && o.apiVersion !== apiVersion) throw new ProtobufError(`apiVersion ${String(o.apiVersion)} is not ${apiVersion}`);
  if (present(o.kind) && o.kind !== kind) throw new ProtobufError(`kind ${String(o.kind)} is not ${kind}`);
}

const LEASE_SPEC_KEYS = ["holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions", "strategy", "preferredHolder"];

function encodeLeaseSpec(v: unknown): Uint8Array {
  const s = present(v) ? jsonObject(v, "spec", LEASE_SPEC_KEYS) : {};
  // Every LeaseSpec field is a pointer in Go: written only when set.
  const w = new Writer();
  if (present(s.holderIdentity)) w.string(1, str(s.holderIdentity, "spec.holderIdentity"));
  if (present(s.leaseDurationSeconds)) w.varint(2, int(s.leaseDurationSeconds, "spec.leaseDurationSeconds"));
  if (present(s.acquireTime)) w.bytes(3, encodeTime(s.acquireTime, "spec.acquireTime", true));
  if (present(s.renewTime)) w.bytes(4, encodeTime(s.renewTime, "spec.renewTime", true));
  if (present(s.leaseTransitions)) w.varint(5, int(s.leaseTransitions, "spec.leaseTransitions"));
  if (present(s.strategy)) w.string(6, str(s.strategy, "spec.strategy"));
  if (present(s.preferredHolder)) w.string(7, str(s.preferredHolder, "spec.preferredHolder"));
  return w.finish();
}

function decodeLeaseSpec(raw: Uint8Array): Json {
  const s: Json = {};
  readFields(raw, "LeaseSpec", (r, field, wire) => {
    const key = LEASE_SPEC_KEYS[field - 1];
    const where = `spec.${key}`;
    if (field === 1 || field === 6 || field === 7) s[key!] = r.string(wire, where);
    else if (field === 2 || field === 5) s[key!] = r.int(wire, where);
    else if (field === 3 || field === 4) {
      const t = decodeTime(r.bytes(wire, where), where, true);
      if (t !== undefined) s[key!] = t;
    } else return false;
    return true;
  });
  return s;
}

export const leaseCodec: ObjectCodec = {
  apiVersion: "coordination.k8s.io/v1",
  kind: "Lease",
  encode(object) {
    const o = jsonObject(object, "Lease", ["apiVersion", "kind", "metadata", "spec"]);
    checkType(o, this.apiVersion, this.kind);
    const raw = new Writer().bytes(1, encodeObjectMeta(o.metadata)).bytes(2, encodeLeaseSpec(o.spec)).finish();
    return envelope(this.apiVersion, this.kind, raw);
  },
  decode(bytes) {
    const { apiVersion, kind, raw } = unwrap(bytes);
    if (apiVersion !== this.apiVersion || kind !== this.kind) throw new ProtobufError(`expected ${this.apiVersion} ${this.kind}, got ${apiVersion} ${kind}`);
    const lease: Json = { apiVersion, kind, metadata: {}, spec: {} };
    readFields(raw, "Lease", (r, field, wire) => {
      if (field === 1) lease.metadata = decodeObjectMeta(r.bytes(wire, "Lease.metadata"));
      else if (field === 2) lease.spec = decodeLeaseSpec(r.bytes(wire, "Lease.spec"));
      else return false;
      return true;
    });
    return lease;
  },
};

function encodeObjectReference(v: unknown, where: string): Uint8Array {
  const o = present(v) ? jsonObject(v, where, ["kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"]) : {};
  return new Writer()
    .string(1, str(o.kind, `${where}.kind`))
    .string(2, str(o.namespace, `${where}.namespace`))
    .string(3, str(o.name, `${where}.name`))
    .string(4, str(o.uid, `${where}.uid`))
    .string(5, str(o.apiVersion, `${where}.apiVersion`))
    .string(6, str(o.resourceVersion, `${where}.resourceVersion`))
    .string(7, str(o.fieldPath, `${where}.fieldPath`))
    .finish();
}

const EVENT_KEYS = [
  "apiVersion",
  "kind",
  "metadata",
  "involvedObject",
  "reason",
  "message",
  "source",
  "firstTimestamp",
  "lastTimestamp",
  "count",
  "type",
  "eventTime",
  "action",
  "related",
  "reportingComponent",
  "reportingInstance",
];

/** core/v1 Event; `series` has no encoding here (this agent aggregates by patching count). */
export const eventCodec: ObjectCodec = {
  apiVersion: "v1",
  kind: "Event",
  encode(object) {
    const o = jsonObject(object, "Event", EVENT_KEYS);
    checkType(o, this.apiVersion, this.kind);
    const source = present(o.source) ? jsonObject(o.source, "source", ["component", "host"]) : {};
    const w = new Writer()
      .bytes(1, encodeObjectMeta(o.metadata))
      .bytes(2, encodeObjectReference(o.involvedObject, "involvedObject"))
      .string(3, str(o.reason, "reason"))
      .string(4, str(o.message, "message"))
      .bytes(5, new Writer().string(1, str(source.component, "source.component")).string(2, str(source.host, "source.host")).finish())
      .bytes(6, encodeTime(o.firstTimestamp, "firstTimestamp", false))
      .bytes(7, encodeTime(o.lastTimestamp, "lastTimestamp", false))
      .varint(8, int(o.count, "count"))
      .string(9, str(o.type, "type"))
      .bytes(10, encodeTime(o.eventTime, "eventTime", true))
      .string(12, str(o.action, "action"));
    if (present(o.related)) w.bytes(13, encodeObjectReference(o.related, "related"));
    w.string(14, str(o.reportingComponent, "reportingComponent")).string(15, str(o.reportingInstance, "reportingInstance"));
    return envelope(this.apiVersion, this.kind, w.finish());
  },
};
