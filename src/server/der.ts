/**
 * A minimal ASN.1 DER encoder: just what a self-signed X.509 v3 certificate
 * needs (selfsigned.ts). Neither Bun nor Node can create certificates, and
 * the agent must not depend on an openssl binary on edge nodes.
 *
 * Every function returns the complete TLV (tag, length, value) as bytes.
 */

/** Definite-length encoding: short form below 128, else 0x80|n followed by n big-endian bytes. */
export function encodeLength(n: number): Uint8Array {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`invalid DER length ${n}`);
  if (n < 0x80) return Uint8Array.of(n);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Uint8Array.of(0x80 | bytes.length, ...bytes);
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function tlv(tag: number, value: Uint8Array): Uint8Array {
  return concat([Uint8Array.of(tag), encodeLength(value.length), value]);
}

export const sequence = (...items: Uint8Array[]) => tlv(0x30, concat(items));
export const set = (...items: Uint8Array[]) => tlv(0x31, concat(items));
export const octetString = (b: Uint8Array) => tlv(0x04, b);
export const nullValue = () => Uint8Array.of(0x05, 0x00);
export const boolean = (b: boolean) => Uint8Array.of(0x01, 0x01, b ? 0xff : 0x00);
export const utf8String = (s: string) => tlv(0x0c, new TextEncoder().encode(s));
/** [n] EXPLICIT: a constructed context tag around a complete TLV. */
export const explicit = (n: number, inner: Uint8Array) => tlv(0xa0 | n, inner);
/** [n] IMPLICIT on a primitive value (SAN's dNSName [2] and iPAddress [7]). */
export const implicitPrimitive = (n: number, value: Uint8Array) => tlv(0x80 | n, value);

/** A non-negative INTEGER from big-endian bytes: leading zeros trimmed, a 0x00 added when the high bit is set. */
export function unsignedInteger(bytes: Uint8Array): Uint8Array {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  let v = bytes.subarray(i);
  if (v.length === 0) v = Uint8Array.of(0);
  if (v[0]! & 0x80) v = concat([Uint8Array.of(0), v]);
  return tlv(0x02, v);
}

export const smallInteger = (n: number) => {
  if (!Number.isInteger(n) || n < 0 || n > 0x7fffffff) throw new RangeError(`smallInteger: ${n}`);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return unsignedInteger(Uint8Array.from(bytes));
};

/** BIT STRING of whole bytes (no unused bits): signatures, keys. */
export const bitString = (b: Uint8Array) => tlv(0x03, concat([Uint8Array.of(0), b]));

/**
 * BIT STRING of named bits (KeyUsage): bit 0 is the most significant bit of
 * the first byte; DER drops trailing zero bits and counts them as unused.
 */
export function namedBits(bits: readonly number[]): Uint8Array {
  if (bits.length === 0) return Uint8Array.of(0x03, 0x01, 0x00);
  const highest = Math.max(...bits);
  const bytes = new Uint8Array(Math.floor(highest / 8) + 1);
  for (const b of bits) bytes[Math.floor(b / 8)]! |= 0x80 >> b % 8;
  const unused = 7 - (highest % 8);
  return tlv(0x03, concat([Uint8Array.of(unused), bytes]));
}

/** OBJECT IDENTIFIER from dotted text: 40*a+b, then base-128 arcs. */
export function oid(dotted: string): Uint8Array {
  const arcs = dotted.split(".").map((a) => {
    if (!/^\d+$/.test(a)) throw new Error(`invalid OID ${JSON.stringify(dotted)}`);
    return Number(a);
  });
  if (arcs.length < 2 || arcs[0]! > 2 || (arcs[0]! < 2 && arcs[1]! >= 40)) throw new Error(`invalid OID ${JSON.stringify(dotted)}`);
  const out: number[] = [];
  const push = (n: number) => {
    const groups = [n & 0x7f];
    for (let v = Math.floor(n / 128); v > 0; v = Math.floor(v / 128)) groups.unshift((v & 0x7f) | 0x80);
    out.push(...groups);
  };
  push(arcs[0]! * 40 + arcs[1]!);
  for (const a of arcs.slice(2)) push(a);
  return tlv(0x06, Uint8Array.from(out));
}

const pad = (n: number, w = 2) => String(n).padStart(w, "0");

/** RFC 5280 Time: UTCTime (YYMMDDHHMMSSZ) through 2049, GeneralizedTime (YYYYMMDDHHMMSSZ) from 2050. */
export function time(ms: number): Uint8Array {
  const d = new Date(Math.floor(ms / 1000) * 1000);
  const y = d.getUTCFullYear();
  const rest = `${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}${pad(d.getUTCHours())}${pad(d.getUTCMinutes())}${pad(d.getUTCSeconds())}Z`;
  const ascii = (s: string) => new TextEncoder().encode(s);
  return y < 2050 && y >= 1950 ? tlv(0x17, ascii(`${pad(y % 100)}${rest}`)) : tlv(0x18, ascii(`${pad(y, 4)}${rest}`));
}

/** PEM armour: base64 in 64-column lines. */
export function pem(label: string, der: Uint8Array): string {
  const b64 = Buffer.from(der).toString("base64");
  return `-----BEGIN ${label}-----\n${b64.match(/.{1,64}/g)!.join("\n")}\n-----END ${label}-----\n`;
}
