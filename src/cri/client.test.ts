// The gRPC client against FakeCri served over a real unix socket
// (grpc-server.ts): the shared contract through the wire, plus what the
// client adds: status code mapping, deadlines, message size limits,
// reconnecting, and closing.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { channelOptions, createCriClient } from "./client.ts";
import { criContract } from "./contract.ts";
import { CriError, type CriErrorKind } from "./errors.ts";
import { FakeCri } from "./fake.ts";
import { serveCri, type CriGrpcServer } from "./grpc-server.ts";
import type { CriService } from "./index.ts";

const BUSYBOX = "localhost/bunlet/busybox:1.0";
const dir = mkdtempSync(join(tmpdir(), "cri-"));
let n = 0;
const sock = () => join(dir, `s${++n}.sock`);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function caught(p: Promise<unknown>): Promise<CriError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof CriError)) throw new Error(`expected a CriError, got ${String(e)}`);
  return e;
}

criContract("gRPC client ↔ FakeCri over a unix socket", async () => {
  const fake = new FakeCri({ clock: new FakeClock(), images: [BUSYBOX] });
  const server = await serveCri(fake, sock());
  const cri = createCriClient({ endpoint: server.endpoint, requestTimeoutMs: 5000, logger: memoryLogger().logger });
  return {
    cri,
    busyboxImage: BUSYBOX,
    cgroupParent: "/fake",
    logDirectory: "/fake/logs",
    podNetwork: true,
    async containerExited(_cri, id, exitCode) {
      fake.exitContainer(id, exitCode);
    },
    async teardown() {
      cri.close();
      server.kill();
    },
  };
});

describe("gRPC client", () => {
  let fake: FakeCri;
  let server: CriGrpcServer;
  let cri: CriService;
  let log: ReturnType<typeof memoryLogger>;

  beforeAll(async () => {
    fake = new FakeCri({ clock: new FakeClock(), images: [BUSYBOX] });
    server = await serveCri(fake, sock());
    log = memoryLogger(3);
    cri = createCriClient({ endpoint: server.endpoint, requestTimeoutMs: 300, logger: log.logger });
  });
  afterAll(() => {
    cri.close();
    server.kill();
  });
  afterEach(() => {
    fake.setExecHandler((_id, cmd) => (cmd[0] === "echo" ? { stdout: cmd.slice(1).join(" ") + "\n" } : {}));
  });

  async function runningContainer(): Promise<string> {
    const cfg = { metadata: { name: `p${++n}`, namespace: "t", uid: `u${n}`, attempt: 0 } };
    const sb = await cri.runPodSandbox(cfg);
    const id = await cri.createContainer(sb, { metadata: { name: "c" }, image: { image: BUSYBOX } }, cfg);
    await cri.startContainer(id);
    return id;
  }

  const kinds: [CriErrorKind, number][] = [
    ["NotFound", 5],
    ["Unavailable", 14],
    ["DeadlineExceeded", 4],
    ["InvalidArgument", 3],
    ["AlreadyExists", 6],
    ["ResourceExhausted", 8],
    ["FailedPrecondition", 9],
    ["Unimplemented", 12],
    ["Unknown", 2],
  ];
  for (const [kind, code] of kinds) {
    test(`a ${kind} status from the runtime arrives as kind ${kind}, code ${code}, with method and target`, async () => {
      fake.failNext("containerStatus", kind, `runtime says ${kind}`);
      const e = await caught(cri.containerStatus("abc123"));
      expect([e.kind, e.code, e.method, e.target, e.detail]).toEqual([kind, code, "ContainerStatus", "abc123", `runtime says ${kind}`]);
      expect(e.message).toBe(`CRI ContainerStatus abc123: ${kind}: runtime says ${kind}`);
    });
  }

  test("failures are logged with method and kind; NotFound only at high verbosity", async () => {
    log.lines.length = 0;
    fake.failNext("version", "Unavailable");
    await caught(cri.version());
    await caught(cri.containerStatus("missing"));
    expect(log.lines.some((l) => l.startsWith("W") && l.includes("method=Version") && l.includes("kind=Unavailable"))).toBe(true);
    expect(log.lines.some((l) => l.includes("method=ContainerStatus"))).toBe(false);
  });

  test("a call the runtime does not answer fails DeadlineExceeded at requestTimeoutMs", async () => {
    const release = fake.holdNext("version");
    const t0 = performance.now();
    const e = await caught(cri.version());
    const ms = performance.now() - t0;
    release();
    expect(e.kind).toBe("DeadlineExceeded");
    expect(ms).toBeGreaterThanOrEqual(280);
    expect(ms).toBeLessThan(2000); // grpc-js's deadline, not the local watchdog 2 s later (loose: the machine is shared)
  });

  test("StopContainer's deadline is the grace period plus requestTimeoutMs, as upstream", async () => {
    const id = await runningContainer();
    const release = fake.holdNext("stopContainer");
    const t0 = performance.now();
    const e = await caught(cri.stopContainer(id, 1));
    const ms = performance.now() - t0;
    release();
    expect(e.kind).toBe("DeadlineExceeded");
    expect(ms).toBeGreaterThanOrEqual(1280);
    expect(ms).toBeLessThan(3000); // before the watchdog (3.28 s)
  });

  test("PullImage has no deadline; its signal cancels it", async () => {
    const release = fake.holdNext("pullImage");
    let settled = false;
    const pull = cri.pullImage({ image: "nginx:1" }).finally(() => (settled = true));
    await Bun.sleep(700); // more than twice requestTimeoutMs
    expect(settled).toBe(false);
    release();
    expect(await pull).toMatch(/^sha256:/);

    const abort = new AbortController();
    fake.holdNext("pullImage");
    const cancelled = cri.pullImage({ image: "nginx:2" }, undefined, undefined, { signal: abort.signal });
    await Bun.sleep(20);
    abort.abort();
    // grpc-go's words for a cancelled context, which upstream's pull events carry.
    expect(await caught(cancelled)).toMatchObject({ kind: "Canceled", detail: "context canceled" });
  });

  test("a caller who gave up before the call gets Canceled, and nothing reaches the runtime", async () => {
    const id = await runningContainer();
    const before = fake.callsOf("execSync").length;
    const e = await caught(cri.execSync(id, ["echo", "hi"], 10, AbortSignal.abort()));
    expect([e.kind, e.method, e.target, e.detail]).toEqual(["Canceled", "ExecSync", id, "context canceled"]);
    expect(fake.callsOf("execSync").length).toBe(before);
  });

  test("ExecSync with a deadline: its signal cancels it at once, not at the deadline", async () => {
    const id = await runningContainer();
    const release = fake.holdNext("execSync");
    const abort = new AbortController();
    const t0 = performance.now();
    const cancelled = cri.execSync(id, ["echo", "hi"], 10, abort.signal);
    await Bun.sleep(20);
    abort.abort();
    const e = await caught(cancelled);
    release();
    expect([e.kind, e.detail]).toEqual(["Canceled", "context canceled"]);
    expect(performance.now() - t0).toBeLessThan(2000); // the deadline is 10.3 s
  });

  test("ExecSync answers of 70 KB, 1 MiB and 15 MiB arrive intact; 17 MiB is ResourceExhausted", async () => {
    const id = await runningContainer();
    fake.setExecHandler((_id, cmd) => ({ stdout: new Uint8Array(Number(cmd[0])).fill(97) }));
    for (const size of [70_000, 1024 * 1024, 15 * 1024 * 1024]) {
      const r = await cri.execSync(id, [String(size)], 10);
      expect(r.stdout.length).toBe(size);
      expect(r.stdout[size - 1]).toBe(97);
    }
    const e = await caught(cri.execSync(id, [String(17 * 1024 * 1024)], 10));
    expect(e.kind).toBe("ResourceExhausted");
  });

  test("requests over 16 MiB are refused before sending", async () => {
    const id = await runningContainer();
    const e = await caught(cri.execSync(id, ["x".repeat(17 * 1024 * 1024)], 10));
    expect(e.kind).toBe("ResourceExhausted");
  });

  test("runtime down: calls fail Unavailable fast; back on the same socket: the next call succeeds", async () => {
    const path = sock();
    let srv = await serveCri(fake, path);
    const c = createCriClient({ endpoint: path, requestTimeoutMs: 2000, logger: memoryLogger().logger });
    try {
      expect((await c.version()).runtimeName).toBe("fake");
      srv.kill();
      for (let i = 0; i < 4; i++) {
        const t0 = performance.now();
        expect((await caught(c.version())).kind).toBe("Unavailable");
        expect(performance.now() - t0).toBeLessThan(500);
        await Bun.sleep(250); // long enough for grpc-js to be in reconnect backoff
      }
      srv = await serveCri(fake, path);
      expect((await c.version()).runtimeName).toBe("fake");
    } finally {
      c.close();
      srv.kill();
    }
  });

  test("a separate image endpoint gets the image calls", async () => {
    const images = new FakeCri({ clock: new FakeClock(), images: ["localhost/only-here:1"] });
    const imageServer = await serveCri(images, sock());
    const c = createCriClient({ endpoint: server.endpoint, imageEndpoint: imageServer.endpoint, requestTimeoutMs: 2000, logger: memoryLogger().logger });
    try {
      expect((await c.listImages()).flatMap((i) => i.repoTags)).toEqual(["localhost/only-here:1"]);
      await c.version();
      expect(images.callsOf("version")).toEqual([]);
    } finally {
      c.close();
      imageServer.kill();
    }
  });

  test("close is idempotent; calls after close are Canceled without touching the network", async () => {
    const c = createCriClient({ endpoint: server.endpoint, logger: memoryLogger().logger });
    await c.version();
    c.close();
    c.close();
    const e = await caught(c.version());
    expect(e.kind).toBe("Canceled");
    const it = c.containerEvents(new AbortController().signal)[Symbol.asyncIterator]();
    expect((await caught(it.next())).kind).toBe("Canceled");
  });

  test("a bare socket path works and is logged as deprecated", async () => {
    const l = memoryLogger();
    const c = createCriClient({ endpoint: server.socketPath, logger: l.logger });
    try {
      expect((await c.version()).runtimeApiVersion).toBe("v1");
      expect(l.lines.some((x) => x.startsWith("W") && x.includes("deprecated"))).toBe(true);
    } finally {
      c.close();
    }
  });

  test("an aborted event stream ends quietly, and leaves no stream open on the server", async () => {
    const abort = new AbortController();
    const got: string[] = [];
    const done = (async () => {
      for await (const ev of cri.containerEvents(abort.signal)) got.push(ev.containerId);
    })();
    await Bun.sleep(50);
    const id = await runningContainer();
    for (let i = 0; i < 50 && !got.includes(id); i++) await Bun.sleep(10);
    abort.abort();
    await done;
    expect(got).toContain(id);
  });

  test("channel options carry the 16 MiB limits and upstream's backoff", () => {
    expect(channelOptions(16 * 1024 * 1024)).toEqual({
      "grpc.max_receive_message_length": 16777216,
      "grpc.max_send_message_length": 16777216,
      "grpc.initial_reconnect_backoff_ms": 100,
      "grpc.max_reconnect_backoff_ms": 3000,
    });
  });
});
