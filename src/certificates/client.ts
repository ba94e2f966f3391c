/**
 * The node's client certificate, as upstream's kubelet manages it:
 * - TLS bootstrap: with --bootstrap-kubeconfig and no usable --kubeconfig,
 *   ask for a certificate through the CSR API (signer
 *   kubernetes.io/kube-apiserver-client-kubelet) with the bootstrap token,
 *   wait for the approval and the signature, store cert and key in
 *   --cert-dir (kubelet-client-<time>.pem, 0600, kubelet-client-current.pem
 *   pointing at it) and write a kubeconfig that names that file;
 * - rotation (rotateCertificates): at a random point between 70% and 90% of
 *   the certificate's lifetime, ask again as the node itself and switch the
 *   API client to the new certificate without a restart.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { posix } from "node:path";
import { createRestClient, loadCredentials, type RestClient } from "../api/rest.ts";
import type { ClientCertificateSource } from "../api/kubeconfig.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { certificateValidity, createCertificateRequest, generateEcKey, parsePrivateKey } from "./x509.ts";

export const KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet";
export const CURRENT_CLIENT_PEM = "kubelet-client-current.pem";
const HOUR_MS = 3_600_000;

export interface ClientCertificate {
  certificatePem: string;
  privateKeyPem: string;
}

/**
 * The client certificate the API client presents: the rotation replaces it,
 * the REST client reads it for each new connection. Built before both, so
 * neither is changed after it is made.
 */
/** Who takes a renewed certificate into use once the rotation stored it. */
export interface CertificateInUse {
  replace(next: ClientCertificate): void;
}

export class ClientCertificateInUse implements CertificateInUse, ClientCertificateSource {
  constructor(private cert: ClientCertificate) {}

  current(): ClientCertificate {
    return this.cert;
  }

  replace(next: ClientCertificate): void {
    this.cert = next;
  }

  /** As the REST client's credentials take it. */
  pem(): { cert: string; key: string } {
    return { cert: this.cert.certificatePem, key: this.cert.privateKeyPem };
  }
}

/** The CSR API calls this needs (certificates.k8s.io/v1). */
export interface CsrApi {
  create(csr: Record<string, unknown>): Promise<{ metadata?: { name?: string } }>;
  get(name: string): Promise<CsrObject>;
}

interface CsrObject {
  status?: { certificate?: string; conditions?: { type: string; status?: string; reason?: string; message?: string }[] };
}

export function csrApi(rest: RestClient): CsrApi {
  const base = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
  return {
    create: (csr) => rest.request("POST", base, { body: csr }),
    get: (name) => rest.request("GET", `${base}/${encodeURIComponent(name)}`),
  };
}

/** The CSR was denied or failed, or the signer never answered. */
export class CertificateRequestError extends Error {
  override readonly name = "CertificateRequestError";
}

/**
 * Creates a CSR for `system:node:<nodeName>` (O system:nodes) with
 * `signerName` and `usages` (and SANs for a serving certificate) and waits
 * until it is signed. Denied or Failed conditions end the wait with the
 * approver's reason.
 */
export async function requestNodeCertificate(
  api: CsrApi,
  opts: {
    nodeName: string;
    signerName: string;
    usages: string[];
    altNames?: readonly string[];
    clock: Clock;
    signal?: AbortSignal;
    pollMs?: number;
    timeoutMs?: number;
    logger: Logger;
  },
): Promise<ClientCertificate> {
  const { privateKey, privateKeyPem } = generateEcKey();
  const request = createCertificateRequest(privateKey, { organizations: ["system:nodes"], commonName: `system:node:${opts.nodeName}` }, opts.altNames ?? []);
  const created = await api.create({
    apiVersion: "certificates.k8s.io/v1",
    kind: "CertificateSigningRequest",
    metadata: { generateName: "csr-" },
    spec: { request: Buffer.from(request).toString("base64"), signerName: opts.signerName, usages: opts.usages },
  });
  const name = created.metadata?.name ?? "";
  opts.logger.info("waiting for the certificate request to be approved and signed", { csr: name, signer: opts.signerName });
  const deadline = opts.clock.now() + (opts.timeoutMs ?? 15 * 60_000);
  for (;;) {
    const csr = await api.get(name);
    const refused = csr.status?.conditions?.find((c) => (c.type === "Denied" || c.type === "Failed") && c.status !== "False");
    if (refused) throw new CertificateRequestError(`certificate signing request ${name} is ${refused.type.toLowerCase()}: ${refused.reason ?? ""} ${refused.message ?? ""}`.trim());
    if (csr.status?.certificate) {
      const certificatePem = Buffer.from(csr.status.certificate, "base64").toString("utf8");
      certificateValidity(certificatePem); // refuses something that is not a certificate
      return { certificatePem, privateKeyPem };
    }
    if (opts.clock.now() >= deadline) throw new CertificateRequestError(`certificate signing request ${name} was not signed in time`);
    await opts.clock.sleep(opts.pollMs ?? 1000, opts.signal);
  }
}

/** The node's client certificate: signer kubernetes.io/kube-apiserver-client-kubelet, digital signature + client auth. */
export function requestClientCertificate(
  api: CsrApi,
  opts: { nodeName: string; clock: Clock; signal?: AbortSignal; pollMs?: number; timeoutMs?: number; logger: Logger },
): Promise<ClientCertificate> {
  return requestNodeCertificate(api, { ...opts, signerName: KUBELET_CLIENT_SIGNER, usages: ["digital signature", "client auth"] });
}

/** Reads a combined cert+key PEM; undefined when missing, unreadable or expired. */
export function readUsableCertificate(path: string, now: number): ClientCertificate | undefined {
  try {
    const pem = readFileSync(path, "utf8");
    const keyBlock = /-----BEGIN (EC |RSA )?PRIVATE KEY-----[\s\S]+?-----END (EC |RSA )?PRIVATE KEY-----\n?/.exec(pem)?.[0];
    const certBlock = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/.exec(pem)?.[0];
    if (!keyBlock || !certBlock) return undefined;
    parsePrivateKey(keyBlock);
    return certificateValidity(certBlock).notAfterMs > now ? { certificatePem: certBlock, privateKeyPem: keyBlock } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Stores a certificate as upstream's file store does: a new dated file
 * (cert then key, 0600, fsync'd) and <pairName>-current.pem switched
 * to it by rename, so a crash leaves the old or the new pair, never half.
 * `pairName` is kubelet-client, or kubelet-server for the serving certificate.
 */
export function storeClientCertificate(certDir: string, cert: ClientCertificate, now: number, pairName = "kubelet-client"): string {
  mkdirSync(certDir, { recursive: true, mode: 0o755 });
  const stamp = new Date(now).toISOString().slice(0, 19).replace(/[T:]/g, "-");
  const file = posix.join(certDir, `${pairName}-${stamp}.pem`);
  writeFileSync(file, cert.certificatePem + cert.privateKeyPem, { mode: 0o600 });
  const fd = openSync(file, "r");
  fsyncSync(fd);
  closeSync(fd);
  const current = posix.join(certDir, `${pairName}-current.pem`);
  const tmp = `${current}.tmp`;
  rmSync(tmp, { force: true });
  symlinkSync(posix.basename(file), tmp);
  renameSync(tmp, current);
  return current;
}

/** A kubeconfig for the node: the bootstrap kubeconfig's server and CA, the stored certificate as the user. */
export function writeNodeKubeconfig(path: string, opts: { server: string; ca?: string; insecureSkipVerify: boolean; certFile: string }): void {
  const cluster = [`    server: ${opts.server}`];
  if (opts.ca) cluster.push(`    certificate-authority-data: ${Buffer.from(opts.ca).toString("base64")}`);
  if (opts.insecureSkipVerify) cluster.push("    insecure-skip-tls-verify: true");
  const text = [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: default-cluster",
    "  cluster:",
    ...cluster,
    "users:",
    "- name: default-auth",
    "  user:",
    `    client-certificate: ${opts.certFile}`,
    `    client-key: ${opts.certFile}`,
    "contexts:",
    "- name: default-context",
    "  context:",
    "    cluster: default-cluster",
    "    namespace: default",
    "    user: default-auth",
    "current-context: default-context",
    "",
  ].join("\n");
  mkdirSync(posix.dirname(path), { recursive: true });
  writeFileSync(`${path}.tmp`, text, { mode: 0o600 });
  renameSync(`${path}.tmp`, path);
}

/**
 * TLS bootstrap (upstream LoadClientCert): when `kubeconfig` is missing or
 * its client certificate has expired, obtain one with the bootstrap
 * kubeconfig's credentials and write `kubeconfig` to use it. Retries while
 * the API server cannot be reached; a denied request is an error.
 */
export async function bootstrapClientCertificate(opts: {
  kubeconfig: string;
  bootstrapKubeconfig: string;
  certDir: string;
  nodeName: string;
  clock: Clock;
  logger: Logger;
  signal: AbortSignal;
  userAgent: string;
}): Promise<void> {
  const { clock, logger } = opts;
  if (existsSync(opts.kubeconfig)) {
    const creds = await loadCredentials(opts.kubeconfig);
    if (!creds.cert || certificateValidity(creds.cert).notAfterMs > clock.now()) return;
    logger.warn("the kubeconfig's client certificate has expired; bootstrapping a new one", { kubeconfig: opts.kubeconfig });
  }
  const stored = readUsableCertificate(posix.join(opts.certDir, CURRENT_CLIENT_PEM), clock.now());
  const bootstrap = await loadCredentials(opts.bootstrapKubeconfig);
  if (!stored) {
    const api = csrApi(createRestClient({ credentials: bootstrap, qps: 5, burst: 10, clock, logger, userAgent: opts.userAgent }));
    logger.info("requesting a client certificate with the bootstrap kubeconfig", { bootstrapKubeconfig: opts.bootstrapKubeconfig });
    for (let attempt = 0; ; attempt++) {
      try {
        const cert = await requestClientCertificate(api, { nodeName: opts.nodeName, clock, logger, signal: opts.signal });
        storeClientCertificate(opts.certDir, cert, clock.now());
        break;
      } catch (err) {
        if (err instanceof CertificateRequestError || opts.signal.aborted) throw err;
        logger.warn("TLS bootstrap failed; retrying", { err: errorMessage(err) });
        await clock.sleep(Math.min(60_000, 1000 * 2 ** Math.min(attempt, 6)), opts.signal);
      }
    }
  }
  writeNodeKubeconfig(opts.kubeconfig, {
    server: bootstrap.server,
    ...(bootstrap.ca ? { ca: bootstrap.ca } : {}),
    insecureSkipVerify: bootstrap.insecureSkipVerify,
    certFile: posix.join(opts.certDir, CURRENT_CLIENT_PEM),
  });
  logger.info("wrote the node kubeconfig from the bootstrapped certificate", { kubeconfig: opts.kubeconfig });
}

/**
 * Holds one of the node's certificates (the client one by default; the
 * serving one with `request` and `pairName`, see serving.ts) and renews it at a random
 * point in 70–90% of its lifetime (upstream's jitter); failures retry with
 * a capped exponential backoff. `current()` is what the API client uses
 * for each new connection.
 */
export class ClientCertificateRotation implements Disposable {
  private cert: ClientCertificate;
  private cancel: (() => void) | undefined;
  private stopped = false;
  private failures = 0;

  constructor(
    initial: ClientCertificate,
    private readonly opts: {
      api: CsrApi;
      nodeName: string;
      certDir: string;
      clock: Clock;
      logger: Logger;
      /** In [0, 1); injected so tests pick the point in the window. */
      random: () => number;
      /** Takes each renewed certificate into use (the API client's holder, the serving certificate's server). */
      inUse?: CertificateInUse;
      /** How a new certificate is obtained; default requestClientCertificate. */
      request?: () => Promise<ClientCertificate>;
      /** The files' name in certDir (storeClientCertificate); default kubelet-client. */
      pairName?: string;
    },
  ) {
    this.cert = initial;
  }

  current(): ClientCertificate {
    return this.cert;
  }

  private what(): string {
    return this.opts.pairName === "kubelet-server" ? "serving" : "client";
  }

  /** When the current certificate should be renewed (ms since the epoch). */
  deadline(): number {
    const { notBeforeMs, notAfterMs } = certificateValidity(this.cert.certificatePem);
    return notBeforeMs + (notAfterMs - notBeforeMs) * (0.7 + 0.2 * this.opts.random());
  }

  start(): void {
    const deadline = this.deadline();
    const arm = () => {
      const wait = deadline - this.opts.clock.now();
      // Timers cannot wait longer than 2^31 ms (about 24 days): wake up hourly until the deadline is near.
      if (wait > HOUR_MS) this.schedule(HOUR_MS, arm);
      else this.schedule(Math.max(0, wait), () => void this.rotate());
    };
    arm();
  }

  private schedule(delayMs: number, fn: () => void): void {
    if (this.stopped) return;
    this.cancel?.();
    this.cancel = this.opts.clock.setTimer(delayMs, fn);
  }

  private async rotate(): Promise<void> {
    const { logger, clock } = this.opts;
    try {
      const next = await (this.opts.request?.() ?? requestClientCertificate(this.opts.api, { nodeName: this.opts.nodeName, clock, logger, timeoutMs: 5 * 60_000 }));
      if (this.stopped) return;
      storeClientCertificate(this.opts.certDir, next, clock.now(), this.opts.pairName);
      this.cert = next;
      this.failures = 0;
      const v = certificateValidity(next.certificatePem);
      logger.info(`rotated the ${this.what()} certificate`, { serial: v.serial, notAfter: new Date(v.notAfterMs).toISOString() });
      this.opts.inUse?.replace(next);
      this.start();
    } catch (err) {
      this.failures++;
      const retryMs = Math.min(5 * 60_000, 1000 * 2 ** Math.min(this.failures, 9));
      logger.warn(`rotating the ${this.what()} certificate failed; retrying`, { err: errorMessage(err), retryInMs: retryMs });
      this.schedule(retryMs, () => void this.rotate());
    }
  }

  [Symbol.dispose](): void {
    this.stopped = true;
    this.cancel?.();
  }
}
