// requestBytes against a local HTTP server: the bytes and content type come
// back as sent, and an error answer's Status is read from protobuf or JSON.
import { afterAll, expect, test } from "bun:test";
import { FakeClock, realClock } from "../util/clock.ts";
import { createLogger, memoryLogger } from "../util/log.ts";
import { envelope, PROTOBUF, Writer } from "./protobuf.ts";
import { FakeTransport } from "./fake-transport.ts";
import { hasStatusCause } from "./errors.ts";
import { createRestClient, MAX_RETRIES } from "./rest.ts";
import { TransportError } from "./transport.ts";
import { DisposalStack } from "../util/disposal.ts";

const seen: { method: string; type: string | null; accept: string | null; body: number[] }[] = [];
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    seen.push({ method: req.method, type: req.headers.get("content-type"), accept: req.headers.get("accept"), body: [...new Uint8Array(await req.arrayBuffer())] });
    const path = new URL(req.url).pathname;
    if (path === "/ok") return new Response(new Uint8Array([0x6b, 0x38, 0x73, 0x00, 1, 2]), { headers: { "content-type": PROTOBUF } });
    if (path === "/conflict") {
      const status = new Writer().string(2, "Failure").string(3, 'Operation cannot be fulfilled on leases "n"').string(4, "Conflict").varint(6, 409).finish();
      return new Response(envelope("v1", "Status", status), { status: 409, headers: { "content-type": PROTOBUF } });
    }
    if (path === "/terminating") {
      // Status{status 2, message 3, reason 4, details 5 {causes 4 {reason 1, message 2}}, code 6}: a namespace being deleted.
      const cause = new Writer().string(1, "NamespaceTerminating").string(2, "namespace ns1 is being terminated").finish();
      const details = new Writer().string(1, "ns1").bytes(4, cause).finish();
      const status = new Writer().string(2, "Failure").string(3, "unable to create new content in namespace ns1").string(4, "Forbidden").bytes(5, details).varint(6, 403).finish();
      return new Response(envelope("v1", "Status", status), { status: 403, headers: { "content-type": PROTOBUF } });
    }
    if (path === "/json-terminating")
      return Response.json(
        { kind: "Status", reason: "Forbidden", message: "being terminated", details: { causes: [{ reason: "NamespaceTerminating", message: "x" }] } },
        { status: 403 },
      );
    if (path === "/json-error") return Response.json({ kind: "Status", reason: "NotFound", message: "leases n not found" }, { status: 404 });
    return new Response("unsupported media type", { status: 415, headers: { "content-type": "text/plain" } });
  },
});
afterAll(() => void server.stop(true));
const rest = createRestClient({
  credentials: { server: `http://127.0.0.1:${server.port}`, headers: {}, insecureSkipVerify: false },
  qps: 0,
  burst: 0,
  clock: realClock,
  logger: createLogger({ verbosity: 0 }),
  userAgent: "t",
});
const opts = { body: new Uint8Array([9, 8, 7]), contentType: PROTOBUF, accept: PROTOBUF };

test("the body goes as given; the answer comes back as bytes with its content type", async () => {
  expect(await rest.requestBytes("PUT", "/ok", opts)).toEqual({ contentType: PROTOBUF, bytes: new Uint8Array([0x6b, 0x38, 0x73, 0x00, 1, 2]) });
  expect(seen.at(-1)).toEqual({ method: "PUT", type: PROTOBUF, accept: PROTOBUF, body: [9, 8, 7] });
});

test("an error answer is an ApiError with the Status's reason and message, in either encoding", async () => {
  await expect(rest.requestBytes("PUT", "/conflict", opts)).rejects.toMatchObject({
    reason: "Conflict",
    status: 409,
    message: expect.stringContaining('Operation cannot be fulfilled on leases "n"'),
  });
  await expect(rest.requestBytes("GET", "/json-error", { contentType: PROTOBUF, accept: PROTOBUF })).rejects.toMatchObject({ reason: "NotFound", status: 404 });
  await expect(rest.requestBytes("PUT", "/other", opts)).rejects.toMatchObject({ status: 415, message: expect.stringContaining("unsupported media type") });
});

test("an error's Status causes are read in either encoding (client-go's HasStatusCause): a namespace being deleted", async () => {
  for (const path of ["/terminating", "/json-terminating"]) {
    const err = await rest.requestBytes("POST", path, opts).catch((e: unknown) => e);
    expect(err).toMatchObject({ reason: "Forbidden", status: 403 });
    expect(hasStatusCause(err, "NamespaceTerminating")).toBe(true);
  }
  const other = await rest.requestBytes("PUT", "/conflict", opts).catch((e: unknown) => e);
  expect(hasStatusCause(other, "NamespaceTerminating")).toBe(false);
});

test("requests go through the given transport; a transport failure is an ApiError naming the request", async () => {
  const transport = new FakeTransport((req) => {
    if (req.path.startsWith("/api/v1/nodes/down")) throw new TransportError("Connect", "https://api", "connect ECONNREFUSED", "ECONNREFUSED");
    return Response.json({ kind: "Node", metadata: { name: "n" } });
  });
  const client = createRestClient({
    credentials: { server: "https://api", headers: { Authorization: "Bearer t" }, insecureSkipVerify: false },
    qps: 0,
    burst: 0,
    clock: realClock,
    logger: createLogger({ verbosity: 0 }),
    userAgent: "ua",
    transport,
  });
  expect(await client.request("PATCH", "/api/v1/nodes/n/status", { body: { status: {} }, contentType: "application/strategic-merge-patch+json", query: { a: 1 } })).toEqual({
    kind: "Node",
    metadata: { name: "n" },
  });
  expect(transport.requests.at(-1)).toEqual({
    method: "PATCH",
    path: "/api/v1/nodes/n/status?a=1",
    headers: { Authorization: "Bearer t", Accept: "application/json", "User-Agent": "ua", "Content-Type": "application/strategic-merge-patch+json" },
    body: '{"status":{}}',
  });
  await expect(client.request("GET", "/api/v1/nodes/down")).rejects.toMatchObject({
    reason: "Unreachable",
    verb: "GET",
    path: "/api/v1/nodes/down",
    message: expect.stringContaining("Connect: connect ECONNREFUSED"),
  });
  client.close();
  expect(transport.closed).toBe(true);
});

test("the client is a named part of the agent's disposal stack: stopping the stack ends its transport's connections", async () => {
  const transport = new FakeTransport(() => Response.json({}));
  const logger = createLogger({ verbosity: 0 });
  const stack = new DisposalStack({ clock: realClock, logger });
  stack.use(
    "API client",
    createRestClient({ credentials: { server: "https://api", headers: {}, insecureSkipVerify: false }, qps: 0, burst: 0, clock: realClock, logger, userAgent: "ua", transport }),
  );
  expect(transport.closed).toBe(false);
  await stack.dispose();
  expect(transport.closed).toBe(true);
});

test("a client made withLimits shares the connection but not the budget: events never wait behind status patches", async () => {
  const transport = new FakeTransport(() => Response.json({}));
  const clock = new FakeClock();
  const main = clientOver(transport, clock, { qps: 1, burst: 1 });
  const events = main.withLimits({ qps: 50, burst: 100 });
  await main.request("PATCH", "/api/v1/namespaces/a/pods/p/status", { body: {} });
  // The main budget is spent: the next status patch waits a second for its token...
  let patched = false;
  const patch = main.request("PATCH", "/api/v1/namespaces/a/pods/q/status", { body: {} }).then(() => (patched = true));
  // ...while an event goes at once, over the same transport.
  await events.request("POST", "/api/v1/namespaces/a/events", { body: {} });
  expect(patched).toBe(false);
  expect(transport.requests.map((r) => r.path)).toEqual(["/api/v1/namespaces/a/pods/p/status", "/api/v1/namespaces/a/events"]);
  clock.advance(1000);
  await patch;
  expect(transport.requests.at(-1)?.path).toBe("/api/v1/namespaces/a/pods/q/status");
});

test("a request given up while throttled is never sent and fails at once, naming it", async () => {
  const transport = new FakeTransport(() => Response.json({}));
  const clock = new FakeClock();
  const main = clientOver(transport, clock, { qps: 1, burst: 1 });
  await main.request("GET", "/api/v1/nodes/a");
  const abort = new AbortController();
  const throttled = main.request("GET", "/api/v1/nodes/b", { signal: abort.signal });
  abort.abort(new Error("watch closed"));
  // Before the fix the request waited out its turn on the fake clock, which never moves here.
  const stillWaiting = Bun.sleep(1000).then(() => "still waiting for its token");
  await expect(Promise.race([throttled, stillWaiting])).rejects.toThrow("GET /api/v1/nodes/b: Unreachable (0): canceled while waiting for the client rate limit: watch closed");
  expect(transport.requests.map((r) => r.path)).toEqual(["/api/v1/nodes/a"]);
});

/** A client over `transport` with a fake clock (no rate limit unless given). */
function clientOver(transport: FakeTransport, clock: FakeClock, limit = { qps: -1, burst: 0 }) {
  return createRestClient({
    credentials: { server: "https://api", headers: {}, insecureSkipVerify: false },
    ...limit,
    clock,
    logger: createLogger({ verbosity: 0 }),
    userAgent: "ua",
    transport,
  });
}

/** Moves the fake clock a second at a time until `done` settles (at most `seconds`). */
async function runClock(clock: FakeClock, done: Promise<unknown>, seconds: number): Promise<void> {
  let settled = false;
  void done.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < seconds && !settled; i++) {
    await Bun.sleep(0);
    clock.advance(1000);
  }
  await Bun.sleep(0);
}

test("a 429 or 5xx answer with a Retry-After is sent again after the seconds asked, as client-go's rest client, any verb", async () => {
  const answers = [
    new Response("{}", { status: 429, headers: { "retry-after": "2" } }),
    new Response("{}", { status: 503, headers: { "retry-after": "1" } }),
    Response.json({ kind: "Event" }, { status: 201 }),
  ];
  const clock = new FakeClock();
  const start = clock.now();
  const sentAt: number[] = [];
  const client = clientOver(
    new FakeTransport(() => {
      sentAt.push(clock.now() - start);
      return answers.shift() ?? new Response("{}", { status: 500 });
    }),
    clock,
  );
  const created = client.request("POST", "/api/v1/namespaces/a/events", { body: { reason: "Started" } });
  await runClock(clock, created, 10);
  expect(await created).toEqual({ kind: "Event" });
  expect(sentAt).toEqual([0, 2000, 3000]);
});

test("without a Retry-After, or for a 4xx other than 429, the answer is final at once", async () => {
  for (const answer of [() => new Response("{}", { status: 503 }), () => new Response("{}", { status: 409, headers: { "retry-after": "1" } })]) {
    const clock = new FakeClock();
    const transport = new FakeTransport(answer);
    await expect(clientOver(transport, clock).request("GET", "/api/v1/nodes/a")).rejects.toThrow("GET /api/v1/nodes/a");
    expect(transport.requests.length).toBe(1);
  }
});

test("after 10 retries the last 429 is the answer: an ApiError TooManyRequests", async () => {
  const clock = new FakeClock();
  const transport = new FakeTransport(() => new Response("{}", { status: 429, headers: { "retry-after": "1" } }));
  const got = clientOver(transport, clock).request("GET", "/api/v1/nodes/a");
  await runClock(clock, got, 30);
  await expect(got).rejects.toMatchObject({ reason: "TooManyRequests", status: 429 });
  expect(transport.requests.length).toBe(1 + MAX_RETRIES);
});

test("a caller that gives up while waiting to retry gets an error at once, and nothing more is sent", async () => {
  const clock = new FakeClock();
  const transport = new FakeTransport(() => new Response("{}", { status: 429, headers: { "retry-after": "60" } }));
  const abort = new AbortController();
  const got = clientOver(transport, clock).request("GET", "/api/v1/nodes/a", { signal: abort.signal });
  await Bun.sleep(0);
  abort.abort(new Error("stopping"));
  await expect(got).rejects.toThrow("canceled while waiting 60 s to retry after 429: stopping");
  expect(transport.requests.length).toBe(1);
});

test("a GET whose connection ended under it is sent again a second later, as client-go's; a write, or a refused connection, is not", async () => {
  const clock = new FakeClock();
  const start = clock.now();
  let failures = 2;
  const sentAt: string[] = [];
  const transport = new FakeTransport((req) => {
    sentAt.push(`${req.method} ${clock.now() - start}`);
    if (req.path.includes("refused")) throw new TransportError("Connect", "https://api", "connect ECONNREFUSED", "ECONNREFUSED");
    if (failures-- > 0) throw new TransportError("Closed", "https://api", "the connection ended before the answer did (code 0)");
    return Response.json({ kind: "Pod" });
  });
  const client = clientOver(transport, clock);
  const got = client.request("GET", "/api/v1/namespaces/a/pods/p");
  await runClock(clock, got, 10);
  expect(await got).toEqual({ kind: "Pod" });
  expect(sentAt).toEqual(["GET 0", "GET 1000", "GET 2000"]);

  failures = 1;
  await expect(client.request("PATCH", "/api/v1/namespaces/a/pods/p/status", { body: {} })).rejects.toThrow("Unreachable");
  await expect(client.request("GET", "/api/v1/nodes/refused")).rejects.toThrow("ECONNREFUSED");
  // Each sent once, with no wait.
  expect(sentAt.slice(3).map((s) => s.split(" ")[0])).toEqual(["PATCH", "GET"]);
});

test("a GET whose connection ended while its answer's body was read is sent again too; a write's is an ApiError naming it", async () => {
  const clock = new FakeClock();
  let cut = 1;
  const cutBody = () =>
    new Response(
      new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode('{"kind":'));
          c.error(new TransportError("Closed", "https://api", "the connection ended before the answer did (code 0)"));
        },
      }),
      { headers: { "content-type": "application/json" } },
    );
  const transport = new FakeTransport(() => (cut-- > 0 ? cutBody() : Response.json({ kind: "Pod" })));
  const client = clientOver(transport, clock);
  const got = client.request("GET", "/api/v1/namespaces/a/pods/p");
  await runClock(clock, got, 10);
  expect(await got).toEqual({ kind: "Pod" });
  expect(transport.requests.map((r) => r.method)).toEqual(["GET", "GET"]);
  cut = 1;
  const bytes = client.requestBytes("GET", "/api/v1/namespaces/a/pods/p", { accept: "application/vnd.kubernetes.protobuf", contentType: "application/vnd.kubernetes.protobuf" });
  await runClock(clock, bytes, 10);
  expect(new TextDecoder().decode((await bytes).bytes)).toBe('{"kind":"Pod"}');
  cut = 1;
  await expect(client.request("PATCH", "/api/v1/namespaces/a/pods/p/status", { body: {} })).rejects.toMatchObject({
    reason: "Unreachable",
    message: expect.stringContaining("PATCH /api/v1/namespaces/a/pods/p/status"),
  });
  expect(transport.requests.map((r) => r.method)).toEqual(["GET", "GET", "GET", "GET", "PATCH"]);
});

test("at --v=6 each request is logged with its answer and how long it waited for the rate limit, as client-go's round tripper", async () => {
  const { logger, lines } = memoryLogger(6);
  const client = createRestClient({
    credentials: { server: "https://api", headers: {}, insecureSkipVerify: false },
    qps: 0,
    burst: 0,
    clock: realClock,
    logger,
    userAgent: "ua",
    transport: new FakeTransport(() => Response.json({}, { status: 201 })),
  });
  await client.request("POST", "/api/v1/namespaces/a/events", { body: {} });
  expect(lines.at(-1)).toMatch(/"API request" verb=POST path=\/api\/v1\/namespaces\/a\/events status=201 throttledMs=0 ms=\d+$/);
});

test("a client made withLimits with its own timeoutMs gives up after it, while the main client keeps its longer one (upstream's heartbeat client)", async () => {
  // A server that never answers: each request ends only when its deadline aborts it.
  const hanging = {
    send: (req: { signal: AbortSignal }) => new Promise<Response>((_, reject) => req.signal.addEventListener("abort", () => reject(req.signal.reason))),
    close() {},
  };
  const main = createRestClient({
    credentials: { server: "https://api", headers: {}, insecureSkipVerify: false },
    qps: 0,
    burst: 0,
    clock: realClock,
    logger: createLogger({ verbosity: 0 }),
    userAgent: "ua",
    timeoutMs: 5_000,
    transport: hanging,
  });
  const heartbeat = main.withLimits({ qps: -1, burst: 0, timeoutMs: 50 });
  let mainEnded = false;
  const mainCall = main.request("GET", "/api/v1/nodes/n").catch(() => (mainEnded = true));
  const began = performance.now();
  const failure = await heartbeat.request("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n", { body: {} }).catch((e: unknown) => e);
  expect(failure).toMatchObject({ name: "ApiError", reason: "Timeout" });
  expect(performance.now() - began).toBeLessThan(2_000);
  expect(mainEnded).toBe(false);
  main.close();
  void mainCall;
});
