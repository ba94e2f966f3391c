// The CRI client against a real containerd (scripts/containerd.sh through
// test/harness/containerd.ts): the shared contract, then what only a real
// runtime can show: large ExecSync answers through Bun's HTTP/2, deadlines
// against a frozen runtime, and reconnecting after containerd restarts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import { criContract } from "../../src/cri/contract.ts";
import { ContainerState, NamespaceMode, isCriError, type CriService, type In, type PodSandboxConfig } from "../../src/cri/index.ts";
import { memoryLogger } from "../../src/util/log.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

const script = resolve(import.meta.dir, "../../scripts/containerd.sh");

async function pollExited(cri: CriService, id: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if ((await cri.containerStatus(id)).status?.state === ContainerState.CONTAINER_EXITED) return;
    await Bun.sleep(50);
  }
  throw new Error(`container ${id} did not exit within ${timeoutMs} ms`);
}

/** Waits until every thread of `pid` is in state T (stopped). */
async function untilStopped(pid: number, timeoutMs = 2000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const tids = readdirSync(`/proc/${pid}/task`);
    const states = tids.map((t) => readFileSync(`/proc/${pid}/task/${t}/stat`, "utf8").replace(/^.*\) /s, "")[0]);
    if (states.every((st) => st === "T")) return;
    await Bun.sleep(5);
  }
  throw new Error(`process ${pid} did not stop within ${timeoutMs} ms`);
}

/** containerd.sh stop/start: containerd only, same socket, state and network. */
async function containerdCtl(cmd: "stop" | "start", dir: string): Promise<void> {
  const proc = Bun.spawn(["bash", script, cmd, dir], { stdout: "pipe", stderr: "pipe" });
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`containerd.sh ${cmd} exited ${code}: ${err}`);
}

let ctd: ContainerdHandle;
let cri: CriService;

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "cri" });
  cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 20_000, logger: memoryLogger().logger });
});

afterAll(async () => {
  cri?.close();
  await ctd?.stop();
});

criContract("gRPC client on containerd", async () => {
  const logDirectory = join(ctd.dir, "pod-logs");
  mkdirSync(logDirectory, { recursive: true });
  return {
    cri,
    busyboxImage: ctd.busyboxImage,
    cgroupParent: ctd.cgroupParent,
    logDirectory,
    podNetwork: true,
    containerExited: (c, id) => pollExited(c, id),
  };
});

describe("gRPC client on containerd: what only a real runtime shows", () => {
  let sandboxId: string;
  let containerId: string;

  beforeAll(async () => {
    const name = `big-exec-${Date.now().toString(36)}`;
    const config: In<PodSandboxConfig> = {
      metadata: { name, namespace: "cri-it", uid: `uid-${name}`, attempt: 0 },
      logDirectory: join(ctd.dir, "pod-logs", name),
      linux: { cgroupParent: `${ctd.cgroupParent}/${name}`, securityContext: { namespaceOptions: { network: NamespaceMode.NODE } } },
    };
    sandboxId = await cri.runPodSandbox(config);
    containerId = await cri.createContainer(
      sandboxId,
      { metadata: { name: "sleeper" }, image: { image: ctd.busyboxImage }, command: ["sleep", "3600"], logPath: "sleeper.log" },
      config,
    );
    await cri.startContainer(containerId);
  });

  afterAll(async () => {
    if (sandboxId) await cri.removePodSandbox(sandboxId).catch(() => {});
  });

  async function execBytes(n: number) {
    const r = await cri.execSync(containerId, ["sh", "-c", `head -c ${n} /dev/zero | tr '\\0' a`], 30);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.length).toBe(n);
    expect(r.stdout.every((b) => b === 97)).toBe(true);
  }

  test("ExecSync with a 70 KB answer (over one HTTP/2 window)", async () => {
    await execBytes(70_000);
  });

  test("ExecSync with a 1 MiB answer", async () => {
    await execBytes(1024 * 1024);
  });

  test("ExecSync with an 8 MiB answer fits the 16 MiB limit (grpc-js default would refuse)", async () => {
    await execBytes(8 * 1024 * 1024);
  });

  test("a frozen runtime fails the call at its deadline, not later", async () => {
    const pid = Number(readFileSync(join(ctd.dir, "containerd.pid"), "utf8").trim());
    const quick = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 500, logger: memoryLogger().logger });
    try {
      await quick.version(); // connected before the freeze
      process.kill(pid, "SIGSTOP");
      // kill() returns before every thread has stopped, and a runtime that is
      // still running for a millisecond answers (seen in 2 of 10 runs).
      await untilStopped(pid);
      const t0 = performance.now();
      const err = await quick.version().then(
        (v) => v,
        (e: unknown) => e,
      );
      const ms = performance.now() - t0;
      // The whole outcome in one assertion, so a failure shows what happened.
      expect({ kind: isCriError(err) ? err.kind : String(err), message: isCriError(err) ? err.message : "", late: ms >= 450 && ms < 1500 ? "no" : ms }).toEqual({
        kind: "DeadlineExceeded",
        message: expect.stringContaining("CRI Version: DeadlineExceeded") as unknown as string,
        late: "no",
      });
    } finally {
      process.kill(pid, "SIGCONT");
      quick.close();
    }
    expect((await cri.version()).runtimeName).toBe("containerd");
  });

  test("containerd down: calls fail Unavailable fast; back on the same socket: the next call succeeds", async () => {
    const before = (await cri.containerStatus(containerId)).status!;
    expect(before.state).toBe(ContainerState.CONTAINER_RUNNING);

    await containerdCtl("stop", ctd.dir);
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const err = await cri.version().catch((e: unknown) => e);
      expect(isCriError(err, "Unavailable")).toBe(true);
      expect(performance.now() - t0).toBeLessThan(5000);
      await Bun.sleep(300);
    }

    await containerdCtl("start", ctd.dir);
    // containerd's socket is up before its CRI plugin has restored state; until
    // then it answers "server is not initialized yet", which is Unavailable too.
    // The client redials at once, so what is left is containerd's own start-up.
    const t0 = performance.now();
    const failures: string[] = [];
    for (;;) {
      const r = await cri.version().then(
        (v) => v,
        (e: unknown) => e,
      );
      if (!isCriError(r)) {
        expect((r as { runtimeName?: string }).runtimeName).toBe("containerd");
        break;
      }
      failures.push(`${r.kind}: ${r.detail}`);
      expect(failures.filter((f) => !f.startsWith("Unavailable"))).toEqual([]);
      expect(performance.now() - t0).toBeLessThan(3000);
      await Bun.sleep(20);
    }
    // The container kept running across the restart (shims outlive containerd).
    const after = (await cri.containerStatus(containerId)).status!;
    expect(after.state).toBe(ContainerState.CONTAINER_RUNNING);
    expect(after.startedAt).toBe(before.startedAt);
  });
});
