import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { createPublicKey, X509Certificate } from "node:crypto";
import { mkdtempSync, readlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import type { ClientCertificate, CsrApi } from "./client.ts";
import { CURRENT_SERVING_PEM, KUBELET_SERVING_SIGNER, manageServingCertificate } from "./serving.ts";
import { createCertificate, generateEcKey } from "./x509.ts";

/** A CSR API that signs once `approved` is set (as `kubectl certificate approve` would let the signer), recording each request. */
function approvingSigner(clock: FakeClock, lifetimeMs: number) {
  const ca = generateEcKey();
  const caPem = createCertificate(
    { subject: { commonName: "ca" }, publicKey: ca.privateKey, notBeforeMs: clock.now() - 1000, notAfterMs: clock.now() + 86_400_000 * 365, serial: 1n, usages: ["serverAuth"] },
    ca.privateKey,
  );
  const specs: any[] = [];
  const state = { approved: false };
  const api: CsrApi = {
    async create(csr: any) {
      specs.push(csr.spec);
      return { metadata: { name: `csr-${specs.length}` } };
    },
    async get(name) {
      if (!state.approved) return { status: {} };
      const spec = specs[Number(name.split("-")[1]) - 1];
      const der = Buffer.from(
        Buffer.from(spec.request, "base64")
          .toString()
          .replace(/-----[^-]+-----|\s/g, ""),
        "base64",
      );
      const at = der.indexOf(Buffer.from([0x30, 0x59, 0x30, 0x13]));
      const publicKey = createPublicKey({ key: der.subarray(at, at + 0x5b), format: "der", type: "spki" });
      const cert = createCertificate(
        {
          subject: { organizations: ["system:nodes"], commonName: "system:node:n1" },
          publicKey,
          notBeforeMs: clock.now(),
          notAfterMs: clock.now() + lifetimeMs,
          serial: BigInt(100 + specs.length),
          usages: ["serverAuth"],
          altNames: ["n1", "10.0.0.7"],
        },
        ca.privateKey,
        { certificatePem: caPem },
      );
      return { status: { certificate: Buffer.from(cert).toString("base64"), conditions: [{ type: "Approved", status: "True" }] } };
    },
  };
  return { api, specs, state };
}

const settle = () => new Promise((r) => setTimeout(r, 5));

describe("the serving certificate (serverTLSBootstrap)", () => {
  test("requested with the kubelet-serving signer, server auth and the node's SANs; served once approved; stored; renewed in 70-90% of its life", async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 21));
    const certDir = mkdtempSync(join(tmpdir(), "serving-"));
    const { api, specs, state } = approvingSigner(clock, 100_000);
    const served: ClientCertificate[] = [];
    const stop = new AbortController();
    using _ = manageServingCertificate({
      api,
      nodeName: "n1",
      altNames: ["n1", "10.0.0.7"],
      certDir,
      clock,
      logger: memoryLogger().logger,
      random: () => 0.5,
      signal: stop.signal,
      onCertificate: (c) => served.push(c),
    });
    for (let i = 0; i < 3; i++) {
      await settle();
      clock.advance(1000);
    }
    // Nothing to serve with until someone approves.
    expect(served).toEqual([]);
    expect(specs.length).toBe(1);
    expect(specs[0].signerName).toBe(KUBELET_SERVING_SIGNER);
    expect(specs[0].usages).toEqual(["digital signature", "server auth"]);
    const dir = mkdtempSync(join(tmpdir(), "serving-csr-"));
    writeFileSync(join(dir, "r.csr"), Buffer.from(specs[0].request, "base64"));
    const text = execFileSync("openssl", ["req", "-in", "r.csr", "-noout", "-text"], { cwd: dir, encoding: "utf8" });
    expect(text).toContain("Subject: O = system:nodes, CN = system:node:n1");
    expect(text).toContain("DNS:n1, IP Address:10.0.0.7");

    state.approved = true;
    await settle();
    clock.advance(1000);
    for (let i = 0; i < 5 && served.length === 0; i++) await settle();
    expect(served.length).toBe(1);
    expect(new X509Certificate(served[0]!.certificatePem).subjectAltName).toBe("DNS:n1, IP Address:10.0.0.7");
    expect(readlinkSync(join(certDir, CURRENT_SERVING_PEM))).toMatch(/^kubelet-server-\d{4}(-\d\d){5}\.pem$/);

    // 80% of 100 s (random 0.5 in the 70-90% window): a second request, the new certificate served.
    clock.advance(80_000);
    for (let i = 0; i < 10 && served.length < 2; i++) await settle();
    expect(specs.length).toBe(2);
    expect(served.length).toBe(2);
    expect(new X509Certificate(served[1]!.certificatePem).serialNumber).not.toBe(new X509Certificate(served[0]!.certificatePem).serialNumber);
    stop.abort();
  });

  test("a stored, still valid serving certificate is used at once without a request", async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 21));
    const certDir = mkdtempSync(join(tmpdir(), "serving-"));
    const first = approvingSigner(clock, 3_600_000);
    first.state.approved = true;
    const served: ClientCertificate[] = [];
    const stop = new AbortController();
    {
      using _ = manageServingCertificate({
        api: first.api,
        nodeName: "n1",
        altNames: ["n1"],
        certDir,
        clock,
        logger: memoryLogger().logger,
        random: () => 0,
        signal: stop.signal,
        onCertificate: (c) => served.push(c),
      });
      for (let i = 0; i < 10 && served.length === 0; i++) await settle();
    }
    const again = approvingSigner(clock, 3_600_000);
    const restarted: ClientCertificate[] = [];
    using _ = manageServingCertificate({
      api: again.api,
      nodeName: "n1",
      altNames: ["n1"],
      certDir,
      clock,
      logger: memoryLogger().logger,
      random: () => 0,
      signal: stop.signal,
      onCertificate: (c) => restarted.push(c),
    });
    expect(restarted.map((c) => c.certificatePem)).toEqual([served[0]!.certificatePem]);
    expect(again.specs).toEqual([]);
    stop.abort();
  });
});
