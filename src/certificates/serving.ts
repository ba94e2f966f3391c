/**
 * The kubelet's serving certificate through the certificates API
 * (serverTLSBootstrap, --rotate-server-certificates), as upstream's
 * kubelet-serving certificate manager: a CSR for system:node:<name> with
 * signer kubernetes.io/kubelet-serving, usages digital signature + server
 * auth, the node's host name and addresses as SANs. Such requests are not
 * approved automatically (a cluster admin or an approver does it). Stored
 * in --cert-dir as kubelet-server-<time>.pem / kubelet-server-current.pem
 * and renewed like the client certificate (ClientCertificateRotation in
 * client.ts, with this request).
 */
import { posix } from "node:path";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import {
  CertificateRequestError,
  ClientCertificateRotation,
  readUsableCertificate,
  requestNodeCertificate,
  storeClientCertificate,
  type ClientCertificate,
  type CsrApi,
} from "./client.ts";

export const KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving";
export const SERVING_PAIR = "kubelet-server";
export const CURRENT_SERVING_PEM = `${SERVING_PAIR}-current.pem`;

export interface ServingCertificateOptions {
  api: CsrApi;
  nodeName: string;
  /** SANs: the node's host name(s) and IP addresses. */
  altNames: readonly string[];
  certDir: string;
  clock: Clock;
  logger: Logger;
  random: () => number;
  signal: AbortSignal;
  /** A new certificate is in use (the first one, then each renewal). */
  onCertificate: (cert: ClientCertificate) => void;
}

export function requestServingCertificate(
  api: CsrApi,
  opts: Pick<ServingCertificateOptions, "nodeName" | "altNames" | "clock" | "logger"> & { signal?: AbortSignal; timeoutMs?: number },
): Promise<ClientCertificate> {
  return requestNodeCertificate(api, { ...opts, signerName: KUBELET_SERVING_SIGNER, usages: ["digital signature", "server auth"] });
}

/**
 * Uses the stored serving certificate if it is still valid, else requests
 * one (retrying until it is issued: it waits for someone to approve it),
 * then keeps renewing it. Returns at once; `onCertificate` tells when there
 * is a certificate to serve with.
 */
export function manageServingCertificate(opts: ServingCertificateOptions): Disposable {
  const { clock, logger } = opts;
  let rotation: ClientCertificateRotation | undefined;
  let stopped = false;
  const request = () => requestServingCertificate(opts.api, { ...opts, timeoutMs: 60 * 60_000 });
  const begin = (cert: ClientCertificate) => {
    if (stopped) return;
    opts.onCertificate(cert);
    rotation = new ClientCertificateRotation(cert, {
      api: opts.api,
      nodeName: opts.nodeName,
      certDir: opts.certDir,
      clock,
      logger,
      random: opts.random,
      request,
      pairName: SERVING_PAIR,
      inUse: { replace: opts.onCertificate },
    });
    rotation.start();
  };
  const stored = readUsableCertificate(posix.join(opts.certDir, CURRENT_SERVING_PEM), clock.now());
  if (stored) begin(stored);
  else {
    void (async () => {
      logger.info("requesting a serving certificate (signer kubernetes.io/kubelet-serving); it must be approved", { altNames: opts.altNames });
      for (let attempt = 0; !stopped && !opts.signal.aborted; attempt++) {
        try {
          const cert = await request();
          storeClientCertificate(opts.certDir, cert, clock.now(), SERVING_PAIR);
          begin(cert);
          return;
        } catch (err) {
          if (stopped || opts.signal.aborted) return;
          const retryMs = err instanceof CertificateRequestError ? 60_000 : Math.min(60_000, 1000 * 2 ** Math.min(attempt, 6));
          logger.warn("requesting the serving certificate failed; retrying", { err: errorMessage(err), retryInMs: retryMs });
          await clock.sleep(retryMs, opts.signal).catch(() => {});
        }
      }
    })();
  }
  return {
    [Symbol.dispose]() {
      stopped = true;
      rotation?.[Symbol.dispose]();
    },
  };
}
