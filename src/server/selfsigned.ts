/**
 * The serving certificate of 10250 when neither tlsCertFile nor
 * tlsPrivateKeyFile is set, as upstream's kubelet makes it
 * (cmd/kubelet/app/server.go → certutil.GenerateSelfSignedCertKey):
 * `<certDir>/kubelet.crt` and `<certDir>/kubelet.key`, made on the first
 * start and reused afterwards; subject CN `<hostname>@<unix time>`, SANs the
 * node's hostname (a DNS name, or an IP when it is one) and its IPs, server
 * authentication, valid for a year from an hour ago.
 *
 * Unlike upstream, the certificate is its own issuer (no separate CA) and
 * the key is ECDSA P-256: the certificate is built with the small DER
 * encoder in der.ts and signed with node:crypto, because neither Bun nor
 * Node can create certificates and edge nodes need not have openssl.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, X509Certificate, createPrivateKey, type KeyObject } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { isIPv4, isIPv6 } from "node:net";
import { join } from "node:path";
import {
  bitString,
  boolean,
  concat,
  explicit,
  implicitPrimitive,
  namedBits,
  octetString,
  oid,
  pem,
  sequence,
  set,
  smallInteger,
  time,
  unsignedInteger,
  utf8String,
} from "./der.ts";

const OID = {
  ecdsaWithSHA256: "1.2.840.10045.4.3.2",
  commonName: "2.5.4.3",
  subjectKeyIdentifier: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1",
};

const YEAR_MS = 365 * 24 * 3600_000;

/** 4 or 16 bytes of an IPv4/IPv6 address; throws for anything else. */
export function ipBytes(ip: string): Uint8Array {
  if (isIPv4(ip)) return Uint8Array.from(ip.split(".").map(Number));
  if (!isIPv6(ip)) throw new Error(`not an IP address: ${JSON.stringify(ip)}`);
  let text = ip;
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hex groups.
  const v4 = text.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (v4) {
    const b = v4[1]!.split(".").map(Number);
    text = text.slice(0, -v4[1]!.length) + `${((b[0]! << 8) | b[1]!).toString(16)}:${((b[2]! << 8) | b[3]!).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = parseInt(g, 16);
    out[i * 2] = n >> 8;
    out[i * 2 + 1] = n & 0xff;
  });
  return out;
}

const extension = (id: string, critical: boolean, value: Uint8Array) =>
  critical ? sequence(oid(id), boolean(true), octetString(value)) : sequence(oid(id), octetString(value));

export interface SelfSignedOptions {
  /** The node's hostname (nodeName); an IP here becomes an IP SAN, as upstream. */
  hostname: string;
  /** Further IP SANs (the node's IPs). */
  ips?: readonly string[];
  /** Milliseconds since the epoch. */
  now: number;
  /** Random bytes for the serial number; injected for deterministic tests. */
  random?: (n: number) => Uint8Array;
  /** Key pair; generated (P-256) when absent. */
  keys?: { privateKey: KeyObject; publicKey: KeyObject };
}

export interface CertAndKey {
  cert: string;
  key: string;
}

/** A self-signed serving certificate and its key, both PEM. */
export function createSelfSignedCert(opts: SelfSignedOptions): CertAndKey {
  const { privateKey, publicKey } = opts.keys ?? generateKeyPairSync("ec", { namedCurve: "P-256" });
  const spki = new Uint8Array(publicKey.export({ type: "spki", format: "der" }));
  const jwk = publicKey.export({ format: "jwk" });
  const point = concat([Uint8Array.of(4), Buffer.from(jwk.x!, "base64url"), Buffer.from(jwk.y!, "base64url")]);

  const serial = new Uint8Array(opts.random ? opts.random(16) : randomBytes(16));
  serial[0]! &= 0x7f; // positive, and never all zero below:
  serial[15]! |= 0x01;
  const name = sequence(set(sequence(oid(OID.commonName), utf8String(`${opts.hostname}@${Math.floor(opts.now / 1000)}`))));
  const algorithm = sequence(oid(OID.ecdsaWithSHA256));
  const notBefore = opts.now - 3600_000; // upstream backdates an hour, for clocks a little behind

  const sanEntries: Uint8Array[] = [];
  const hostIsIP = isIPv4(opts.hostname) || isIPv6(opts.hostname);
  const ips = [...new Set([...(hostIsIP ? [opts.hostname] : []), ...(opts.ips ?? [])])];
  if (!hostIsIP) sanEntries.push(implicitPrimitive(2, new TextEncoder().encode(opts.hostname)));
  for (const ip of ips) sanEntries.push(implicitPrimitive(7, ipBytes(ip)));

  const extensions = sequence(
    // digitalSignature (0) and keyCertSign (5): it signs TLS handshakes and, being self-signed, itself.
    extension(OID.keyUsage, true, namedBits([0, 5])),
    extension(OID.extKeyUsage, false, sequence(oid(OID.serverAuth))),
    // CA:TRUE so that clients (and `openssl verify`) can take it as its own trust anchor.
    extension(OID.basicConstraints, true, sequence(boolean(true))),
    extension(OID.subjectKeyIdentifier, false, octetString(new Uint8Array(createHash("sha1").update(point).digest()))),
    ...(sanEntries.length ? [extension(OID.subjectAltName, false, sequence(...sanEntries))] : []),
  );

  const tbs = sequence(
    explicit(0, smallInteger(2)), // v3
    unsignedInteger(serial),
    algorithm,
    name,
    sequence(time(notBefore), time(notBefore + YEAR_MS)),
    name,
    spki,
    explicit(3, extensions),
  );
  const signature = new Uint8Array(sign("sha256", tbs, privateKey));
  const der = sequence(tbs, algorithm, bitString(signature));
  return { cert: pem("CERTIFICATE", der), key: privateKey.export({ type: "sec1", format: "pem" }).toString() };
}

export interface ServingCertOptions {
  /** --cert-dir */
  certDir: string;
  hostname: string;
  ips?: readonly string[];
  now: number;
}

export interface ServingCert extends CertAndKey {
  certFile: string;
  keyFile: string;
  /** False when an earlier start's pair was reused. */
  created: boolean;
}

/**
 * `<certDir>/kubelet.crt` + `kubelet.key`: reused when both exist (a pair
 * that does not parse or match is an error naming the files, as upstream
 * fails to serve then), else made and written (key 0600, written first; each
 * file through a temporary name, so a crash never leaves half a pair).
 */
export function ensureSelfSignedCert(opts: ServingCertOptions): ServingCert {
  const certFile = join(opts.certDir, "kubelet.crt");
  const keyFile = join(opts.certDir, "kubelet.key");
  if (existsSync(certFile) && existsSync(keyFile)) {
    const cert = readFileSync(certFile, "utf8");
    const key = readFileSync(keyFile, "utf8");
    try {
      if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) throw new Error("the key does not match the certificate");
    } catch (err) {
      throw new Error(`unusable serving certificate ${certFile} / ${keyFile}: ${(err as Error).message}; remove both to have new ones made`);
    }
    return { cert, key, certFile, keyFile, created: false };
  }
  const made = createSelfSignedCert({ hostname: opts.hostname, ...(opts.ips ? { ips: opts.ips } : {}), now: opts.now });
  mkdirSync(opts.certDir, { recursive: true, mode: 0o755 });
  const write = (file: string, text: string, mode: number) => {
    const tmp = `${file}.tmp`;
    writeFileSync(tmp, text, { mode });
    chmodSync(tmp, mode);
    renameSync(tmp, file);
  };
  write(keyFile, made.key, 0o600);
  write(certFile, made.cert, 0o644);
  return { ...made, certFile, keyFile, created: true };
}
