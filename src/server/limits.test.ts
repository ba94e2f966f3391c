import { afterEach, describe, expect, test } from "bun:test";
import { connect as netConnect } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { Hono } from "hono";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { authentication } from "./authn.ts";
import { alwaysAllow, authorization } from "./authz.ts";
import { healthzApp } from "./healthz.ts";
import { kubeletApi } from "./kubelet-api.ts";
import { handlerTimeout, MAX_BODY_BYTES } from "./limits.ts";
import { createSelfSignedCert } from "./selfsigned.ts";
import { serveTls, type TlsServerHandle } from "./tls.ts";
import { HttpError } from "./errors.ts";

const pair = createSelfSignedCert({ hostname: "localhost", ips: ["127.0.0.1"], now: Date.now() });
const handles: TlsServerHandle[] = [];
afterEach(async () => {
  for (const h of handles.splice(0)) await h.close();
});

const LIMITS = { handshakeMs: 1_000, headersMs: 2_000, requestMs: 3_000, idleMs: 4_000, maxHeaderSize: 1024 };

async function serve(app: Hono<any>) {
  const clock = new FakeClock();
  const h = await serveTls({ app, host: "127.0.0.1", port: 0, cert: pair.cert, key: pair.key, logger: memoryLogger().logger, limits: LIMITS, clock });
  handles.push(h);
  return { port: h.port, clock };
}

/** Errors the test app's handlers ended with (a cut request body), instead of Hono printing them. */
let handlerErrors: string[] = [];
const streamingApp = () => {
  const app = new Hono();
  app.onError((err, c) => {
    handlerErrors.push(`${(err as { code?: string }).code ?? ""} ${err.message}`);
    return c.text("failed", 500);
  });
  app.get("/quick", (c) => c.text("quick"));
  // A long answer, like containerLogs?follow: a first chunk, then nothing for a while.
  app.get("/long", () => new Response(new ReadableStream({ start: (ctl) => ctl.enqueue(new TextEncoder().encode("first\n")) })));
  app.post("/echo", async (c) => c.text(String((await c.req.text()).length)));
  return app;
};

async function open(port: number): Promise<{ socket: TLSSocket; received: () => string; closed: Promise<void> }> {
  const socket = tlsConnect({ host: "127.0.0.1", port, rejectUnauthorized: false });
  await new Promise<void>((res, rej) => socket.once("secureConnect", res).once("error", rej));
  let data = "";
  socket.on("data", (d: Buffer) => (data += d.toString("latin1")));
  socket.on("error", () => {});
  const closed = new Promise<void>((res) => socket.once("close", () => res()));
  return { socket, received: () => data, closed };
}

const settle = () => Bun.sleep(50);
const isOpen = async (closed: Promise<void>) => (await Promise.race([closed.then(() => false), Bun.sleep(30).then(() => true)])) as boolean;

describe("connection limits on 10250 (timers on the injected clock)", () => {
  test("a TCP connection that never starts TLS is closed after the handshake limit", async () => {
    const { port, clock } = await serve(streamingApp());
    const raw = netConnect(port, "127.0.0.1");
    raw.on("error", () => {});
    const closed = new Promise<void>((res) => raw.once("close", () => res()));
    await settle();
    clock.advance(999);
    expect(await isOpen(closed)).toBe(true);
    clock.advance(1);
    await closed;
  });

  test("headers that never complete: closed after the headers limit", async () => {
    const { port, clock } = await serve(streamingApp());
    const c = await open(port);
    c.socket.write("GET /quick HTTP/1.1\r\nHost: x\r\n");
    await settle();
    clock.advance(1_999);
    expect(await isOpen(c.closed)).toBe(true);
    clock.advance(1);
    await c.closed;
    expect(c.received()).toBe("");
  });

  test("a body that never completes: closed after the request limit; a complete one is answered", async () => {
    const { port, clock } = await serve(streamingApp());
    const c = await open(port);
    handlerErrors = [];
    c.socket.write("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345");
    await settle();
    clock.advance(2_999);
    expect(await isOpen(c.closed)).toBe(true);
    clock.advance(1);
    await c.closed;
    // The handler waiting for the rest of the body is released by the cut, not left hanging.
    await settle();
    expect(handlerErrors).toEqual(["ECONNRESET aborted"]);
    const ok = await open(port);
    ok.socket.write("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n1234567890");
    await settle();
    expect(ok.received()).toContain("\r\n\r\n10");
    ok.socket.destroy();
  });

  test("keep-alive: an idle connection after a response is closed after the idle limit", async () => {
    const { port, clock } = await serve(streamingApp());
    const c = await open(port);
    c.socket.write("GET /quick HTTP/1.1\r\nHost: x\r\n\r\n");
    await settle();
    expect(c.received()).toContain("quick");
    clock.advance(3_999);
    expect(await isOpen(c.closed)).toBe(true);
    clock.advance(1);
    await c.closed;
  });

  test("a long answer to a body-less request (logs?follow) is not cut by the request limits", async () => {
    const { port, clock } = await serve(streamingApp());
    const c = await open(port);
    c.socket.write("GET /long HTTP/1.1\r\nHost: x\r\n\r\n");
    await settle();
    expect(c.received()).toContain("first\n");
    clock.advance(60_000);
    expect(await isOpen(c.closed)).toBe(true);
    c.socket.destroy();
  });

  test("a request head over maxHeaderSize is refused with 431", async () => {
    const { port } = await serve(streamingApp());
    const c = await open(port);
    c.socket.write(`GET /quick HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(2048)}\r\n\r\n`);
    await c.closed;
    expect(c.received()).toStartWith("HTTP/1.1 431 ");
  });
});

describe("request limits in the kubelet API app", () => {
  const app = (clock = new FakeClock()) =>
    kubeletApi({
      nodeName: "n1",
      pods: { list: () => [] },
      logs: () => undefined,
      health: healthzApp([]),
      authn: authentication({ x509: false, anonymous: true }),
      authz: authorization({ nodeName: "n1", authorizer: alwaysAllow() }),
      configz: () => ({ kubeletconfig: {} }),
      clock,
    });

  test("a body over the limit is 413", async () => {
    const res = await app().request("/run/ns/p/c?cmd=ls", { method: "POST", body: "x".repeat(MAX_BODY_BYTES + 1) });
    expect(res.status).toBe(413);
    expect(await res.text()).toBe(`request body larger than ${MAX_BODY_BYTES} bytes`);
  });

  test("a handler that does not answer in time is a 504; one that does is untouched", async () => {
    const clock = new FakeClock();
    const slow = new Hono();
    slow.use(handlerTimeout({ ms: 120_000, clock }));
    slow.onError((err, c) => (err instanceof HttpError ? c.text(err.message, err.status) : c.text("?", 500)));
    slow.get("/stuck", () => new Promise<Response>(() => {}));
    slow.get("/fine", (c) => c.text("fine"));
    const pending = slow.request("/stuck");
    await settle();
    clock.advance(120_000);
    const res = await pending;
    expect([res.status, await res.text()]).toEqual([504, "Timeout: request did not complete within 2m0s"]);
    expect(await (await slow.request("/fine")).text()).toBe("fine");
    expect(clock.pendingTimers()).toBe(0);
  });
});
