import { afterEach, describe, expect, test } from "bun:test";
import { connect, createServer, type Server, type Socket } from "node:net";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import type { Authenticate } from "./authn.ts";
import type { AccessDecision } from "./authz.ts";
import { HttpError } from "./errors.ts";
import { backendRequestHead, proxyStream, streamingUpgrade, type UpgradeHandler } from "./stream-proxy.ts";
import type { StreamingResolver, StreamingTarget } from "./streaming.ts";

const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

async function listen(onConnection: (s: Socket) => void): Promise<number> {
  const server = createServer(onConnection);
  servers.push(server);
  await new Promise<void>((res) => server.listen(0, "127.0.0.1", res));
  return (server.address() as { port: number }).port;
}

/** A runtime streaming server: records the request head, answers 101 and echoes upper-cased bytes. */
async function fakeRuntime() {
  const heads: string[] = [];
  const port = await listen((s) => {
    let buf = "";
    let upgraded = false;
    s.on("data", (d) => {
      if (upgraded) return void s.write(d.toString().toUpperCase());
      buf += d.toString("latin1");
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      heads.push(buf.slice(0, end + 4));
      upgraded = true;
      s.write("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n");
      const rest = buf.slice(end + 4);
      if (rest) s.write(rest.toUpperCase());
    });
    s.on("error", () => {});
  });
  return { port, heads };
}

const rawReq = (url: string, headers: [string, string][]) => ({
  method: "POST",
  url,
  rawHeaders: headers.flat(),
  headers: Object.fromEntries(headers.map(([k, v]) => [k.toLowerCase(), v])),
});

/** Connects a client to a front server that hands each connection to `handle`; resolves with the client socket. */
async function front(handle: (client: Socket) => void): Promise<Socket> {
  const port = await listen(handle);
  const c = connect(port, "127.0.0.1");
  await new Promise<void>((res) => c.once("connect", res));
  return c;
}

const readUntil = (s: Socket, text: string) =>
  new Promise<string>((resolve, reject) => {
    let got = "";
    const onData = (d: Buffer) => {
      got += d.toString("latin1");
      if (got.includes(text)) {
        s.off("data", onData);
        resolve(got);
      }
    };
    s.on("data", onData);
    s.once("error", reject);
  });
const readAll = (s: Socket) =>
  new Promise<string>((resolve) => {
    let got = "";
    s.on("data", (d) => (got += d.toString("latin1")));
    s.on("close", () => resolve(got));
  });

describe("backendRequestHead", () => {
  test("the client's headers go to the runtime minus credentials, with the runtime's Host and X-Forwarded-For", () => {
    const head = backendRequestHead(
      rawReq("/exec/ns/p/c?command=id&output=1", [
        ["Host", "node:10250"],
        ["Authorization", "Bearer secret"],
        ["Connection", "Upgrade"],
        ["Upgrade", "websocket"],
        ["Sec-WebSocket-Key", "abc=="],
        ["Sec-WebSocket-Protocol", "v5.channel.k8s.io"],
        ["Sec-WebSocket-Protocol", "v4.channel.k8s.io"],
        ["X-Stream-Protocol-Version", "v4.channel.k8s.io"],
        ["X-Forwarded-For", "10.0.0.1"],
      ]),
      new URL("http://127.0.0.1:4242/exec/TOKEN"),
      "10.0.0.2",
    );
    expect(head).toBe(
      [
        "POST /exec/TOKEN?command=id&output=1 HTTP/1.1",
        "Host: 127.0.0.1:4242",
        "Connection: Upgrade",
        "Upgrade: websocket",
        "Sec-WebSocket-Key: abc==",
        "Sec-WebSocket-Protocol: v5.channel.k8s.io",
        "Sec-WebSocket-Protocol: v4.channel.k8s.io",
        "X-Stream-Protocol-Version: v4.channel.k8s.io",
        "X-Forwarded-For: 10.0.0.1, 10.0.0.2",
      ].join("\r\n") + "\r\n\r\n",
    );
  });

  test("a query on the runtime's URL wins; header values with line breaks are dropped", () => {
    const head = backendRequestHead(rawReq("/portForward/ns/p?port=80", [["X-Evil", "a\r\nInjected: 1"]]), new URL("http://127.0.0.1:1/portforward/T?x=1"), undefined);
    expect(head).toBe("POST /portforward/T?x=1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n");
  });
});

describe("proxyStream", () => {
  test("relays the runtime's 101 and then bytes both ways, including bytes read past the client's headers", async () => {
    const runtime = await fakeRuntime();
    const clock = new FakeClock();
    const client = await front((socket) =>
      proxyStream({
        client: socket,
        head: Buffer.from("early"),
        req: rawReq("/exec/ns/p/c", [["Upgrade", "SPDY/3.1"]]),
        target: new URL(`http://127.0.0.1:${runtime.port}/exec/T`),
        idleTimeoutMs: 0,
        clock,
        logger: memoryLogger().logger,
      }),
    );
    const answer = await readUntil(client, "EARLY");
    expect(answer).toStartWith("HTTP/1.1 101 Switching Protocols\r\n");
    expect(answer).toContain("X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\nEARLY");
    expect(runtime.heads[0]).toStartWith("POST /exec/T HTTP/1.1\r\n");
    client.write("ping");
    expect(await readUntil(client, "PING")).toBe("PING");
    client.destroy();
  });

  test("a stream idle for streamingConnectionIdleTimeout is closed; activity pushes the deadline", async () => {
    const runtime = await fakeRuntime();
    const clock = new FakeClock();
    let closed = false;
    const client = await front((socket) =>
      proxyStream({
        client: socket,
        head: Buffer.alloc(0),
        req: rawReq("/attach/ns/p/c", []),
        target: new URL(`http://127.0.0.1:${runtime.port}/attach/T`),
        idleTimeoutMs: 60_000,
        clock,
        logger: memoryLogger().logger,
        onClose: () => (closed = true),
      }),
    );
    const all = readAll(client);
    await Bun.sleep(50);
    clock.advance(50_000);
    client.write("x");
    await Bun.sleep(50);
    clock.advance(50_000); // 100s since start, 50s since the last byte: still open
    await Bun.sleep(50);
    expect(closed).toBe(false);
    clock.advance(10_000);
    expect(await all).toContain("X");
    await Bun.sleep(20);
    expect(closed).toBe(true);
    expect(clock.pendingTimers()).toBe(0);
  });

  test("a runtime that cannot be reached is a 500 to the client", async () => {
    const unused = await listen(() => {});
    servers.pop()!.close();
    const client = await front((socket) =>
      proxyStream({
        client: socket,
        head: Buffer.alloc(0),
        req: rawReq("/exec/ns/p/c", []),
        target: new URL(`http://127.0.0.1:${unused}/exec/T`),
        idleTimeoutMs: 0,
        clock: new FakeClock(),
        logger: memoryLogger().logger,
      }),
    );
    const answer = await readAll(client);
    expect(answer).toStartWith("HTTP/1.1 500 Internal Server Error\r\n");
    expect(answer).toContain("error dialing backend:");
  });
});

describe("streamingUpgrade", () => {
  function handler(opts: { user?: boolean; decision?: AccessDecision; resolve?: (t: StreamingTarget) => Promise<string> }) {
    const resolved: StreamingTarget[] = [];
    const authenticate: Authenticate = async () => (opts.user === false ? undefined : { username: "u", groups: [] });
    const resolver: StreamingResolver = {
      streamUrl: async (t) => {
        resolved.push(t);
        return opts.resolve ? opts.resolve(t) : "http://127.0.0.1:1/x";
      },
      run: async () => new Uint8Array(),
    };
    const upgrade = streamingUpgrade({
      authenticate,
      checkAccess: async () => opts.decision ?? { allowed: true },
      resolver,
      idleTimeoutMs: 0,
      clock: new FakeClock(),
      logger: memoryLogger().logger,
    });
    return { upgrade, resolved };
  }
  const call = async (upgrade: UpgradeHandler, url: string, method = "POST") => {
    const client = await front((socket) => upgrade({ ...rawReq(url, []), method, socket } as unknown as IncomingMessage & { socket: Socket & Duplex }, socket, Buffer.alloc(0)));
    return readAll(client);
  };

  test("unauthenticated: 401 and the runtime is never asked", async () => {
    const h = handler({ user: false });
    expect(await call(h.upgrade, "/exec/ns/p/c?command=id&output=1")).toMatch(/^HTTP\/1.1 401 Unauthorized\r\n[\s\S]*\r\n\r\nUnauthorized$/);
    expect(h.resolved).toEqual([]);
  });

  test("unauthorized: the checker's status and message, and the runtime is never asked", async () => {
    const h = handler({ decision: { allowed: false, status: 403, message: "Forbidden (user=u, verb=create, resource=nodes, subresource=proxy)" } });
    expect(await call(h.upgrade, "/exec/ns/p/c?command=id&output=1")).toEndWith("\r\n\r\nForbidden (user=u, verb=create, resource=nodes, subresource=proxy)");
    expect(h.resolved).toEqual([]);
  });

  test("unknown paths 404, wrong methods 405, resolver errors keep their status", async () => {
    const h = handler({ resolve: async () => Promise.reject(new HttpError(404, 'pod "ns/p" does not exist')) });
    expect(await call(h.upgrade, "/pods")).toStartWith("HTTP/1.1 404 ");
    expect(await call(h.upgrade, "/run/ns/p/c")).toStartWith("HTTP/1.1 404 ");
    expect(await call(h.upgrade, "/exec/ns/p/c", "DELETE")).toStartWith("HTTP/1.1 405 ");
    const missing = await call(h.upgrade, "/exec/ns/p/c?command=id&output=1");
    expect(missing).toStartWith("HTTP/1.1 404 Not Found\r\n");
    expect(missing).toEndWith('\r\n\r\npod "ns/p" does not exist');
  });

  test("allowed: proxied to the runtime's URL", async () => {
    const runtime = await fakeRuntime();
    const h = handler({ resolve: async () => `http://127.0.0.1:${runtime.port}/exec/T` });
    const client = await front((socket) => h.upgrade({ ...rawReq("/exec/ns/p/c?command=id&output=1", [["Upgrade", "SPDY/3.1"]]), socket } as never, socket, Buffer.alloc(0)));
    expect(await readUntil(client, "\r\n\r\n")).toStartWith("HTTP/1.1 101 ");
    expect(h.resolved).toEqual([{ kind: "exec", namespace: "ns", pod: "p", container: "c" }]);
    expect(runtime.heads[0]).toContain("Upgrade: SPDY/3.1\r\n");
    client.destroy();
  });
});
