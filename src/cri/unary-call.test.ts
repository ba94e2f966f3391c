// startUnaryCall against FakeCri served over a real unix socket: what
// grpc-js's Client guaranteed its unary callback, kept below it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Channel, ChannelCredentials, status as GrpcStatus } from "@grpc/grpc-js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { channelOptions } from "./client.ts";
import { FakeCri } from "./fake.ts";
import { serveCri, type CriGrpcServer } from "./grpc-server.ts";
import { RUNTIME, type Rpc } from "./rpc.ts";
import { GrpcStatusError, startUnaryCall } from "./unary-call.ts";

const dir = mkdtempSync(join(tmpdir(), "unary-"));
let fake: FakeCri;
let server: CriGrpcServer;
let channel: Channel;

beforeAll(async () => {
  fake = new FakeCri({ clock: new FakeClock(), images: [] });
  server = await serveCri(fake, join(dir, "s.sock"));
  channel = new Channel(`unix:${server.socketPath}`, ChannelCredentials.createInsecure(), channelOptions(16 * 1024 * 1024));
});
afterAll(() => {
  channel.close();
  server.kill();
  rmSync(dir, { recursive: true, force: true });
});

/** The call's outcome and how many times `done` was called (after a moment for a second call to show). */
async function outcome<I extends object, O extends object>(rpc: Rpc<I, O>, input: I, deadline = Number.POSITIVE_INFINITY, whileRunning?: (h: { cancel(): void }) => void) {
  let calls = 0;
  const result = await new Promise<{ err: GrpcStatusError | null; answer?: O }>((resolve) => {
    const h = startUnaryCall(channel, rpc, input, deadline, (err, answer) => {
      calls++;
      resolve({ err, answer });
    });
    whileRunning?.(h);
  });
  await Bun.sleep(20);
  return { ...result, calls };
}

describe("startUnaryCall", () => {
  test("answers with the generated type, once", async () => {
    const r = await outcome(RUNTIME.version, { version: "v1" });
    expect([r.err, r.answer?.runtimeName, r.calls]).toEqual([null, "fake", 1]);
  });

  test("a failing status arrives with its code and the runtime's words", async () => {
    fake.failNext("containerStatus", "NotFound", "no such container");
    const r = await outcome(RUNTIME.containerStatus, { containerId: "x", verbose: false });
    expect(r.err).toBeInstanceOf(GrpcStatusError);
    expect([r.err?.code, r.err?.details, r.calls]).toEqual([GrpcStatus.NOT_FOUND, "no such container", 1]);
  });

  test("the deadline ends an unanswered call with DEADLINE_EXCEEDED", async () => {
    const release = fake.holdNext("version");
    const t0 = performance.now();
    const r = await outcome(RUNTIME.version, { version: "v1" }, Date.now() + 200);
    release();
    expect([r.err?.code, r.calls]).toEqual([GrpcStatus.DEADLINE_EXCEEDED, 1]);
    expect(performance.now() - t0).toBeLessThan(1500);
  });

  test("cancel ends a running call with CANCELLED, as grpc-js's Client does", async () => {
    const release = fake.holdNext("version");
    const r = await outcome(RUNTIME.version, { version: "v1" }, Number.POSITIVE_INFINITY, (h) => setTimeout(() => h.cancel(), 20));
    release();
    expect([r.err?.code, r.err?.details, r.calls]).toEqual([GrpcStatus.CANCELLED, "Cancelled on client", 1]);
  });

  test("an answer that cannot be read fails INTERNAL; a request that cannot be written fails INTERNAL without reaching the runtime", async () => {
    const unreadable: Rpc<{ version: string }, object> = {
      ...RUNTIME.version,
      deserialize: () => {
        throw new Error("bad bytes");
      },
    };
    const r = await outcome(unreadable, { version: "v1" });
    expect([r.err?.code, r.err?.details, r.calls]).toEqual([GrpcStatus.INTERNAL, "Response message parsing error: bad bytes", 1]);

    const before = fake.callsOf("version").length;
    const unwritable: Rpc<{ version: string }, object> = {
      ...RUNTIME.version,
      serialize: () => {
        throw new Error("cannot encode");
      },
    };
    const w = await outcome(unwritable, { version: "v1" });
    expect([w.err?.code, w.err?.details, w.calls]).toEqual([GrpcStatus.INTERNAL, "Request message serialization failure: cannot encode", 1]);
    expect(fake.callsOf("version").length).toBe(before);
  });
});
