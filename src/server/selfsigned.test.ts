import { afterAll, describe, expect, test } from "bun:test";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSelfSignedCert, ensureSelfSignedCert, ipBytes } from "./selfsigned.ts";

const dir = mkdtempSync(join(tmpdir(), "selfsigned-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);

describe("ipBytes", () => {
  test.each([
    ["10.0.0.1", "0a000001"],
    ["::1", "00000000000000000000000000000001"],
    ["fd00::1:2", "fd000000000000000000000000010002"],
    ["2001:db8:0:0:1:0:0:1", "20010db8000000000001000000000001"],
    ["::ffff:1.2.3.4", "00000000000000000000ffff01020304"],
  ])("%s", (ip, want) => {
    expect(Buffer.from(ipBytes(ip)).toString("hex")).toBe(want);
  });
  test("not an IP", () => {
    expect(() => ipBytes("node1")).toThrow('not an IP address: "node1"');
  });
});

describe("createSelfSignedCert", () => {
  const made = createSelfSignedCert({ hostname: "node1", ips: ["10.0.0.1", "fd00::1"], now: NOW, random: (n) => new Uint8Array(n).fill(0xff) });
  const x = new X509Certificate(made.cert);

  test("node:crypto reads it: upstream's CN, the SANs, a year from an hour ago, self-signed, key matches", () => {
    expect(x.subject).toBe(`CN=node1@${NOW / 1000}`);
    expect(x.issuer).toBe(x.subject);
    expect(x.subjectAltName).toBe("DNS:node1, IP Address:10.0.0.1, IP Address:FD00:0:0:0:0:0:0:1");
    expect(new Date(x.validFrom).getTime()).toBe(NOW - 3600_000);
    expect(new Date(x.validTo).getTime()).toBe(NOW - 3600_000 + 365 * 24 * 3600_000);
    expect(x.serialNumber).toBe("7F" + "FF".repeat(15));
    expect(x.keyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]);
    expect(x.verify(x.publicKey)).toBe(true);
    expect(x.checkPrivateKey(createPrivateKey(made.key))).toBe(true);
    expect(x.checkHost("node1")).toBe("node1");
    expect(x.checkIP("10.0.0.1")).toBe("10.0.0.1");
  });

  test("a hostname that is an IP becomes an IP SAN, as upstream", () => {
    const c = new X509Certificate(createSelfSignedCert({ hostname: "192.168.1.5", now: NOW }).cert);
    expect(c.subjectAltName).toBe("IP Address:192.168.1.5");
  });

  test("openssl parses every extension and verifies it as its own anchor", () => {
    const file = join(dir, "made.crt");
    writeFileSync(file, made.cert);
    const text = execFileSync("openssl", ["x509", "-in", file, "-noout", "-text"], { encoding: "utf8" });
    for (const want of [
      "Version: 3 (0x2)",
      "ecdsa-with-SHA256",
      "X509v3 Key Usage: critical",
      "Digital Signature, Certificate Sign",
      "TLS Web Server Authentication",
      "CA:TRUE",
      "X509v3 Subject Key Identifier",
      "DNS:node1, IP Address:10.0.0.1",
    ]) {
      expect(text).toContain(want);
    }
    const parsed = execFileSync("openssl", ["asn1parse", "-in", file], { encoding: "utf8" });
    expect(parsed).not.toContain("Error");
    // -attime: the certificate is dated in the test's fixed past.
    const verified = execFileSync("openssl", ["verify", "-attime", String(NOW / 1000), "-purpose", "sslserver", "-CAfile", file, file], { encoding: "utf8" });
    expect(verified.trim()).toBe(`${file}: OK`);
  });
});

describe("ensureSelfSignedCert", () => {
  test("made on first start (key 0600), reused on later starts", () => {
    const certDir = join(dir, "pki");
    const first = ensureSelfSignedCert({ certDir, hostname: "n1", ips: ["127.0.0.1"], now: NOW });
    expect(first.created).toBe(true);
    expect(first.certFile).toBe(join(certDir, "kubelet.crt"));
    expect(statSync(first.keyFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(first.certFile, "utf8")).toBe(first.cert);
    const again = ensureSelfSignedCert({ certDir, hostname: "n1", now: NOW + 1000 });
    expect(again.created).toBe(false);
    expect(again.cert).toBe(first.cert);
    expect(again.key).toBe(first.key);
  });

  test("a pair that does not match is an error naming the files", () => {
    const certDir = join(dir, "mismatch");
    ensureSelfSignedCert({ certDir, hostname: "n1", now: NOW });
    writeFileSync(join(certDir, "kubelet.key"), createSelfSignedCert({ hostname: "x", now: NOW }).key);
    expect(() => ensureSelfSignedCert({ certDir, hostname: "n1", now: NOW })).toThrow(`unusable serving certificate ${join(certDir, "kubelet.crt")}`);
  });

  test("a TLS server serves with it and a client trusting it connects", async () => {
    const made = createSelfSignedCert({ hostname: "localhost", ips: ["127.0.0.1"], now: Date.now() });
    const server = createServer({ cert: made.cert, key: made.key }, (s) => s.end("hello"));
    await new Promise<void>((res) => server.listen(0, "127.0.0.1", res));
    try {
      const port = (server.address() as { port: number }).port;
      const got = await new Promise<string>((resolve, reject) => {
        const c = connect({ host: "127.0.0.1", port, ca: made.cert, servername: "localhost" }, () => {
          if (!c.authorized) reject(new Error(String(c.authorizationError)));
        });
        let text = "";
        c.on("data", (d: Buffer) => (text += d.toString()));
        c.on("end", () => resolve(text));
        c.on("error", reject);
      });
      expect(got).toBe("hello");
    } finally {
      server.close();
    }
  });
});
