/**
 * Keys, certificate requests and certificates with node:crypto and the DER
 * writer: ECDSA P-256 keys (what upstream's kubelet generates), PKCS#10
 * requests for the CSR API, and X.509 v3 certificates (self-signed serving
 * certificates; tests issue short-lived ones with a CA key).
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, X509Certificate, type KeyObject } from "node:crypto";
import { isIP } from "node:net";
import * as der from "./der.ts";

export interface Subject {
  organizations?: string[];
  commonName: string;
}

export function generateEcKey(): { privateKey: KeyObject; privateKeyPem: string } {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  return { privateKey, privateKeyPem: privateKey.export({ type: "sec1", format: "pem" }).toString() };
}

export const parsePrivateKey = (pem: string): KeyObject => createPrivateKey(pem);

/** The signature algorithm that goes with a signing key. */
function signatureAlgorithm(key: KeyObject): der.Der {
  if (key.asymmetricKeyType === "ec") return der.sequence(der.oid(der.OID.ecdsaWithSha256));
  if (key.asymmetricKeyType === "rsa") return der.sequence(der.oid(der.OID.sha256WithRsa), der.nullValue());
  throw new Error(`unsupported signing key type ${key.asymmetricKeyType}`);
}

function spki(key: KeyObject): Uint8Array {
  const pub = key.type === "private" ? createPublicKey(key) : key;
  return new Uint8Array(pub.export({ type: "spki", format: "der" }));
}

/** The subjectAltName extension: IP addresses as such, anything else as a DNS name. */
function subjectAltNameExtension(altNames: readonly string[]): der.Der {
  const general = altNames.map((n) => (isIP(n) ? der.contextPrimitive(7, ipBytes(n)) : der.contextPrimitive(2, new TextEncoder().encode(n))));
  return der.sequence(der.oid(der.OID.subjectAltName), der.octetString(der.sequence(...general)));
}

/**
 * A PKCS#10 certificate request signed by `key`, in PEM ("CERTIFICATE
 * REQUEST"); `altNames` (DNS names and IPs, as a serving certificate's
 * request carries them) go in an extensionRequest attribute.
 */
export function createCertificateRequest(key: KeyObject, subject: Subject, altNames: readonly string[] = []): string {
  const attributes = altNames.length
    ? der.contextConstructed(0, der.sequence(der.oid(der.OID.extensionRequest), der.set(der.sequence(subjectAltNameExtension(altNames)))))
    : der.contextConstructed(0);
  const info = der.sequence(der.integer(0), der.name(subject), spki(key), attributes);
  const signature = new Uint8Array(sign("sha256", info, key));
  return der.toPem("CERTIFICATE REQUEST", der.sequence(info, signatureAlgorithm(key), der.bitString(signature)));
}

export interface CertificateTemplate {
  subject: Subject;
  /** The key the certificate is for. */
  publicKey: KeyObject;
  notBeforeMs: number;
  notAfterMs: number;
  serial: bigint;
  usages: ("serverAuth" | "clientAuth")[];
  /** DNS names and IP addresses. */
  altNames?: readonly string[];
  /**
   * A self-signed certificate that clients take as its own trust anchor
   * (CA:TRUE, keyCertSign, a subject key identifier), as a self-signed
   * serving certificate must be for `openssl verify` and Go clients.
   */
  ownAnchor?: boolean;
}

/** An X.509 v3 leaf certificate; `issuer` absent means self-signed with `signingKey`. */
export function createCertificate(t: CertificateTemplate, signingKey: KeyObject, issuer?: { certificatePem: string }): string {
  const issuerName = issuer ? der.certificateSubject(der.fromPem(issuer.certificatePem, "CERTIFICATE")) : der.name(t.subject);
  // digitalSignature (bit 0), keyEncipherment (bit 2) for RSA keys, keyCertSign (bit 5) for an own anchor.
  const keyUsage = 0x80 | (t.publicKey.asymmetricKeyType === "rsa" ? 0x20 : 0) | (t.ownAnchor ? 0x04 : 0);
  const unusedBits = t.ownAnchor ? 2 : t.publicKey.asymmetricKeyType === "rsa" ? 5 : 7;
  const extensions = [
    der.sequence(der.oid(der.OID.keyUsage), der.boolean(true), der.octetString(der.bitString(new Uint8Array([keyUsage]), unusedBits))),
    der.sequence(der.oid(der.OID.extKeyUsage), der.octetString(der.sequence(...t.usages.map((u) => der.oid(der.OID[u]))))),
    der.sequence(der.oid(der.OID.basicConstraints), der.boolean(true), der.octetString(t.ownAnchor ? der.sequence(der.boolean(true)) : der.sequence())),
  ];
  if (t.ownAnchor) {
    const key = spki(t.publicKey);
    // RFC 5280 method 1: SHA-1 of the subjectPublicKey BIT STRING's bytes (the last element of the SPKI).
    const subjectPublicKey = der.children(der.children(key)[0]!.content)[1]!.content.subarray(1);
    extensions.push(der.sequence(der.oid(der.OID.subjectKeyIdentifier), der.octetString(der.octetString(new Uint8Array(createHash("sha1").update(subjectPublicKey).digest())))));
  }
  if (t.altNames?.length) extensions.push(subjectAltNameExtension(t.altNames));
  const tbs = der.sequence(
    der.contextConstructed(0, der.integer(2)),
    der.integer(t.serial),
    signatureAlgorithm(signingKey),
    issuerName,
    der.sequence(der.time(t.notBeforeMs), der.time(t.notAfterMs)),
    der.name(t.subject),
    spki(t.publicKey),
    der.contextConstructed(3, der.sequence(...extensions)),
  );
  const signature = new Uint8Array(sign("sha256", tbs, signingKey));
  return der.toPem("CERTIFICATE", der.sequence(tbs, signatureAlgorithm(signingKey), der.bitString(signature)));
}

/** 4 or 16 bytes of an IPv4/IPv6 address (an embedded IPv4 tail included); throws for anything else. */
export function ipBytes(ip: string): Uint8Array {
  if (isIP(ip) === 4) return Uint8Array.from(ip.split(".").map(Number));
  if (isIP(ip) !== 6) throw new Error(`not an IP address: ${JSON.stringify(ip)}`);
  let text = ip;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const b = v4[1]!.split(".").map(Number);
    text = text.slice(0, -v4[1]!.length) + `${((b[0]! << 8) | b[1]!).toString(16)}:${((b[2]! << 8) | b[3]!).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t];
  return Uint8Array.from(groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
}

/** Validity of the first certificate in a PEM bundle. */
export function certificateValidity(pem: string): { notBeforeMs: number; notAfterMs: number; serial: string; subject: string } {
  const cert = new X509Certificate(pem);
  return { notBeforeMs: Date.parse(cert.validFrom), notAfterMs: Date.parse(cert.validTo), serial: cert.serialNumber, subject: cert.subject };
}
