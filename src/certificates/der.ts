/**
 * Just enough DER (X.690) to write a PKCS#10 certificate request and an
 * X.509 v3 certificate, and to read the parts of a certificate the agent
 * needs. node:crypto signs and verifies but cannot build either, and edge
 * nodes must not need an openssl binary.
 */

export type Der = Uint8Array;

function lengthBytes(n: number): number[] {
  if (n < 0x80) return [n];
  const out: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) out.unshift(v & 0xff);
  return [0x80 | out.length, ...out];
}

export function tlv(tag: number, content: Uint8Array): Der {
  const len = lengthBytes(content.length);
  const out = new Uint8Array(1 + len.length + content.length);
  out[0] = tag;
  out.set(len, 1);
  out.set(content, 1 + len.length);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.length) - p.length);
  return out;
}

export const sequence = (...items: Der[]): Der => tlv(0x30, concat(items));
export const set = (...items: Der[]): Der => tlv(0x31, concat(items));
/** [n] EXPLICIT, or IMPLICIT constructed: the caller passes the content. */
export const contextConstructed = (n: number, ...items: Der[]): Der => tlv(0xa0 | n, concat(items));
export const contextPrimitive = (n: number, content: Uint8Array): Der => tlv(0x80 | n, content);
export const nullValue = (): Der => new Uint8Array([0x05, 0x00]);
export const boolean = (v: boolean): Der => new Uint8Array([0x01, 0x01, v ? 0xff : 0x00]);
export const utf8 = (s: string): Der => tlv(0x0c, new TextEncoder().encode(s));
export const octetString = (b: Uint8Array): Der => tlv(0x04, b);
/** A BIT STRING of whole bytes, or of `bits` significant bits (key usage flags). */
export function bitString(b: Uint8Array, unusedBits = 0): Der {
  return tlv(0x03, concat([new Uint8Array([unusedBits]), b]));
}

export function integer(v: bigint | number): Der {
  let n = BigInt(v);
  if (n < 0n) throw new Error("negative DER integers are not needed here");
  const bytes: number[] = [];
  do {
    bytes.unshift(Number(n & 0xffn));
    n >>= 8n;
  } while (n > 0n);
  if (bytes[0]! & 0x80) bytes.unshift(0); // keep it positive
  return tlv(0x02, new Uint8Array(bytes));
}

export function oid(dotted: string): Der {
  const arcs = dotted.split(".").map(Number);
  if (arcs.length < 2 || arcs.some((a) => !Number.isInteger(a) || a < 0)) throw new Error(`invalid OID ${dotted}`);
  const bytes = [40 * arcs[0]! + arcs[1]!];
  for (const arc of arcs.slice(2)) {
    const chunk = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift(0x80 | (v & 0x7f));
    bytes.push(...chunk);
  }
  return tlv(0x06, new Uint8Array(bytes));
}

/** UTCTime before 2050, GeneralizedTime after, as RFC 5280 requires. */
export function time(ms: number): Der {
  const d = new Date(Math.floor(ms / 1000) * 1000);
  const iso = d.toISOString(); // 2026-01-02T03:04:05.000Z
  const digits = iso.slice(0, 19).replace(/[-T:]/g, "");
  const year = d.getUTCFullYear();
  return year < 2050 ? tlv(0x17, new TextEncoder().encode(`${digits.slice(2)}Z`)) : tlv(0x18, new TextEncoder().encode(`${digits}Z`));
}

export const OID = {
  commonName: "2.5.4.3",
  organization: "2.5.4.10",
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  sha256WithRsa: "1.2.840.113549.1.1.11",
  keyUsage: "2.5.29.15",
  extKeyUsage: "2.5.29.37",
  basicConstraints: "2.5.29.19",
  subjectKeyIdentifier: "2.5.29.14",
  subjectAltName: "2.5.29.17",
  extensionRequest: "1.2.840.113549.1.9.14",
  serverAuth: "1.3.6.1.5.5.7.3.1",
  clientAuth: "1.3.6.1.5.5.7.3.2",
} as const;

/** A Name with organizations first, then the common name, as Go's pkix.Name marshals them. */
export function name(subject: { organizations?: string[]; commonName: string }): Der {
  const rdn = (type: string, value: string) => set(sequence(oid(type), utf8(value)));
  return sequence(...(subject.organizations ?? []).map((o) => rdn(OID.organization, o)), rdn(OID.commonName, subject.commonName));
}

export function toPem(label: string, der: Uint8Array): string {
  const b64 = Buffer.from(der).toString("base64");
  return `-----BEGIN ${label}-----\n${b64.match(/.{1,64}/g)!.join("\n")}\n-----END ${label}-----\n`;
}

export function fromPem(pem: string, label: string): Uint8Array {
  const m = new RegExp(`-----BEGIN ${label}-----([^-]+)-----END ${label}-----`).exec(pem);
  if (!m) throw new Error(`no ${label} block in PEM`);
  return new Uint8Array(Buffer.from(m[1]!.replace(/\s+/g, ""), "base64"));
}

/** One element of a DER buffer: its tag, content and whole encoding. */
export interface DerElement {
  tag: number;
  content: Uint8Array;
  raw: Uint8Array;
}

/** The elements inside a constructed value's content. Throws on truncated input. */
export function children(content: Uint8Array): DerElement[] {
  const out: DerElement[] = [];
  let at = 0;
  while (at < content.length) {
    const start = at;
    const tag = content[at++]!;
    let len = content[at++];
    if (len === undefined) throw new Error("truncated DER");
    if (len & 0x80) {
      const n = len & 0x7f;
      if (n === 0 || n > 4) throw new Error("unsupported DER length");
      len = 0;
      for (let i = 0; i < n; i++) len = len * 256 + content[at++]!;
    }
    if (at + len > content.length) throw new Error("truncated DER");
    out.push({ tag, content: content.subarray(at, at + len), raw: content.subarray(start, at + len) });
    at += len;
  }
  return out;
}

/** The subject Name of a certificate, byte for byte (an issued certificate's issuer must equal it). */
export function certificateSubject(certDer: Uint8Array): Uint8Array {
  const [cert] = children(certDer);
  const [tbs] = children(cert!.content);
  const fields = children(tbs!.content);
  const offset = fields[0]!.tag === 0xa0 ? 1 : 0; // [0] version is optional
  return fields[offset + 4]!.raw;
}
