// The HTTP/2 transport against local node:http2 TLS servers: one session
// carries concurrent requests, bodies stream both ways, GOAWAY and a dead
// session lead to a new session, a rotated client certificate to a new
// session, an HTTP/1.1-only server to the fallback, dial failures are typed,
// and a silent connection is found by PING and ended.
import { afterAll, afterEach, expect, test } from "bun:test";
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import http2, { type ServerHttp2Session } from "node:http2";
import https from "node:https";
import type { AddressInfo } from "node:net";
import tls, { type TLSSocket } from "node:tls";
import { createCertificate } from "../certificates/x509.ts";
import { realClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { CONNECTION_WINDOW_BYTES, Http2Transport, STREAM_WINDOW_BYTES } from "./http2.ts";
import { fetchTransport, type TlsMaterial, TransportError } from "./transport.ts";

const now = Date.now();
const DAY = 86_400_000;
const pem = (k: KeyObject) => k.export({ type: "sec1", format: "pem" }).toString();
const caKeys = generateKeyPairSync("ec", { namedCurve: "P-256" });
const ca = createCertificate(
  {
    subject: { commonName: "test-ca" },
    publicKey: caKeys.publicKey,
    notBeforeMs: now - DAY,
    notAfterMs: now + DAY,
    serial: 1n,
    usages: ["serverAuth", "clientAuth"],
    ownAnchor: true,
  },
  caKeys.privateKey,
);
let serial = 10n;
function leaf(commonName: string, usage: "serverAuth" | "clientAuth", altNames?: string[]) {
  const keys = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const cert = createCertificate(
    { subject: { commonName }, publicKey: keys.publicKey, notBeforeMs: now - DAY, notAfterMs: now + DAY, serial: serial++, usages: [usage], ...(altNames ? { altNames } : {}) },
    caKeys.privateKey,
    { certificatePem: ca },
  );
  return { cert, key: pem(keys.privateKey) };
}
const serving = leaf("127.0.0.1", "serverAuth", ["127.0.0.1", "localhost"]);
const alice = leaf("system:node:alice", "clientAuth");
const bob = leaf("system:node:bob", "clientAuth");

/** An HTTP/2 server that asks for client certificates and records each session and stream. */
async function h2Server(onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, peer: string) => void) {
  const server = http2.createSecureServer({ ...serving, ca, requestCert: true, rejectUnauthorized: true });
  const sessions: ServerHttp2Session[] = [];
  const sockets: TLSSocket[] = [];
  server.on("session", (s) => sessions.push(s));
  server.on("secureConnection", (socket: TLSSocket) => sockets.push(socket));
  server.on("stream", (stream, headers) => {
    const cn: string | string[] | undefined = (stream.session!.socket as TLSSocket).getPeerCertificate().subject?.CN;
    onStream(stream, headers, String(cn ?? ""));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  servers.push(() => {
    for (const s of sessions) s.destroy();
    server.close();
  });
  /** Cuts every connection without a word (no GOAWAY), as a crashed server or a broken network does. */
  const cut = () => {
    for (const socket of sockets) socket.destroy();
  };
  return { url: `https://127.0.0.1:${port}`, sessions, port, cut };
}

const servers: (() => void)[] = [];
const transports: Http2Transport[] = [];
afterEach(() => {
  for (const t of transports.splice(0)) t.close();
});
afterAll(() => {
  for (const stop of servers) stop();
});

function transport(
  server: string,
  material: () => TlsMaterial = () => ({ ca, ...alice, rejectUnauthorized: true }),
  extra: Partial<ConstructorParameters<typeof Http2Transport>[0]> = {},
) {
  const { logger, lines } = memoryLogger();
  const t = new Http2Transport({ server, tls: material, logger, clock: realClock, fallback: fetchTransport(material), ...extra });
  transports.push(t);
  return { t, lines };
}

const get = (
  server: string,
  path: string,
  signal: AbortSignal = AbortSignal.timeout(5000),
  extra: { method?: string; body?: string | Uint8Array; headers?: Record<string, string> } = {},
) => ({
  method: extra.method ?? "GET",
  url: new URL(server + path),
  headers: extra.headers ?? { Accept: "application/json" },
  ...(extra.body !== undefined ? { body: extra.body } : {}),
  signal,
});

const echo = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, peer: string) => {
  const chunks: Buffer[] = [];
  stream.on("data", (c: Buffer) => chunks.push(c));
  stream.on("end", () => {
    if (stream.destroyed) return;
    stream.respond({ ":status": 201, "content-type": "application/json", "x-seen": "yes" });
    stream.end(JSON.stringify({ path: headers[":path"], method: headers[":method"], peer, ua: headers["user-agent"], body: Buffer.concat(chunks).toString() }));
  });
};

test("concurrent requests share one session; status, headers and bodies go both ways; the client certificate is presented", async () => {
  const srv = await h2Server(echo);
  const { t } = transport(srv.url);
  const answers = await Promise.all(
    [1, 2, 3].map((i) => t.send(get(srv.url, `/api/v1/nodes/n${i}?x=${i}`, undefined, { method: "PUT", body: `{"i":${i}}`, headers: { "User-Agent": "kubelet/test" } }))),
  );
  expect(answers.map((r) => r.status)).toEqual([201, 201, 201]);
  expect(answers[0]!.headers.get("x-seen")).toBe("yes");
  expect(await Promise.all(answers.map((r) => r.json()))).toEqual(
    [1, 2, 3].map((i) => ({ path: `/api/v1/nodes/n${i}?x=${i}`, method: "PUT", peer: "system:node:alice", ua: "kubelet/test", body: `{"i":${i}}` })),
  );
  expect(srv.sessions.length).toBe(1);
  expect(t.protocol).toBe("h2");
});

test("the server may send 4 MiB on a stream and 1 GiB on the connection before this side acknowledges, as Go's client", async () => {
  // A TLS server that speaks just enough HTTP/2 (its SETTINGS and the ACK) to read the client's first frames.
  const frames: { type: number; stream: number; payload: Buffer }[] = [];
  const server = tls.createServer({ ...serving, ALPNProtocols: ["h2"] }, (socket) => {
    let buffered = Buffer.alloc(0);
    let preface = false;
    socket.on("error", () => {});
    socket.on("data", (data: Buffer) => {
      buffered = Buffer.concat([buffered, data]);
      if (!preface && buffered.length >= 24) {
        buffered = buffered.subarray(24);
        preface = true;
        socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]));
      }
      while (preface && buffered.length >= 9 && buffered.length >= 9 + buffered.readUIntBE(0, 3)) {
        const length = buffered.readUIntBE(0, 3);
        const frame = { type: buffered[3]!, stream: buffered.readUInt32BE(5) & 0x7fffffff, payload: buffered.subarray(9, 9 + length) };
        frames.push(frame);
        if (frame.type === 4 && !(buffered[4]! & 1)) socket.write(Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0]));
        buffered = buffered.subarray(9 + length);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  servers.push(() => server.close());
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { t } = transport(url);
  void t.send(get(url, "/api/v1/nodes/n1", AbortSignal.timeout(2000))).catch(() => {});
  const windowUpdate = () => frames.find((f) => f.type === 8 && f.stream === 0);
  for (let i = 0; i < 100 && !windowUpdate(); i++) await Bun.sleep(10);
  // SETTINGS: 2-byte identifiers, 4-byte values; ENABLE_PUSH (2) 0, INITIAL_WINDOW_SIZE (4) 4 MiB.
  const settings = new Map<number, number>();
  const sent = frames.find((f) => f.type === 4 && f.payload.length > 0)!.payload;
  for (let at = 0; at + 6 <= sent.length; at += 6) settings.set(sent.readUInt16BE(at), sent.readUInt32BE(at + 2));
  expect(settings.get(4)).toBe(STREAM_WINDOW_BYTES);
  expect(settings.get(2)).toBe(0);
  // The connection's window, 64 KiB at first, is raised to 1 GiB.
  expect(65535 + windowUpdate()!.payload.readUInt32BE(0)).toBe(CONNECTION_WINDOW_BYTES);
});

test("a DELETE carries its body (the kubelet's DeleteOptions: grace period 0 and the uid precondition)", async () => {
  const srv = await h2Server(echo);
  const { t } = transport(srv.url);
  const options = JSON.stringify({ kind: "DeleteOptions", apiVersion: "v1", gracePeriodSeconds: 0, preconditions: { uid: "u1" } });
  const answer = await t.send(get(srv.url, "/api/v1/namespaces/ns/pods/p", undefined, { method: "DELETE", body: options }));
  expect(await answer.json()).toMatchObject({ method: "DELETE", body: options });
});

test("a body of several MiB arrives whole, and a streamed answer arrives chunk by chunk until it is aborted", async () => {
  const big = new Uint8Array(3 * 1024 * 1024).map((_, i) => i % 251);
  let cancelled: Promise<void> | undefined;
  const srv = await h2Server((stream, headers) => {
    stream.respond({ ":status": 200 });
    if (headers[":path"] === "/big") return void stream.end(big);
    // A watch: one event now, one later, never ending by itself.
    stream.write('{"type":"ADDED"}\n');
    const timer = setTimeout(() => stream.write('{"type":"MODIFIED"}\n'), 50);
    cancelled = new Promise((r) => stream.on("close", () => r(clearTimeout(timer))));
  });
  const { t } = transport(srv.url);
  const got = Buffer.from(await (await t.send(get(srv.url, "/big"))).arrayBuffer());
  expect(got.byteLength).toBe(big.byteLength);
  expect(got.equals(big)).toBe(true);

  const abort = new AbortController();
  const watch = await t.send(get(srv.url, "/watch", abort.signal));
  const lines: string[] = [];
  const decoder = new TextDecoder();
  // Caught by hand: awaiting `expect(loop).rejects` stalls the loop's I/O in Bun 1.4.5's test runner.
  let thrown: unknown;
  try {
    for await (const chunk of watch.body!) {
      lines.push(...decoder.decode(chunk).split("\n").filter(Boolean));
      if (lines.length === 2) abort.abort(new Error("stopped by the test"));
    }
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toMatchObject({ message: "stopped by the test" });
  expect(lines).toEqual(['{"type":"ADDED"}', '{"type":"MODIFIED"}']);
  await cancelled;
  expect(srv.sessions.length).toBe(1);
});

test("after GOAWAY, and after the session dies mid-answer, the next request goes on a new session", async () => {
  const srv = await h2Server((stream, headers) => {
    if (headers[":path"] === "/die") {
      stream.respond({ ":status": 200 });
      stream.write("partial");
      setTimeout(() => srv.cut(), 20);
      return;
    }
    stream.respond({ ":status": 200 });
    stream.end("ok");
  });
  const { t } = transport(srv.url);
  expect(await (await t.send(get(srv.url, "/a"))).text()).toBe("ok");
  srv.sessions[0]!.goaway(http2.constants.NGHTTP2_NO_ERROR);
  await Bun.sleep(50);
  expect(await (await t.send(get(srv.url, "/b"))).text()).toBe("ok");
  expect(srv.sessions.length).toBe(2);

  const dying = await t.send(get(srv.url, "/die"));
  const cut = await dying.text().then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(cut).toBeInstanceOf(TransportError);
  expect(await (await t.send(get(srv.url, "/c"))).text()).toBe("ok");
  expect(srv.sessions.length).toBe(3);
});

test("a rotated client certificate is presented on a new session; the old one is closed", async () => {
  const srv = await h2Server(echo);
  let current = alice;
  const { t, lines } = transport(srv.url, () => ({ ca, ...current, rejectUnauthorized: true }));
  expect(((await (await t.send(get(srv.url, "/1"))).json()) as { peer: string }).peer).toBe("system:node:alice");
  current = bob;
  expect(((await (await t.send(get(srv.url, "/2"))).json()) as { peer: string }).peer).toBe("system:node:bob");
  expect(srv.sessions.length).toBe(2);
  await Bun.sleep(50);
  expect(srv.sessions[0]!.closed || srv.sessions[0]!.destroyed).toBe(true);
  expect(lines.some((l) => l.includes("the client certificate changed"))).toBe(true);
});

test("a server that offers no h2 gets HTTP/1.1 through the fallback, logged once", async () => {
  const server = https.createServer({ ...serving }, (req, res) => res.end(`h1 ${req.url}`));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  servers.push(() => server.close());
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { t, lines } = transport(url);
  expect(await (await t.send(get(url, "/one"))).text()).toBe("h1 /one");
  expect(await (await t.send(get(url, "/two"))).text()).toBe("h1 /two");
  expect(t.protocol).toBe("http1");
  expect(lines.filter((l) => l.includes("does not offer HTTP/2")).length).toBe(1);
});

test("dial failures are typed: nothing listening is Connect, an untrusted server is Tls", async () => {
  const closed = http2.createSecureServer({ ...serving });
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const down = `https://127.0.0.1:${port}`;
  await expect(transport(down).t.send(get(down, "/"))).rejects.toMatchObject({ name: "TransportError", kind: "Connect", server: down });

  const srv = await h2Server(echo);
  const otherCa = createCertificate(
    { subject: { commonName: "other" }, publicKey: caKeys.publicKey, notBeforeMs: now - DAY, notAfterMs: now + DAY, serial: 99n, usages: ["serverAuth"], ownAnchor: true },
    generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey,
  );
  await expect(transport(srv.url, () => ({ ca: otherCa, ...alice, rejectUnauthorized: true })).t.send(get(srv.url, "/"))).rejects.toMatchObject({
    name: "TransportError",
    kind: "Tls",
  });
});

test("a connection that stops answering is found by PING and ended; a request waiting on it fails", async () => {
  // Completes TLS with h2 and then never speaks: no SETTINGS, no PING answer.
  const silent = tls.createServer({ ...serving, ALPNProtocols: ["h2"] }, () => {});
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  servers.push(() => silent.close());
  const url = `https://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  const { t } = transport(url, undefined, { readIdleMs: 100, pingTimeoutMs: 100 });
  const started = Date.now();
  await expect(t.send(get(url, "/hangs", AbortSignal.timeout(5000)))).rejects.toBeInstanceOf(TransportError);
  expect(Date.now() - started).toBeLessThan(2000);
});

test("a session with no stream for idleCloseMs is closed; the next request opens another", async () => {
  const srv = await h2Server(echo);
  const { t } = transport(srv.url, undefined, { idleCloseMs: 100 });
  await (await t.send(get(srv.url, "/1"))).text();
  await Bun.sleep(300);
  expect(srv.sessions[0]!.closed || srv.sessions[0]!.destroyed).toBe(true);
  await (await t.send(get(srv.url, "/2"))).text();
  expect(srv.sessions.length).toBe(2);
});

test("a request aborted before its answer rejects with the signal's reason", async () => {
  const srv = await h2Server(() => {});
  const { t } = transport(srv.url);
  await expect(t.send(get(srv.url, "/never", AbortSignal.timeout(100)))).rejects.toMatchObject({ name: "TimeoutError" });
});
