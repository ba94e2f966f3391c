import { afterEach, describe, expect, test } from "bun:test";
import { Server, ServerCredentials, type ServerDuplexStream } from "@grpc/grpc-js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryLogger } from "../../util/log.ts";
import { containerdImageStore, StalledWriteError } from "./client.ts";
import { WriteAction, WriteContentRequest, WriteContentResponse } from "./gen/content.ts";

// A Content service on a unix socket whose Write streams behave as each test says.
type WriteHandler = (call: ServerDuplexStream<WriteContentRequest, WriteContentResponse>, attempt: number) => void;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function contentServer(onWrite: WriteHandler): Promise<{ endpoint: string; refs: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "content-"));
  const socket = join(dir, "containerd.sock");
  const server = new Server();
  const refs: string[] = [];
  server.addService(
    {
      Write: {
        path: "/containerd.services.content.v1.Content/Write",
        requestStream: true,
        responseStream: true,
        requestSerialize: (m: WriteContentRequest) => Buffer.from(WriteContentRequest.toBinary(m)),
        requestDeserialize: (b: Buffer) => WriteContentRequest.fromBinary(b),
        responseSerialize: (m: WriteContentResponse) => Buffer.from(WriteContentResponse.toBinary(m)),
        responseDeserialize: (b: Buffer) => WriteContentResponse.fromBinary(b),
      },
    },
    {
      Write: (call: ServerDuplexStream<WriteContentRequest, WriteContentResponse>) => {
        call.once("data", (req: WriteContentRequest) => refs.push(req.ref));
        onWrite(call, refs.length + 1);
      },
    },
  );
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socket}`, ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  cleanups.push(() => {
    server.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  });
  return { endpoint: `unix://${socket}`, refs };
}

const blob = {
  mediaType: "application/octet-stream",
  digest: "sha256:0000000000000000000000000000000000000000000000000000000000000001",
  size: 3,
  labels: {},
  async *chunks() {
    yield new Uint8Array([1, 2, 3]);
  },
};

/** Answers every request, and ends the stream after the commit: a containerd that works. */
const answering: WriteHandler = (call) => {
  call.on("data", (req: WriteContentRequest) => {
    call.write(WriteContentResponse.create({ action: req.action, offset: req.offset + BigInt(req.data.length), total: req.total }));
    if (req.action === WriteAction.COMMIT) call.end();
  });
};

describe("containerd content writes", () => {
  test("a write stream that makes no progress is cut off and retried on a new ingest ref", async () => {
    // The first stream never answers (the hang seen on a test node); the second works.
    const { endpoint, refs } = await contentServer((call, attempt) => (attempt === 1 ? undefined : answering(call, attempt)));
    const { logger, lines } = memoryLogger();
    const store = containerdImageStore(endpoint, { stallMs: 300, logger });
    cleanups.push(() => store.close());
    await store.writeBlob(blob);
    expect(refs).toEqual([`bunlet-import-${blob.digest}`, `bunlet-import-${blob.digest}-2`]);
    expect(lines.filter((l) => l.includes("a content write stalled")).map((l) => l.includes(blob.digest) && l.includes("attempt=1"))).toEqual([true]);
  });

  test("a write that never moves fails after its attempts, naming the blob, instead of blocking the agent's start", async () => {
    const { endpoint, refs } = await contentServer(() => {});
    const store = containerdImageStore(endpoint, { stallMs: 200 });
    cleanups.push(() => store.close());
    const err = await store.writeBlob(blob).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StalledWriteError);
    expect((err as Error).message).toContain(`writing ${blob.digest} into containerd's content store made no progress for 0.2 s`);
    expect(refs).toHaveLength(3);
  });

  test("a write the runtime answers completes on its first stream", async () => {
    const { endpoint, refs } = await contentServer(answering);
    const store = containerdImageStore(endpoint, { stallMs: 5_000 });
    cleanups.push(() => store.close());
    await store.writeBlob(blob);
    expect(refs).toEqual([`bunlet-import-${blob.digest}`]);
  });

  test("messages are at most 32 KiB and each waits for the answer to the one before (Bun's HTTP/2 client stalls on data queued for flow control)", async () => {
    const bytes = new Uint8Array(100 * 1024 + 7).map((_, i) => i % 251);
    const big = {
      ...blob,
      size: bytes.length,
      chunks: async function* () {
        yield bytes.subarray(0, 70_000);
        yield bytes.subarray(70_000);
      },
    };
    const seen: { action: WriteAction; offset: bigint; length: number; unanswered: number }[] = [];
    const received: Uint8Array[] = [];
    let unanswered = 0;
    const { endpoint } = await contentServer((call) => {
      call.on("data", (req: WriteContentRequest) => {
        unanswered++;
        seen.push({ action: req.action, offset: req.offset, length: req.data.length, unanswered });
        received.push(req.data);
        // answered a moment later, as containerd does once the bytes are written
        setTimeout(() => {
          unanswered--;
          call.write(WriteContentResponse.create({ action: req.action, offset: req.offset + BigInt(req.data.length), total: req.total }));
          if (req.action === WriteAction.COMMIT) call.end();
        }, 5);
      });
    });
    const store = containerdImageStore(endpoint, { stallMs: 5_000 });
    cleanups.push(() => store.close());
    await store.writeBlob(big);
    expect(seen.map((m) => m.length)).toEqual([32768, 32768, 4464, 32407, 0]);
    expect(seen.map((m) => m.offset)).toEqual([0n, 32768n, 65536n, 70000n, 102407n]);
    expect(seen.at(-1)?.action).toBe(WriteAction.COMMIT);
    expect(Math.max(...seen.map((m) => m.unanswered))).toBe(1);
    expect(Buffer.concat(received)).toEqual(Buffer.from(bytes));
  });
});
