import { describe, expect, test } from "bun:test";
import { createPublicKey, X509Certificate } from "node:crypto";
import { lstatSync, mkdtempSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { ClientCertificateRotation, CURRENT_CLIENT_PEM, readUsableCertificate, requestClientCertificate, storeClientCertificate, type CsrApi } from "./client.ts";
import { certificateValidity, createCertificate, generateEcKey } from "./x509.ts";

/** A CSR API that signs every request with a test CA after `delaySteps` polls, or denies it. */
function fakeSigner(clock: FakeClock, opts: { lifetimeMs: number; deny?: boolean; delaySteps?: number }) {
  const ca = generateEcKey();
  const caPem = createCertificate(
    {
      subject: { commonName: "test-ca" },
      publicKey: ca.privateKey,
      notBeforeMs: clock.now() - 1000,
      notAfterMs: clock.now() + 10 * 365 * 86_400_000,
      serial: 1n,
      usages: ["clientAuth"],
    },
    ca.privateKey,
  );
  const csrs = new Map<string, { spec: any; polls: number }>();
  let serial = 100n;
  const api: CsrApi = {
    async create(csr: any) {
      const name = `csr-${csrs.size + 1}`;
      csrs.set(name, { spec: csr.spec, polls: 0 });
      return { metadata: { name } };
    },
    async get(name) {
      const entry = csrs.get(name)!;
      if (opts.deny) return { status: { conditions: [{ type: "Denied", status: "True", reason: "NotAllowed", message: "no way" }] } };
      if (entry.polls++ < (opts.delaySteps ?? 0)) return { status: {} };
      const request = Buffer.from(entry.spec.request, "base64").toString();
      // The public key from the request, as the signer would take it.
      const der = Buffer.from(request.replace(/-----[^-]+-----|\s/g, ""), "base64");
      const spkiStart = der.indexOf(Buffer.from([0x30, 0x59, 0x30, 0x13])); // P-256 SubjectPublicKeyInfo
      const publicKey = createPublicKey({ key: der.subarray(spkiStart, spkiStart + 0x5b), format: "der", type: "spki" });
      const cert = createCertificate(
        {
          subject: { organizations: ["system:nodes"], commonName: "system:node:n1" },
          publicKey,
          notBeforeMs: clock.now(),
          notAfterMs: clock.now() + opts.lifetimeMs,
          serial: serial++,
          usages: ["clientAuth"],
        },
        ca.privateKey,
        { certificatePem: caPem },
      );
      return { status: { certificate: Buffer.from(cert).toString("base64"), conditions: [{ type: "Approved", status: "True" }] } };
    },
  };
  return { api, csrs };
}

/** Lets promise continuations run between fake-clock steps. */
const settle = () => new Promise((r) => setTimeout(r, 5));

describe("client certificates", () => {
  test("a request for system:node:<name> with the kubelet client signer waits through polls until signed", async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 21));
    const { api, csrs } = fakeSigner(clock, { lifetimeMs: 3_600_000, delaySteps: 2 });
    const pending = requestClientCertificate(api, { nodeName: "n1", clock, logger: memoryLogger().logger, pollMs: 1000 });
    for (let i = 0; i < 3; i++) {
      await settle();
      clock.advance(1000);
    }
    const cert = await pending;
    const spec = csrs.get("csr-1")!.spec;
    expect(spec.signerName).toBe("kubernetes.io/kube-apiserver-client-kubelet");
    expect(spec.usages).toEqual(["digital signature", "client auth"]);
    expect(Buffer.from(spec.request, "base64").toString()).toStartWith("-----BEGIN CERTIFICATE REQUEST-----");
    expect(new X509Certificate(cert.certificatePem).subject).toBe("O=system:nodes\nCN=system:node:n1");
    expect(cert.privateKeyPem).toStartWith("-----BEGIN EC PRIVATE KEY-----");
  });

  test("a denied request is an error with the approver's reason", async () => {
    const clock = new FakeClock();
    const { api } = fakeSigner(clock, { lifetimeMs: 1000, deny: true });
    let error: unknown;
    try {
      await requestClientCertificate(api, { nodeName: "n1", clock, logger: memoryLogger().logger });
    } catch (err) {
      error = err;
    }
    expect(String(error)).toContain("certificate signing request csr-1 is denied: NotAllowed no way");
  });

  test("stored as upstream: a dated 0600 file with cert and key, kubelet-client-current.pem pointing at it; expired files are not usable", () => {
    const dir = mkdtempSync(join(tmpdir(), "pki-"));
    const clock = new FakeClock(Date.UTC(2026, 10, 21, 10, 0, 0));
    const key = generateEcKey();
    const cert = createCertificate(
      { subject: { commonName: "x" }, publicKey: key.privateKey, notBeforeMs: clock.now(), notAfterMs: clock.now() + 60_000, serial: 5n, usages: ["clientAuth"] },
      key.privateKey,
    );
    const current = storeClientCertificate(dir, { certificatePem: cert, privateKeyPem: key.privateKeyPem }, clock.now());
    expect(current).toBe(join(dir, CURRENT_CLIENT_PEM));
    expect(lstatSync(current).isSymbolicLink()).toBe(true);
    expect(readlinkSync(current)).toBe("kubelet-client-2026-11-21-10-00-00.pem");
    expect(statSync(current).mode & 0o777).toBe(0o600);
    expect(readFileSync(current, "utf8")).toBe(cert + key.privateKeyPem);
    expect(readUsableCertificate(current, clock.now())?.certificatePem).toBe(cert);
    expect(readUsableCertificate(current, clock.now() + 61_000)).toBeUndefined();
    expect(readUsableCertificate(join(dir, "missing.pem"), clock.now())).toBeUndefined();
  });

  test("rotation renews at the jittered point of 70-90% of the lifetime, stores the new pair and switches to it; failures retry", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rot-"));
    const clock = new FakeClock(Date.UTC(2026, 10, 21));
    const { api, csrs } = fakeSigner(clock, { lifetimeMs: 100_000 });
    const key = generateEcKey();
    const first = createCertificate(
      { subject: { commonName: "system:node:n1" }, publicKey: key.privateKey, notBeforeMs: clock.now(), notAfterMs: clock.now() + 100_000, serial: 1n, usages: ["clientAuth"] },
      key.privateKey,
    );
    const rotated: string[] = [];
    let failNext = true;
    const flaky: CsrApi = { create: async (c) => (failNext ? ((failNext = false), Promise.reject(new Error("apiserver down"))) : api.create(c)), get: (n) => api.get(n) };
    using rotation = new ClientCertificateRotation(
      { certificatePem: first, privateKeyPem: key.privateKeyPem },
      {
        api: flaky,
        nodeName: "n1",
        certDir: dir,
        clock,
        logger: memoryLogger().logger,
        random: () => 0.5, // 80%
        inUse: { replace: (c) => rotated.push(c.certificatePem) },
      },
    );
    expect(rotation.deadline()).toBe(clock.now() + 80_000);
    rotation.start();
    clock.advance(79_999);
    await settle();
    expect(csrs.size).toBe(0);
    clock.advance(1); // at 80%: the first attempt fails, the retry 2s later succeeds
    await settle();
    expect(rotated).toEqual([]);
    clock.advance(2000);
    await settle();
    expect(rotated.length).toBe(1);
    expect(rotation.current().certificatePem).toBe(rotated[0]!);
    expect(readUsableCertificate(join(dir, CURRENT_CLIENT_PEM), clock.now())?.certificatePem).toBe(rotated[0]!);
    // The next renewal is planned from the new certificate's lifetime.
    const v = certificateValidity(rotated[0]!);
    expect(rotation.deadline()).toBe(v.notBeforeMs + 80_000);
  });
});
