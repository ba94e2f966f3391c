import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { createServer, type Server } from "node:net";
import { FakeCri } from "../cri/fake.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { decodeHealthRequest, encodeHealthResponse, HEALTH_CHECK_METHOD } from "./grpc.ts";
import { execProbe, grpcProbe, httpProbe, MAX_PROBE_OUTPUT, probeUserAgent, resolvePort, runProbe, tcpProbe } from "./probes.ts";
import { parseProbe } from "./schema.ts";

// Headers are copied on arrival: Bun releases a Request's headers after the response.
const seen: { headers: Headers }[] = [];
let server: ReturnType<typeof Bun.serve>;
let otherHostHits = 0;
let other: ReturnType<typeof Bun.serve>;

beforeAll(() => {
  other = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (otherHostHits++, new Response("other")) });
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      seen.push({ headers: new Headers(req.headers) });
      const u = new URL(req.url);
      if (u.pathname === "/ok") return new Response("fine");
      if (u.pathname === "/status") return new Response("x", { status: Number(u.searchParams.get("code")) });
      if (u.pathname === "/big") return new Response("a".repeat(100_000));
      if (u.pathname === "/slow") return Bun.sleep(3000).then(() => new Response("late"));
      if (u.pathname === "/hop") return new Response(null, { status: 302, headers: { location: "/ok" } });
      if (u.pathname === "/away") return new Response("moved", { status: 302, headers: { location: `http://localhost:${other.port}/` } });
      if (u.pathname === "/loop") return new Response(null, { status: 302, headers: { location: "/loop" } });
      return new Response("nope", { status: 404 });
    },
  });
});

afterAll(() => {
  server.stop(true);
  other.stop(true);
});

const http = (path: string, headers: { name: string; value: string }[] = [], timeoutMs = 1000) =>
  httpProbe({ scheme: "HTTP", host: "127.0.0.1", port: server.port!, path, headers, timeoutMs });

describe("httpGet", () => {
  test("200 is success with the body as output; default headers are upstream's", async () => {
    expect(await http("/ok")).toEqual({ result: "success", output: "fine" });
    const req = seen.at(-1)!;
    expect(req.headers.get("user-agent")).toBe(probeUserAgent());
    expect(probeUserAgent()).toMatch(/^kube-probe\/\d+\.\d+$/);
    expect(req.headers.get("accept")).toBe("*/*");
  });

  test("status codes: 200-399 success, others failure without the body", async () => {
    for (const code of [200, 204, 299, 304]) expect((await http(`/status?code=${code}`)).result).toBe("success");
    for (const code of [400, 404, 500, 503]) {
      expect(await http(`/status?code=${code}`)).toEqual({ result: "failure", output: `HTTP probe failed with statuscode: ${code}` });
    }
  });

  test("probe headers are sent, override User-Agent and set Host", async () => {
    await http("/ok", [
      { name: "X-Custom", value: "a" },
      { name: "User-Agent", value: "mine" },
      { name: "Host", value: "example.test" },
    ]);
    const req = seen.at(-1)!;
    expect(req.headers.get("x-custom")).toBe("a");
    expect(req.headers.get("user-agent")).toBe("mine");
    expect(req.headers.get("host")).toBe("example.test");
  });

  test("same-host redirects are followed; another host's is not (success with a warning)", async () => {
    expect(await http("/hop")).toEqual({ result: "success", output: "fine" });
    const r = await http("/away");
    expect(r).toEqual({ result: "success", warning: true, output: "Probe terminated redirects, Response body: moved" });
    expect(otherHostHits).toBe(0);
    expect((await http("/loop")).result).toBe("failure");
  });

  test("the body is read up to 10 KiB", async () => {
    const r = await http("/big");
    expect(r.result).toBe("success");
    expect(r.output.length).toBe(MAX_PROBE_OUTPUT);
  });

  test("timeout and connection refused are failures", async () => {
    const slow = await http("/slow", [], 200);
    expect(slow.result).toBe("failure");
    expect(slow.output).toContain("Client.Timeout");
    const refused = await httpProbe({ scheme: "HTTP", host: "127.0.0.1", port: await closedPort(), path: "/", headers: [], timeoutMs: 1000 });
    expect(refused.result).toBe("failure");
  });

  test("a body whose read fails (the timeout, or cut short) errors with a Failure, as upstream's DoHTTPProbe (probe/http/http.go:100-108)", async () => {
    // Headers and part of a 100-byte body; then nothing (`stall`), or the connection closed (`cut`).
    const partialBody = (then: "stall" | "cut") =>
      createServer((socket) =>
        socket.once("data", () => {
          socket.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
          if (then === "cut") setTimeout(() => socket.destroy(), 50);
        }),
      );
    const probeOf = async (then: "stall" | "cut") => {
      const server = partialBody(then);
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      try {
        return await httpProbe({ scheme: "HTTP", host: "127.0.0.1", port: (server.address() as { port: number }).port, path: "/", headers: [], timeoutMs: 300 });
      } finally {
        server.close();
      }
    };
    expect(await probeOf("stall")).toEqual({ result: "failure", errored: true, output: "context deadline exceeded (Client.Timeout or context cancellation while reading body)" });
    expect(await probeOf("cut")).toEqual({ result: "failure", errored: true, output: "unexpected EOF" });
  });

  test("named port through runProbe; an unknown name is unknown (errored), not failure", async () => {
    const container = { name: "c", image: "i", ports: [{ name: "web", containerPort: server.port! }] } as ContainerSpec;
    const pod = { metadata: { name: "p", uid: "u" }, spec: { containers: [container] } } as Pod;
    const spec = parseProbe("readiness", { httpGet: { port: "web", path: "/ok" } });
    if (!spec.ok) throw new Error(spec.error);
    const cri = new FakeCri({ clock: new FakeClock() });
    expect(await runProbe(spec.probe, { pod, container, containerId: "x", podIP: "127.0.0.1" }, { cri })).toEqual({ result: "success", output: "fine" });
    const bad = parseProbe("readiness", { httpGet: { port: "nope" } });
    if (!bad.ok) throw new Error(bad.error);
    const r = await runProbe(bad.probe, { pod, container, containerId: "x", podIP: "127.0.0.1" }, { cri });
    expect(r.result).toBe("unknown");
    expect(r.output).toBe('strconv.Atoi: parsing "nope": invalid syntax');
    expect(() => resolvePort("web", container)).not.toThrow();
  });

  test("a port name no port has is tried as a number, and a number must be a port (upstream probe.ResolveContainerPort)", () => {
    const container = { name: "c", image: "i", ports: [{ name: "web", containerPort: 8080 }] } as ContainerSpec;
    expect(resolvePort("9090", container)).toBe(9090);
    expect(() => resolvePort("70000", container)).toThrow("invalid port number: 70000");
    expect(() => resolvePort(0, container)).toThrow("invalid port number: 0");
  });

  test("an empty Accept header sends none (upstream request.go:79-81); a set one is kept", async () => {
    await http("/ok", [{ name: "accept", value: "" }]);
    expect(seen.at(-1)!.headers.has("accept")).toBe(false);
    await http("/ok", [{ name: "Accept", value: "text/plain" }]);
    expect(seen.at(-1)!.headers.get("accept")).toBe("text/plain");
  });

  test("connection errors are in Go's words, as upstream's events show them", async () => {
    const port = await closedPort();
    expect(await httpProbe({ scheme: "HTTP", host: "127.0.0.1", port, path: "/healthz", headers: [], timeoutMs: 1000 })).toEqual({
      result: "failure",
      output: `Get "http://127.0.0.1:${port}/healthz": dial tcp 127.0.0.1:${port}: connect: connection refused`,
    });
    // A server that closes the connection without an answer: Go's transport says EOF.
    const mute = createServer((socket) => socket.once("data", () => socket.destroy()));
    await new Promise<void>((r) => mute.listen(0, "127.0.0.1", r));
    const mutePort = (mute.address() as { port: number }).port;
    try {
      expect(await httpProbe({ scheme: "HTTP", host: "127.0.0.1", port: mutePort, path: "/", headers: [], timeoutMs: 1000 })).toEqual({
        result: "failure",
        output: `Get "http://127.0.0.1:${mutePort}/": EOF`,
      });
    } finally {
      mute.close();
    }
  });
});

async function closedPort(): Promise<number> {
  const s: Server = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe("tcpSocket", () => {
  test("open port is success, closed port failure", async () => {
    expect(await tcpProbe({ host: "127.0.0.1", port: server.port!, timeoutMs: 1000 })).toEqual({ result: "success", output: "" });
    const port = await closedPort();
    const r = await tcpProbe({ host: "127.0.0.1", port, timeoutMs: 1000 });
    expect(r).toEqual({ result: "failure", output: `dial tcp 127.0.0.1:${port}: connect: connection refused` });
  });

  test("a stall of the agent's event loop past the timeout does not fail a listening port (the tcp:8080 liveness restart)", async () => {
    // The kernel completes the handshake while the loop is blocked; before the deadline counted
    // awake time, the timer fired first in about half of these runs ("i/o timeout").
    const results: string[] = [];
    for (let i = 0; i < 6; i++) {
      const probe = tcpProbe({ host: "127.0.0.1", port: server.port!, timeoutMs: 200 });
      const until = performance.now() + 300;
      while (performance.now() < until) {} // the stall
      results.push((await probe).result);
    }
    expect(results).toEqual(Array(6).fill("success"));
  });
});

describe("exec", () => {
  async function running(cri: FakeCri): Promise<string> {
    const config = { metadata: { name: "p", namespace: "n", uid: "u", attempt: 0 } };
    const sandbox = await cri.runPodSandbox(config);
    const id = await cri.createContainer(sandbox, { metadata: { name: "c" }, image: { image: "busybox" } }, config);
    await cri.startContainer(id);
    return id;
  }

  test("exit 0 is success, non-zero failure with output; a timeout is failure; other CRI errors unknown", async () => {
    const cri = new FakeCri({ clock: new FakeClock(), images: ["busybox"] });
    const id = await running(cri);
    cri.setExecHandler((_id, cmd) => (cmd[1] === "/tmp/ok" ? { stdout: "yes\n" } : { stderr: "no such file\n", exitCode: 1 }));
    expect(await execProbe({ cri, containerId: id, command: ["cat", "/tmp/ok"], timeoutSeconds: 1 })).toEqual({ result: "success", output: "yes\n" });
    expect(await execProbe({ cri, containerId: id, command: ["cat", "/tmp/x"], timeoutSeconds: 1 })).toEqual({ result: "failure", output: "no such file\n" });
    // The cri-client's ErrCommandTimedOut text (remote_runtime.go:527), with Go's duration.
    cri.failNext("execSync", "DeadlineExceeded");
    expect(await execProbe({ cri, containerId: id, command: ["sleep", "9"], timeoutSeconds: 1 })).toEqual({
      result: "failure",
      output: 'command timed out: "sleep 9" timed out after 1s',
    });
    cri.failNext("execSync", "DeadlineExceeded");
    expect((await execProbe({ cri, containerId: id, command: ["sleep", "99"], timeoutSeconds: 90 })).output).toBe('command timed out: "sleep 99" timed out after 1m30s');
    // Other CRI errors: errored, with the gRPC status as grpc-go prints it.
    cri.failNext("execSync", "NotFound", "container gone");
    expect(await execProbe({ cri, containerId: id, command: ["true"], timeoutSeconds: 1 })).toEqual({
      result: "unknown",
      output: "rpc error: code = NotFound desc = container gone",
    });
  });

  test("the output is stdout then stderr, cut at 10 KiB of bytes", async () => {
    const cri = new FakeCri({ clock: new FakeClock(), images: ["busybox"] });
    const id = await running(cri);
    cri.setExecHandler(() => ({ stdout: "é".repeat(MAX_PROBE_OUTPUT), stderr: "tail", exitCode: 1 }));
    const r = await execProbe({ cri, containerId: id, command: ["x"], timeoutSeconds: 1 });
    expect(Buffer.byteLength(r.output)).toBe(MAX_PROBE_OUTPUT);
    expect(r.output).toBe("é".repeat(MAX_PROBE_OUTPUT / 2));
  });

  test("runProbe expands $(VAR) from the container's literal env", async () => {
    const cri = new FakeCri({ clock: new FakeClock(), images: ["busybox"] });
    const id = await running(cri);
    let got: string[] = [];
    cri.setExecHandler((_id, cmd) => ((got = cmd), {}));
    const container = { name: "c", image: "busybox", env: [{ name: "F", value: "/tmp/ok" }] } as ContainerSpec;
    const spec = parseProbe("liveness", { exec: { command: ["cat", "$(F)"] } });
    if (!spec.ok) throw new Error(spec.error);
    expect((await runProbe(spec.probe, { pod: {} as Pod, container, containerId: id, podIP: "" }, { cri })).result).toBe("success");
    expect(got).toEqual(["cat", "/tmp/ok"]);
  });
});

describe("grpc", () => {
  let grpcServer: grpc.Server;
  let port: number;
  const statuses: Record<string, number> = { "": 1, down: 2 };

  beforeAll(async () => {
    grpcServer = new grpc.Server();
    grpcServer.addService(
      {
        Check: {
          path: HEALTH_CHECK_METHOD,
          requestStream: false,
          responseStream: false,
          requestSerialize: (x: unknown) => Buffer.from(x as Uint8Array),
          requestDeserialize: (b: Buffer) => decodeHealthRequest(b),
          responseSerialize: (x: { status: number }) => encodeHealthResponse(x),
          responseDeserialize: (b: Buffer) => b,
        },
      },
      {
        Check: (call: grpc.ServerUnaryCall<{ service: string }, { status: number }>, cb: grpc.sendUnaryData<{ status: number }>) => {
          const s = statuses[call.request.service];
          if (s === undefined) return cb({ code: grpc.status.NOT_FOUND, details: "unknown service" });
          cb(null, { status: s });
        },
      },
    );
    port = await new Promise<number>((resolve, reject) =>
      grpcServer.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
  });

  afterAll(() => grpcServer.forceShutdown());

  test("SERVING is success; NOT_SERVING and errors are failures", async () => {
    expect(await grpcProbe({ host: "127.0.0.1", port, service: "", timeoutMs: 2000 })).toEqual({ result: "success", output: "service healthy" });
    expect(await grpcProbe({ host: "127.0.0.1", port, service: "down", timeoutMs: 2000 })).toEqual({
      result: "failure",
      output: 'service unhealthy (responded with "NOT_SERVING")',
    });
    // grpc.go:109: the status error as grpc-go prints it.
    expect(await grpcProbe({ host: "127.0.0.1", port, service: "other", timeoutMs: 2000 })).toEqual({
      result: "failure",
      output: "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service",
    });
  });

  test("a server without the health service: upstream's words, with its error: prefix", async () => {
    const bare = new grpc.Server();
    const barePort = await new Promise<number>((resolve, reject) =>
      bare.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    try {
      const r = await grpcProbe({ host: "127.0.0.1", port: barePort, service: "", timeoutMs: 2000 });
      expect(r.result).toBe("failure");
      expect(r.output).toStartWith("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ");
    } finally {
      bare.forceShutdown();
    }
  });

  test("a closed port fails within the timeout", async () => {
    const started = Date.now();
    const addr = `127.0.0.1:${await closedPort()}`;
    const r = await grpcProbe({ host: "127.0.0.1", port: Number(addr.split(":")[1]), service: "", timeoutMs: 1000 });
    // grpc.go:75: blocking dial until the deadline, Go's %v of the timeout.
    expect(r).toEqual({ result: "failure", output: `timeout: failed to connect service "${addr}" within 1s: context deadline exceeded` });
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
