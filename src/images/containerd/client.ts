/**
 * The few calls of containerd's own API that importing an image needs (the
 * CRI has no import): content Info/Update/Write, image Get/Create/Update,
 * and a lease that keeps the new content from garbage collection until
 * the image points at it. Everything in the CRI's namespace, k8s.io.
 * The containerd socket is the CRI endpoint: containerd serves both.
 */
import { ChannelCredentials } from "@grpc/grpc-js";
import { GrpcTransport } from "@protobuf-ts/grpc-transport";
import type { RpcOptions } from "@protobuf-ts/runtime-rpc";
import { parseEndpoint } from "../../cri/endpoint.ts";
import type { Logger } from "../../util/log.ts";
import { ContentClient } from "./gen/content.client.ts";
import { WriteAction } from "./gen/content.ts";
import { ImagesClient } from "./gen/images.client.ts";
import { LeasesClient } from "./gen/leases.client.ts";

export const CRI_NAMESPACE = "k8s.io";

export interface ImportDescriptor {
  mediaType: string;
  digest: string;
  size: number;
}

/** What the preloader needs from containerd; containerdImageStore implements it, a fake beside the tests. */
export interface ImageStore {
  /** The target of an existing image, or undefined. */
  imageTarget(name: string): Promise<ImportDescriptor | undefined>;
  /** Whether the blob is in the content store (committed). */
  hasBlob(digest: string): Promise<boolean>;
  /** Writes and commits one blob; containerd checks the digest and size. */
  writeBlob(blob: ImportDescriptor & { labels: Record<string, string>; chunks(): AsyncIterable<Uint8Array> }): Promise<void>;
  /** Adds labels to a committed blob (a blob present before this import still gets its GC references). */
  addLabels(digest: string, labels: Record<string, string>): Promise<void>;
  /** Creates the image, or points an existing one at `target`. */
  putImage(name: string, target: ImportDescriptor): Promise<void>;
  /** Runs `fn` under a lease that expires by itself if the agent dies midway. */
  withLease<T>(fn: () => Promise<T>): Promise<T>;
  close(): void;
}

/** A gRPC status code from an error thrown by protobuf-ts/grpc-js. */
const grpcCode = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : typeof code === "number" ? String(code) : undefined;
};
const isNotFound = (err: unknown) => grpcCode(err) === "NOT_FOUND" || grpcCode(err) === "5";
const isAlreadyExists = (err: unknown) => grpcCode(err) === "ALREADY_EXISTS" || grpcCode(err) === "6";

export function containerdImageStore(endpoint: string, opts: { timeoutMs?: number; now?: () => number; stallMs?: number; logger?: Logger } = {}): ImageStore {
  const transport = new GrpcTransport({ host: parseEndpoint(endpoint).target, channelCredentials: ChannelCredentials.createInsecure() });
  const content = new ContentClient(transport);
  const images = new ImagesClient(transport);
  const leases = new LeasesClient(transport);
  const now = opts.now ?? Date.now;
  let lease: string | undefined;
  const call = (timeoutMs = opts.timeoutMs ?? 60_000): RpcOptions => ({
    timeout: timeoutMs,
    meta: { "containerd-namespace": CRI_NAMESPACE, ...(lease ? { "containerd-lease": lease } : {}) },
  });
  const stallMs = opts.stallMs ?? 60_000;

  /**
   * One Write stream for one blob, in lock-step: each message (at most
   * WRITE_MESSAGE_BYTES) waits for containerd's answer before the next
   * goes. Bun's HTTP/2 client can lose a stream's flow-control credit when
   * the server raises its window mid-stream (grpc-go's BDP estimator does):
   * data queued for window then never leaves and the stream stalls. With one
   * message in flight, smaller than the initial window, nothing ever queues.
   */
  async function writeOnce(blob: Parameters<ImageStore["writeBlob"]>[0], attempt: number): Promise<void> {
    const abort = new AbortController();
    let timer = setTimeout(() => abort.abort(), stallMs);
    const progressed = () => {
      clearTimeout(timer);
      timer = setTimeout(() => abort.abort(), stallMs);
    };
    const stream = content.write({ ...call(30 * 60_000), abort: abort.signal });
    const answers = stream.responses[Symbol.asyncIterator]();
    const ref = attempt === 1 ? `bunlet-import-${blob.digest}` : `bunlet-import-${blob.digest}-${attempt}`;
    const total = BigInt(blob.size);
    let offset = 0n;
    const exchange = async (request: { action: WriteAction; data: Uint8Array; labels: Record<string, string> }) => {
      await stream.requests.send({ ...request, ref, total, expected: blob.digest, offset });
      const answer = await answers.next();
      if (answer.done) throw new Error(`containerd ended the write of ${blob.digest} without answering (at byte ${offset})`);
      progressed();
    };
    try {
      for await (const chunk of blob.chunks()) {
        for (let at = 0; at < chunk.length; at += WRITE_MESSAGE_BYTES) {
          const data = chunk.subarray(at, at + WRITE_MESSAGE_BYTES);
          await exchange({ action: WriteAction.WRITE, data, labels: {} });
          offset += BigInt(data.length);
        }
      }
      await exchange({ action: WriteAction.COMMIT, data: new Uint8Array(0), labels: blob.labels });
      await stream.requests.complete();
      while (!(await answers.next()).done) progressed();
      await stream.status;
    } catch (err) {
      if (abort.signal.aborted) throw new StalledWriteError(blob.digest, stallMs, offset);
      if (isAlreadyExists(err)) {
        if (Object.keys(blob.labels).length) await store.addLabels(blob.digest, blob.labels);
        return;
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  const descriptor = (d: ImportDescriptor) => ({ mediaType: d.mediaType, digest: d.digest, size: BigInt(d.size), annotations: {} });

  const store: ImageStore = {
    async imageTarget(name) {
      try {
        const t = (await images.get({ name }, call()).response).image?.target;
        return t ? { mediaType: t.mediaType, digest: t.digest, size: Number(t.size) } : undefined;
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    async hasBlob(digest) {
      try {
        await content.info({ digest }, call()).response;
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    },
    async writeBlob(blob) {
      // A write that stops moving is cut off and retried on a new ingest ref: the agent preloads before
      // anything else, and one stalled stream once kept a test node from starting its servers (scripts/vm's
      // systemd node, 2026-11-24; the lock-step writes above remove the cause found, Bun's HTTP/2 flow control).
      for (let attempt = 1; ; attempt++) {
        try {
          return await writeOnce(blob, attempt);
        } catch (err) {
          if (!(err instanceof StalledWriteError) || attempt >= WRITE_ATTEMPTS) throw err;
          opts.logger?.warn("a content write stalled; writing it again on a new ingest ref", { digest: blob.digest, attempt, atByte: String(err.offset) });
        }
      }
    },
    async addLabels(digest, labels) {
      const paths = Object.keys(labels).map((k) => `labels.${k}`);
      await content.update({ info: { digest, size: 0n, labels }, updateMask: { paths } }, call()).response;
    },
    async putImage(name, target) {
      const image = { name, labels: {}, target: descriptor(target) };
      try {
        await images.create({ image }, call()).response;
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
        await images.update({ image, updateMask: { paths: ["target"] } }, call()).response;
      }
    },
    async withLease(fn) {
      const id = `bunlet-import-${now()}`;
      const expire = new Date(now() + 60 * 60_000).toISOString().replace(/\.\d{3}Z$/, "Z");
      await leases.create({ id, labels: { "containerd.io/gc.expire": expire } }, call()).response;
      lease = id;
      try {
        return await fn();
      } finally {
        lease = undefined;
        await leases.delete({ id, sync: false }, call()).response.catch(() => {});
      }
    },
    close() {
      transport.close();
    },
  };
  return store;
}

/** The largest Write message: half of HTTP/2's initial stream window (65,535 bytes). */
const WRITE_MESSAGE_BYTES = 32 * 1024;

/** How many Write streams one blob gets when they stall. */
const WRITE_ATTEMPTS = 3;

export class StalledWriteError extends Error {
  override readonly name = "StalledWriteError";
  constructor(
    readonly digest: string,
    readonly stallMs: number,
    readonly offset: bigint,
  ) {
    super(`writing ${digest} into containerd's content store made no progress for ${stallMs / 1000} s (at byte ${offset})`);
  }
}
