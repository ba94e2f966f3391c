/**
 * Keys, certificate requests and certificates with node:crypto and the DER
 * writer: ECDSA P-256 keys (what upstream's kubelet generates), PKCS#10
 * requests for the CSR API, and X.509 v3 certificates (self-signed serving
 * certificates; tests issue short-lived ones with a CA key).
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, X509Certificate, type KeyObject } from "node:crypto";
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

/** A PKCS#10 certificate request signed by `key`, in PEM ("CERTIFICATE REQUEST"). */
export function createCertificateRequest(key: KeyObject, subject: Subject): string {
  const info = der.sequence(der.integer(0), der.name(subject), spki(key), der.contextConstructed(0));
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
  altNames?: string[];
}

/** An X.509 v3 leaf certificate; `issuer` absent means self-signed with `signingKey`. */
export function createCertificate(t: CertificateTemplate, signingKey: KeyObject, issuer?: { certificatePem: string }): string {
  const issuerName = issuer ? der.certificateSubject(der.fromPem(issuer.certificatePem, "CERTIFICATE")) : der.name(t.subject);
  const keyUsageBits = t.publicKey.asymmetricKeyType === "rsa" ? 0xa0 : 0x80; // digitalSignature (+ keyEncipherment for RSA)
  const extensions = [
    der.sequence(der.oid(der.OID.keyUsage), der.boolean(true), der.octetString(der.bitString(new Uint8Array([keyUsageBits]), 5))),
    der.sequence(der.oid(der.OID.extKeyUsage), der.octetString(der.sequence(...t.usages.map((u) => der.oid(der.OID[u]))))),
    der.sequence(der.oid(der.OID.basicConstraints), der.boolean(true), der.octetString(der.sequence())),
  ];
  if (t.altNames?.length) {
    const general = t.altNames.map((n) => (isIP(n) ? der.contextPrimitive(7, ipBytes(n)) : der.contextPrimitive(2, new TextEncoder().encode(n))));
    extensions.push(der.sequence(der.oid(der.OID.subjectAltName), der.octetString(der.sequence(...general))));
  }
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

function ipBytes(ip: string): Uint8Array {
  if (isIP(ip) === 4) return new Uint8Array(ip.split(".").map(Number));
  const [head, tail] = ip.split("::") as [string, string | undefined];
  const groups = (s: string | undefined) => (s ? s.split(":").map((g) => parseInt(g, 16)) : []);
  const h = groups(head);
  const t = groups(tail);
  const all = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill(0), ...t];
  return new Uint8Array(all.flatMap((g) => [g >> 8, g & 0xff]));
}

/** Validity of the first certificate in a PEM bundle. */
export function certificateValidity(pem: string): { notBeforeMs: number; notAfterMs: number; serial: string; subject: string } {
  const cert = new X509Certificate(pem);
  return { notBeforeMs: Date.parse(cert.validFrom), notAfterMs: Date.parse(cert.validTo), serial: cert.serialNumber, subject: cert.subject };
}
