/**
 * The API server's protobuf encoding (`application/vnd.kubernetes.protobuf`),
 * written by hand for the few objects this agent sends often (the Lease every
 * 10 s, events): the upstream kubelet sends those as protobuf, and a Lease PUT
 * is about 520 bytes there against 820 as JSON.
 *
 * On the wire: the 4-byte magic `k8s\0`, then a runtime.Unknown message
 * (typeMeta {apiVersion, kind}, raw = the object's own message,
 * contentEncoding, contentType). Field numbers are k8s.io/api's and
 * apimachinery's generated.proto (v1.34). Fields are written in field order,
 * non-pointer Go fields always (an empty string too), as gogo-protobuf's
 * generated marshallers do, so an object encodes to the bytes the API server
 * itself writes.
 *
 * The codecs take and give the JSON shape of an object (what
 * `JSON.parse` of the API server's JSON gives), so callers never see the
 * encoding. A field a codec does not know is a ProtobufError, never dropped:
 * the caller then uses JSON for that object, so nothing the server sent is
 * lost on the next write.
 */

export const PROTOBUF = "application/vnd.kubernetes.protobuf";
const MAGIC = [0x6b, 0x38, 0x73, 0x00];

/** An object with no encoding here, or bytes that are not what a codec expects. */
export class ProtobufError extends Error {
  override readonly name = "ProtobufError";
}

/** Wire types: a varint, or length-delimited bytes (strings, messages). */
const VARINT = 0;
const BYTES = 2;

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Writes one message; nested messages are encoded first and written as bytes. */
export class Writer {
  private readonly out: number[] = [];

  private raw(v: number | bigint): void {
    if (typeof v === "number" && v >= 0 && Number.isSafeInteger(v)) {
      while (v > 0x7f) {
        this.out.push((v % 128) | 0x80);
        v = Math.floor(v / 128);
      }
      this.out.push(v);
      return;
    }
    // Negative int32/int64 values take ten bytes (two's complement on 64 bits).
    let b = BigInt.asUintN(64, BigInt(v));
    while (b > 0x7fn) {
      this.out.push(Number(b & 0x7fn) | 0x80);
      b >>= 7n;
    }
    this.out.push(Number(b));
  }

  varint(field: number, v: number | bigint): this {
    this.raw(field * 8 + VARINT);
    this.raw(v);
    return this;
  }

  bool(field: number, v: boolean): this {
    return this.varint(field, v ? 1 : 0);
  }

  bytes(field: number, b: Uint8Array): this {
    this.raw(field * 8 + BYTES);
    this.raw(b.length);
    for (const x of b) this.out.push(x);
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, utf8.encode(s));
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.out);
  }
}

/** Reads one message field by field. */
export class Reader {
  private pos = 0;
  constructor(private readonly buf: Uint8Array) {}

  done(): boolean {
    return this.pos >= this.buf.length;
  }

  private rawVarint(): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.pos >= this.buf.length) throw new ProtobufError("truncated varint");
      const b = this.buf[this.pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return result;
    }
    throw new ProtobufError("varint longer than 10 bytes");
  }

  /** The next field's number and wire type. */
  tag(): { field: number; wire: number } {
    const t = Number(this.rawVarint());
    return { field: t >>> 3, wire: t & 7 };
  }

  /** A varint as a signed 64-bit number (int32 and int64 fields). */
  int(wire: number, where: string): number {
    if (wire !== VARINT) throw new ProtobufError(`${where}: wire type ${wire}, expected a varint`);
    return Number(BigInt.asIntN(64, this.rawVarint()));
  }

  bool(wire: number, where: string): boolean {
    return this.int(wire, where) !== 0;
  }

  bytes(wire: number, where: string): Uint8Array {
    if (wire !== BYTES) throw new ProtobufError(`${where}: wire type ${wire}, expected length-delimited`);
    const n = Number(this.rawVarint());
    if (this.pos + n > this.buf.length) throw new ProtobufError(`${where}: ${n} bytes past the end`);
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }

  string(wire: number, where: string): string {
    try {
      return fromUtf8.decode(this.bytes(wire, where));
    } catch (err) {
      if (err instanceof ProtobufError) throw err;
      throw new ProtobufError(`${where}: not UTF-8`);
    }
  }

  /** Skips a field (for messages read leniently, such as Status). */
  skip(wire: number): void {
    if (wire === VARINT) this.rawVarint();
    else if (wire === BYTES) this.bytes(wire, "skipped field");
    else if (wire === 1) this.pos += 8;
    else if (wire === 5) this.pos += 4;
    else throw new ProtobufError(`wire type ${wire} cannot be skipped`);
  }
}

/** Every field of `buf`, handed to `on`; `on` answers false for a field it does not know, which is an error in `where`. */
export function readFields(buf: Uint8Array, where: string, on: (r: Reader, field: number, wire: number) => boolean): void {
  const r = new Reader(buf);
  while (!r.done()) {
    const { field, wire } = r.tag();
    if (!on(r, field, wire)) throw new ProtobufError(`${where}: field ${field} is not known here`);
  }
}

/** Wraps an object's message in the `k8s\0` + runtime.Unknown envelope. */
export function envelope(apiVersion: string, kind: string, raw: Uint8Array): Uint8Array {
  const typeMeta = new Writer().string(1, apiVersion).string(2, kind).finish();
  const unknown = new Writer().bytes(1, typeMeta).bytes(2, raw).string(3, "").string(4, "").finish();
  const out = new Uint8Array(MAGIC.length + unknown.length);
  out.set(MAGIC);
  out.set(unknown, MAGIC.length);
  return out;
}

export interface Unwrapped {
  apiVersion: string;
  kind: string;
  raw: Uint8Array;
}

/** The envelope's type and raw message. */
export function unwrap(bytes: Uint8Array): Unwrapped {
  if (bytes.length < MAGIC.length || MAGIC.some((b, i) => bytes[i] !== b)) throw new ProtobufError("no k8s protobuf magic");
  const out: Unwrapped = { apiVersion: "", kind: "", raw: new Uint8Array() };
  let encoding = "";
  readFields(bytes.subarray(MAGIC.length), "Unknown", (r, field, wire) => {
    if (field === 1)
      readFields(r.bytes(wire, "Unknown.typeMeta"), "TypeMeta", (t, f, w) => {
        if (f === 1) out.apiVersion = t.string(w, "TypeMeta.apiVersion");
        else if (f === 2) out.kind = t.string(w, "TypeMeta.kind");
        else return false;
        return true;
      });
    else if (field === 2) out.raw = r.bytes(wire, "Unknown.raw");
    else if (field === 3) encoding = r.string(wire, "Unknown.contentEncoding");
    else if (field === 4) r.string(wire, "Unknown.contentType");
    else return false;
    return true;
  });
  if (encoding) throw new ProtobufError(`content encoding ${encoding} is not supported`);
  return out;
}

/** A metav1.Status (the body of an error answer), read leniently: only what an ApiError carries. */
export function decodeStatus(raw: Uint8Array): { status?: string; message?: string; reason?: string; code?: number; details?: { causes: { reason?: string }[] } } {
  const s: { status?: string; message?: string; reason?: string; code?: number; details?: { causes: { reason?: string }[] } } = {};
  const r = new Reader(raw);
  while (!r.done()) {
    const { field, wire } = r.tag();
    if (field === 2) s.status = r.string(wire, "Status.status");
    else if (field === 3) s.message = r.string(wire, "Status.message");
    else if (field === 4) s.reason = r.string(wire, "Status.reason");
    else if (field === 5) s.details = { causes: decodeStatusCauses(r.bytes(wire, "Status.details")) };
    else if (field === 6) s.code = r.int(wire, "Status.code");
    else r.skip(wire);
  }
  return s;
}

/** StatusDetails.causes (field 4), each cause's type (StatusCause.reason, field 1): e.g. NamespaceTerminating. */
function decodeStatusCauses(raw: Uint8Array): { reason?: string }[] {
  const causes: { reason?: string }[] = [];
  const details = new Reader(raw);
  while (!details.done()) {
    const { field, wire } = details.tag();
    if (field !== 4) {
      details.skip(wire);
      continue;
    }
    const cause: { reason?: string } = {};
    const c = new Reader(details.bytes(wire, "StatusDetails.causes"));
    while (!c.done()) {
      const t = c.tag();
      if (t.field === 1) cause.reason = c.string(t.wire, "StatusCause.reason");
      else c.skip(t.wire);
    }
    causes.push(cause);
  }
  return causes;
}
