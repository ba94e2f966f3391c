import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { createPrivateKey, generateKeyPairSync, X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as der from "./der.ts";
import { certificateValidity, createCertificate, createCertificateRequest, generateEcKey } from "./x509.ts";

const openssl = (args: string[], dir: string) => execFileSync("openssl", args, { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

describe("DER", () => {
  test("integers, OIDs, lengths and times encode as X.690 says", () => {
    expect([...der.integer(0)]).toEqual([0x02, 0x01, 0x00]);
    expect([...der.integer(128)]).toEqual([0x02, 0x02, 0x00, 0x80]);
    expect([...der.integer(0x1234n)]).toEqual([0x02, 0x02, 0x12, 0x34]);
    expect([...der.oid("1.2.840.10045.4.3.2")]).toEqual([0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]);
    expect([...der.octetString(new Uint8Array(200))].slice(0, 3)).toEqual([0x04, 0x81, 200]);
    expect([...der.octetString(new Uint8Array(300))].slice(0, 4)).toEqual([0x04, 0x82, 0x01, 0x2c]);
    expect(new TextDecoder().decode(der.time(Date.parse("2026-11-21T22:00:05Z")).subarray(2))).toBe("261121220005Z");
    expect(new TextDecoder().decode(der.time(Date.parse("2051-01-01T00:00:00Z")).subarray(2))).toBe("20510101000000Z");
  });

  test("invalid OIDs are refused; PEM is 64-column base64 between its labels", () => {
    expect(() => der.oid("1")).toThrow("invalid OID 1");
    expect(() => der.oid("1.2.x")).toThrow("invalid OID");
    const pem = der.toPem("CERTIFICATE", new Uint8Array(100));
    const lines = pem.trim().split("\n");
    expect(lines[0]).toBe("-----BEGIN CERTIFICATE-----");
    expect(lines.slice(1, -1).map((l) => l.length)).toEqual([64, 64, 8]); // 100 bytes: 136 base64 characters
    expect([...der.fromPem(pem, "CERTIFICATE")]).toEqual([...new Uint8Array(100)]);
  });

  test("the reader refuses truncated input instead of reading past it", () => {
    expect(() => der.children(new Uint8Array([0x30, 0x05, 0x01]))).toThrow("truncated DER");
    expect(der.children(der.sequence(der.integer(1), der.integer(2))).map((e) => e.tag)).toEqual([0x30]);
  });
});

describe("requests and certificates", () => {
  test("a certificate request openssl accepts, with the node's subject and a valid signature", () => {
    const dir = mkdtempSync(join(tmpdir(), "csr-"));
    const { privateKey } = generateEcKey();
    writeFileSync(join(dir, "r.csr"), createCertificateRequest(privateKey, { organizations: ["system:nodes"], commonName: "system:node:n1" }));
    const out = openssl(["req", "-in", "r.csr", "-noout", "-verify", "-subject"], dir);
    expect(out).toContain("subject=O = system:nodes, CN = system:node:n1");
  });

  test("a request with SANs (a serving certificate's) carries them in an extensionRequest that openssl reads", () => {
    const dir = mkdtempSync(join(tmpdir(), "csr-san-"));
    const { privateKey } = generateEcKey();
    writeFileSync(join(dir, "r.csr"), createCertificateRequest(privateKey, { organizations: ["system:nodes"], commonName: "system:node:n1" }, ["n1", "10.0.0.7", "fd00::1"]));
    const out = openssl(["req", "-in", "r.csr", "-noout", "-verify", "-text"], dir);
    expect(out).toContain("Requested Extensions:");
    expect(out).toContain("DNS:n1, IP Address:10.0.0.7, IP Address:FD00:0:0:0:0:0:0:1");
  });

  test("a self-signed serving certificate with SANs that verifies against itself", () => {
    const dir = mkdtempSync(join(tmpdir(), "crt-"));
    const { privateKey } = generateEcKey();
    const now = Date.parse("2026-11-21T00:00:00Z");
    const pem = createCertificate(
      {
        subject: { commonName: "n1@1763683200" },
        publicKey: privateKey,
        notBeforeMs: now,
        notAfterMs: now + 365 * 86_400_000,
        serial: 42n,
        usages: ["serverAuth"],
        altNames: ["n1", "10.0.0.7", "fd00::1"],
      },
      privateKey,
    );
    const cert = new X509Certificate(pem);
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.subjectAltName).toBe("DNS:n1, IP Address:10.0.0.7, IP Address:FD00:0:0:0:0:0:0:1");
    expect(cert.checkIP("10.0.0.7")).toBe("10.0.0.7");
    expect(certificateValidity(pem)).toMatchObject({ notBeforeMs: now, notAfterMs: now + 365 * 86_400_000, serial: "2A" });
    writeFileSync(join(dir, "c.pem"), pem);
    const text = openssl(["x509", "-in", "c.pem", "-noout", "-text"], dir);
    expect(text).toContain("TLS Web Server Authentication");
    expect(text).toContain("Digital Signature");
    expect(openssl(["verify", "-CAfile", "c.pem", "c.pem"], dir)).toContain("c.pem: OK");
  });

  test("a client certificate issued by an RSA CA chains to it (the issuer is the CA's subject, byte for byte)", () => {
    const dir = mkdtempSync(join(tmpdir(), "ca-"));
    openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/O=test/CN=test-ca"], dir);
    const ca = readFileSync(join(dir, "ca.crt"), "utf8");
    const caKey = createPrivateKey(readFileSync(join(dir, "ca.key"), "utf8"));
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
    const now = Date.now();
    const pem = createCertificate(
      {
        subject: { organizations: ["system:nodes"], commonName: "system:node:n1" },
        publicKey: privateKey,
        notBeforeMs: now - 1000,
        notAfterMs: now + 60_000,
        serial: 7n,
        usages: ["clientAuth"],
      },
      caKey,
      { certificatePem: ca },
    );
    writeFileSync(join(dir, "leaf.pem"), pem);
    expect(openssl(["verify", "-CAfile", "ca.crt", "leaf.pem"], dir)).toContain("leaf.pem: OK");
    expect(new X509Certificate(pem).issuer).toBe(new X509Certificate(ca).subject);
  });
});
