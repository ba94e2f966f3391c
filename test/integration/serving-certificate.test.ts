// serverTLSBootstrap on a real control plane: the agent asks for its
// serving certificate through the certificates API (signer
// kubernetes.io/kubelet-serving), which the controller-manager does not
// approve by itself; once a cluster admin approves it, the controller-manager
// signs it with the cluster CA and the agent serves 10250 with it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { createCertificate, generateEcKey } from "../../src/certificates/x509.ts";
import { connect as tlsConnect, type PeerCertificate } from "node:tls";
import { join } from "node:path";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "serving-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let kubeletPort: number;

async function kubectl(...args: string[]): Promise<string> {
  const r = await cp.kubectl(args);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

/** A TLS handshake to the agent that verifies its certificate against the cluster CA for 127.0.0.1; the certificate, or the error. */
const handshake = () =>
  new Promise<{ cert: PeerCertificate } | { error: string }>((resolve) => {
    const s = tlsConnect({ host: "127.0.0.1", port: kubeletPort, ca: readFileSync(cp.caFile, "utf8") });
    s.once("secureConnect", () => {
      resolve({ cert: s.getPeerCertificate() });
      s.destroy();
    });
    s.once("error", (err: Error) => resolve({ error: err.message }));
  });

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "serving" }), startControlPlane({ name: "serving" })]);
  kubeletPort = await freePort();
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, "--node-ip=127.0.0.1"],
    extraConfig: {
      port: kubeletPort,
      serverTLSBootstrap: true,
      authentication: { x509: { clientCAFile: cp.caFile }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
    },
  });
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("serverTLSBootstrap", () => {
  test("a kubelet-serving CSR with server auth and the node's SANs waits for approval; once approved the agent serves the CA-signed certificate", async () => {
    const csr = await eventually(
      "a kubelet-serving CSR",
      async () => JSON.parse(await kubectl("get", "csr", "-o", "json")).items.find((c: any) => c.spec.signerName === "kubernetes.io/kubelet-serving"),
      60_000,
    );
    expect(csr.spec.username).toBe(`system:node:${NODE}`);
    expect(csr.spec.usages).toEqual(["digital signature", "server auth"]);
    const csrFile = join(cp.dir, "serving.csr");
    writeFileSync(csrFile, Buffer.from(csr.spec.request, "base64"));
    const text = Bun.spawnSync(["openssl", "req", "-in", csrFile, "-noout", "-text"]).stdout.toString();
    expect(text).toContain(`DNS:${NODE}, IP Address:127.0.0.1`);
    // Not approved by the controller-manager, so nothing is served yet.
    await Bun.sleep(3000);
    const pending = JSON.parse(await kubectl("get", "csr", csr.metadata.name, "-o", "json"));
    expect(pending.status?.conditions ?? []).toEqual([]);
    // The port is open, but no handshake completes without a certificate (upstream fails them too).
    expect(await handshake()).toEqual({ error: expect.stringMatching(/disconnected before secure TLS connection|ECONNRESET|socket hang up/) });

    await kubectl("certificate", "approve", csr.metadata.name);
    const served = await eventually(
      "10250 served with the issued certificate",
      async () => {
        const r = await handshake();
        return "cert" in r ? r.cert : undefined;
      },
      60_000,
      500,
    );
    expect(served.subject).toMatchObject({ O: "system:nodes", CN: `system:node:${NODE}` });
    expect(`CN=${served.issuer.CN}`).toBe(new X509Certificate(readFileSync(cp.caFile)).subject.split("\n").find((l) => l.startsWith("CN="))!);
    expect(served.subjectaltname).toBe(`DNS:${NODE}, IP Address:127.0.0.1`);
    expect(readFileSync(join(agent.dir, "pki", "kubelet-server-current.pem"), "utf8")).toContain("-----BEGIN CERTIFICATE-----");

    // A restart serves the stored certificate at once: no second request.
    await agent.kill("SIGTERM");
    agent.start();
    const again = await eventually(
      "10250 served after a restart",
      async () => {
        const r = await handshake();
        return "cert" in r ? r.cert : undefined;
      },
      30_000,
      250,
    );
    expect(again.serialNumber).toBe(served.serialNumber);
    const requests = JSON.parse(await kubectl("get", "csr", "-o", "json")).items.filter((c: any) => c.spec.signerName === "kubernetes.io/kubelet-serving");
    expect(requests.length).toBe(1);
  }, 120_000);

  test("rotation: a 30 s serving certificate is renewed through a new CSR before it expires, and new connections get the renewed one", async () => {
    const pki = join(cp.dir, "pki");
    const key = generateEcKey();
    const now = Date.now();
    const shortCert = createCertificate(
      {
        subject: { organizations: ["system:nodes"], commonName: `system:node:${NODE}` },
        publicKey: key.privateKey,
        notBeforeMs: now - 1000,
        notAfterMs: now + 29_000,
        serial: BigInt(now),
        usages: ["serverAuth"],
        altNames: [NODE, "127.0.0.1"],
      },
      createPrivateKey(readFileSync(join(pki, "ca.key"), "utf8")),
      { certificatePem: readFileSync(join(pki, "ca.crt"), "utf8") },
    );
    await agent.kill("SIGTERM");
    const current = join(agent.dir, "pki", "kubelet-server-current.pem");
    rmSync(current);
    writeFileSync(current, shortCert + key.privateKeyPem, { mode: 0o600 });
    agent.start();
    const shortSerial = new X509Certificate(shortCert).serialNumber;
    const first = await eventually(
      "the short certificate served",
      async () => {
        const r = await handshake();
        return "cert" in r ? r.cert : undefined;
      },
      30_000,
      250,
    );
    expect(first.serialNumber).toBe(shortSerial);
    // 70-90% of 30 s: a second kubelet-serving request 21-27 s in; approve it as an admin would.
    const renewal = await eventually(
      "a renewal CSR",
      async () => {
        const items = JSON.parse(await kubectl("get", "csr", "-o", "json")).items.filter(
          (c: any) => c.spec.signerName === "kubernetes.io/kubelet-serving" && !c.status?.conditions,
        );
        return items[0];
      },
      40_000,
      500,
    );
    await kubectl("certificate", "approve", renewal.metadata.name);
    const renewed = await eventually(
      "the renewed certificate served",
      async () => {
        const r = await handshake();
        return "cert" in r && r.cert.serialNumber !== shortSerial ? r.cert : undefined;
      },
      30_000,
      250,
    );
    expect(renewed.subjectaltname).toBe(`DNS:${NODE}, IP Address:127.0.0.1`);
    expect(Date.parse(renewed.valid_to)).toBeGreaterThan(now + 3_600_000);
    expect(agent.log()).toContain("rotated the serving certificate");
  }, 120_000);
});
