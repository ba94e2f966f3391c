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
 * the key is ECDSA P-256: the certificate is built by certificates/x509.ts
 * (a small DER writer) and signed with node:crypto, because neither Bun nor
 * Node can create certificates and edge nodes need not have openssl.
 */
import { createPrivateKey, generateKeyPairSync, randomBytes, X509Certificate, type KeyObject } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCertificate } from "../certificates/x509.ts";

export { ipBytes } from "../certificates/x509.ts";

const YEAR_MS = 365 * 24 * 3600_000;

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
  const serial = new Uint8Array(opts.random ? opts.random(16) : randomBytes(16));
  serial[0]! &= 0x7f; // positive, and never all zero below:
  serial[15]! |= 0x01;
  const notBefore = opts.now - 3600_000; // upstream backdates an hour, for clocks a little behind
  const cert = createCertificate(
    {
      subject: { commonName: `${opts.hostname}@${Math.floor(opts.now / 1000)}` },
      publicKey,
      notBeforeMs: notBefore,
      notAfterMs: notBefore + YEAR_MS,
      serial: BigInt(`0x${Buffer.from(serial).toString("hex")}`),
      usages: ["serverAuth"],
      altNames: [...new Set([opts.hostname, ...(opts.ips ?? [])])],
      ownAnchor: true,
    },
    privateKey,
  );
  return { cert, key: privateKey.export({ type: "sec1", format: "pem" }).toString() };
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
