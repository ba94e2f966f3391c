import { afterAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect, type TLSSocket } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { memoryLogger } from "../util/log.ts";
import { serveTls } from "./tls.ts";
import { TlsOptionsError, tlsOptionProblems, tlsServerOptions } from "../config/tls-options.ts";

describe("tlsServerOptions", () => {
  test("Go names become OpenSSL names; empty fields leave the defaults", () => {
    expect(tlsServerOptions("", [])).toEqual({});
    expect(tlsServerOptions("VersionTLS13", [])).toEqual({ minVersion: "TLSv1.3" });
    expect(tlsServerOptions("VersionTLS12", ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_RSA_WITH_AES_128_CBC_SHA"])).toEqual({
      minVersion: "TLSv1.2",
      ciphers: "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:AES128-SHA",
    });
  });

  test("TLS 1.3 suites are accepted and change nothing (as in Go); legacy CHACHA20 aliases collapse", () => {
    expect(tlsServerOptions("", ["TLS_AES_128_GCM_SHA256"])).toEqual({});
    expect(tlsServerOptions("", ["TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"])).toEqual({ ciphers: "ECDHE-RSA-CHACHA20-POLY1305" });
  });

  test("unknown names are errors naming the field and flag", () => {
    expect(tlsOptionProblems("TLS1.2", ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "AES128-SHA"])).toEqual([
      'field "tlsMinVersion" (--tls-min-version): unknown TLS version "TLS1.2"; one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13',
      'field "tlsCipherSuites[1]" (--tls-cipher-suites): unknown cipher suite "AES128-SHA"',
    ]);
    expect(tlsOptionProblems("VersionTLS13", ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"])).toEqual([
      'field "tlsCipherSuites" (--tls-cipher-suites): cannot be set when tlsMinVersion (--tls-min-version) is VersionTLS13',
    ]);
    expect(() => tlsServerOptions("VersionTLS9", [])).toThrow(TlsOptionsError);
  });
});

describe("serveTls with the options", () => {
  const dir = mkdtempSync(join(tmpdir(), "tls-options-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out", "c.pem", "-days", "1", "-subj", "/CN=n1"], { cwd: dir, stdio: "ignore" });
  const cert = readFileSync(join(dir, "c.pem"), "utf8");
  const key = readFileSync(join(dir, "k.pem"), "utf8");
  const app = new Hono().get("/", (c) => c.text("ok"));

  /** The negotiated protocol and cipher, or the handshake's error. */
  const handshake = (port: number, opts: { maxVersion?: "TLSv1.2" | "TLSv1.3"; ciphers?: string }) =>
    new Promise<{ protocol: string | null; cipher: string } | { error: string }>((resolve) => {
      const s: TLSSocket = connect({ host: "127.0.0.1", port, rejectUnauthorized: false, ...opts });
      s.once("secureConnect", () => {
        resolve({ protocol: s.getProtocol(), cipher: s.getCipher().name });
        s.destroy();
      });
      s.once("error", (err) => resolve({ error: err.message }));
    });

  test("tlsMinVersion VersionTLS13: a TLS 1.2 client is refused, a TLS 1.3 one served", async () => {
    await using server = await serveTls({ app, host: "127.0.0.1", port: 0, cert, key, logger: memoryLogger().logger, ...tlsServerOptions("VersionTLS13", []) });
    expect(await handshake(server.port, { maxVersion: "TLSv1.2" })).toEqual({ error: expect.stringMatching(/protocol version|PROTOCOL_VERSION/i) });
    expect(await handshake(server.port, {})).toMatchObject({ protocol: "TLSv1.3" });
  });

  test("tlsCipherSuites: a TLS 1.2 client offering only another suite is refused", async () => {
    await using server = await serveTls({
      app,
      host: "127.0.0.1",
      port: 0,
      cert,
      key,
      logger: memoryLogger().logger,
      ...tlsServerOptions("", ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]),
    });
    expect(await handshake(server.port, { maxVersion: "TLSv1.2", ciphers: "ECDHE-RSA-AES256-GCM-SHA384" })).toEqual({
      error: expect.stringMatching(/handshake failure|HANDSHAKE_FAILURE/i),
    });
    expect(await handshake(server.port, { maxVersion: "TLSv1.2" })).toEqual({ protocol: "TLSv1.2", cipher: "ECDHE-RSA-AES128-GCM-SHA256" });
  });
});

describe("serveTls holdUntilCertificate", () => {
  const dir = mkdtempSync(join(tmpdir(), "tls-hold-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  for (const n of ["a", "b"])
    execFileSync(
      "openssl",
      ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", `${n}.key`, "-out", `${n}.crt`, "-days", "1", "-subj", `/CN=${n}`],
      { cwd: dir, stdio: "ignore" },
    );
  const pem = (f: string) => readFileSync(join(dir, f), "utf8");
  const peer = (port: number) =>
    new Promise<string>((resolve) => {
      const s: TLSSocket = connect({ host: "127.0.0.1", port, rejectUnauthorized: false });
      s.once("secureConnect", () => {
        resolve(`CN=${s.getPeerCertificate().subject.CN}`);
        s.destroy();
      });
      s.once("error", (err) => resolve(`error: ${err.message}`));
    });

  test("listens but drops connections before the handshake until setCertificate, then serves that certificate", async () => {
    const app = new Hono().get("/", (c) => c.text("ok"));
    await using server = await serveTls({ app, host: "127.0.0.1", port: 0, cert: pem("a.crt"), key: pem("a.key"), holdUntilCertificate: true, logger: memoryLogger().logger });
    expect(await peer(server.port)).toStartWith("error: ");
    server.setCertificate(pem("b.crt"), pem("b.key"));
    expect(await peer(server.port)).toBe("CN=b");
  });
});
