// The node's client certificate with a real control plane: TLS bootstrap
// from a bootstrap token (the CSR is auto-approved and signed by the
// controller-manager, as on a kubeadm cluster), and rotation of a
// short-lived certificate while a pod keeps running, surviving a restart
// after the original certificate expired.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { existsSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCertificate, generateEcKey } from "../../src/certificates/x509.ts";
import { eventually, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

let cp: ControlPlaneHandle;
let ctdBoot: ContainerdHandle;
let ctdRotate: ContainerdHandle;
const agents: AgentHandle[] = [];
let bootstrapKubeconfig: string;

async function kubectlJson(...args: string[]): Promise<any> {
  const r = await cp.kubectl([...args, "-o", "json"]);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
const ready = async (node: string) => {
  const r = await cp.kubectl(["get", "node", node, "-o", "json"]);
  if (r.code !== 0) return false;
  return JSON.parse(r.stdout).status.conditions.some((c: any) => c.type === "Ready" && c.status === "True");
};

beforeAll(async () => {
  requireRoot();
  [cp, ctdBoot, ctdRotate] = await startTogether([startControlPlane({ name: "certs" }), startContainerd({ name: "boot" }), startContainerd({ name: "rotate" })]);
  // The token, and the RBAC for bootstrap and for renewals (selfnodeclient), as kubeadm sets them up.
  const proc = Bun.spawnSync(["bash", join(import.meta.dir, "../../scripts/controlplane/bootstrap-token.sh"), cp.dir], { stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`bootstrap-token.sh: ${proc.stderr}`);
  bootstrapKubeconfig = proc.stdout.toString().trim();
}, 180_000);

afterAll(async () => {
  for (const a of agents) await a.kill("SIGKILL");
  await Promise.all([cp?.stop(), ctdBoot?.stop(), ctdRotate?.stop()]);
}, 60_000);

describe("client certificates on a real control plane", () => {
  test("TLS bootstrap: with only a bootstrap token the node gets an approved certificate, writes its kubeconfig (0600) and goes Ready", async () => {
    const dir = join(ctdBoot.dir, "node");
    const kubeconfig = join(dir, "kubelet.conf");
    const certDir = join(dir, "pki");
    const agent = await startAgent(ctdBoot, {
      name: "boot",
      nodeName: "boot-node",
      extraArgs: [`--bootstrap-kubeconfig=${bootstrapKubeconfig}`, `--kubeconfig=${kubeconfig}`, `--cert-dir=${certDir}`, "--node-ip=127.0.0.1"],
    });
    agents.push(agent);
    await eventually("boot-node Ready", () => ready("boot-node"), 60_000);
    const csr = (await kubectlJson("get", "csr")).items.find((c: any) => c.spec.username.startsWith("system:bootstrap:"));
    expect(csr.spec.signerName).toBe("kubernetes.io/kube-apiserver-client-kubelet");
    expect(csr.status.conditions.map((c: any) => c.type)).toContain("Approved");
    expect(statSync(kubeconfig).mode & 0o777).toBe(0o600);
    expect(readFileSync(kubeconfig, "utf8")).toContain(`client-certificate: ${join(certDir, "kubelet-client-current.pem")}`);
    const current = join(certDir, "kubelet-client-current.pem");
    expect(readlinkSync(current)).toMatch(/^kubelet-client-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d\.pem$/);
    expect(statSync(current).mode & 0o777).toBe(0o600);
    expect(new X509Certificate(readFileSync(current, "utf8")).subject).toBe("O=system:nodes\nCN=system:node:boot-node");
    // A restart uses the kubeconfig it wrote: no second request.
    await agent.kill("SIGTERM");
    agent.start();
    await Bun.sleep(3000);
    await eventually("boot-node Ready after restart", () => ready("boot-node"), 30_000);
    const bootstrapCsrs = (await kubectlJson("get", "csr")).items.filter((c: any) => c.spec.username.startsWith("system:bootstrap:"));
    expect(bootstrapCsrs.length).toBe(1);
  }, 120_000);

  test("rotation: a 30s certificate is renewed before it expires, the pod keeps running, and a restart after expiry uses the renewed one", async () => {
    // The renewal is approved through the selfnodeclient binding that bootstrap-token.sh made.
    const pki = join(cp.dir, "pki");
    const dir = join(ctdRotate.dir, "node");
    const certDir = join(dir, "pki");
    const key = generateEcKey();
    const now = Date.now();
    const lifetimeMs = 30_000;
    const shortCert = createCertificate(
      {
        subject: { organizations: ["system:nodes"], commonName: "system:node:rotate-node" },
        publicKey: key.privateKey,
        notBeforeMs: now - 1000,
        notAfterMs: now - 1000 + lifetimeMs,
        serial: BigInt(now),
        usages: ["clientAuth"],
      },
      createPrivateKey(readFileSync(join(pki, "ca.key"), "utf8")),
      { certificatePem: readFileSync(join(pki, "ca.crt"), "utf8") },
    );
    Bun.spawnSync(["mkdir", "-p", dir]);
    writeFileSync(join(dir, "short.pem"), shortCert + key.privateKeyPem, { mode: 0o600 });
    const kubeconfig = join(dir, "kubelet.conf");
    writeFileSync(
      kubeconfig,
      [
        "apiVersion: v1",
        "kind: Config",
        `clusters: [{ name: c, cluster: { server: "${cp.apiServerUrl}", certificate-authority: "${cp.caFile}" } }]`,
        `users: [{ name: u, user: { client-certificate: "${join(dir, "short.pem")}", client-key: "${join(dir, "short.pem")}" } }]`,
        "contexts: [{ name: x, context: { cluster: c, user: u } }]",
        "current-context: x",
        "",
      ].join("\n"),
    );
    const agent = await startAgent(ctdRotate, {
      name: "rotate",
      nodeName: "rotate-node",
      extraArgs: [`--kubeconfig=${kubeconfig}`, `--cert-dir=${certDir}`, "--node-ip=127.0.0.1"],
      extraConfig: { rotateCertificates: true },
    });
    agents.push(agent);
    await eventually("rotate-node Ready", () => ready("rotate-node"), 30_000);
    const manifest = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "steady", namespace: "default" },
      spec: {
        nodeName: "rotate-node",
        terminationGracePeriodSeconds: 1,
        containers: [{ name: "c", image: ctdRotate.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }],
      },
    };
    const r = await cp.kubectl(["apply", "-f", "-"], { stdin: JSON.stringify(manifest) });
    expect(r.code).toBe(0);
    const running = await eventually("steady Running", async () => {
      const p = await kubectlJson("get", "pod", "steady");
      return p.status.phase === "Running" ? p : undefined;
    });
    const containerId = running.status.containerStatuses[0].containerID;
    const current = join(certDir, "kubelet-client-current.pem");
    // 70-90% of 30s: renewed 21-27s after notBefore.
    await eventually("the certificate renewed", () => existsSync(current), 40_000, 500);
    const renewed = new X509Certificate(readFileSync(current, "utf8"));
    expect(renewed.subject).toBe("O=system:nodes\nCN=system:node:rotate-node");
    expect(Date.parse(renewed.validTo)).toBeGreaterThan(now + 3_600_000);
    expect(agent.log()).toContain("rotated the client certificate");
    // The next API request goes on a new HTTP/2 connection that presents the renewed certificate.
    await eventually(
      "a connection with the renewed certificate",
      () => agent.log().includes("the client certificate changed; new API requests go on a new HTTP/2 connection"),
      15_000,
    );
    // Past the short certificate's end: a restart must use the renewed certificate (the kubeconfig still names the expired one).
    await Bun.sleep(Math.max(0, now - 1000 + lifetimeMs + 1000 - Date.now()));
    await agent.kill("SIGTERM");
    agent.start();
    const lease = async () => (await kubectlJson("get", "lease", "-n", "kube-node-lease", "rotate-node")).spec.renewTime as string;
    const before = await lease();
    await eventually("the Lease renewed after the restart", async () => (await lease()) !== before, 30_000);
    const after = await kubectlJson("get", "pod", "steady");
    expect(after.status.containerStatuses[0].containerID).toBe(containerId);
    expect(after.status.containerStatuses[0].restartCount).toBe(0);
  }, 150_000);
});
