// The prober against a real containerd: a busybox container in a pod
// network sandbox serving `httpd -f -p 8080`, probed by exec (CRI ExecSync),
// httpGet and tcpSocket against the pod IP, through the manager on the
// real clock and through runProbe directly.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import { NamespaceMode, type CriService, type In, type PodSandboxConfig } from "../../src/cri/index.ts";
import type { Pod } from "../../src/pods/schema.ts";
import { createProbeManager, parseProbe, runProbe, type ProbeManager, type ProbeTarget } from "../../src/prober/index.ts";
import { realClock } from "../../src/util/clock.ts";
import { memoryLogger } from "../../src/util/log.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let cri: CriService;
let sandboxId = "";
let containerId = "";
let podIP = "";
const name = `probe-${Date.now().toString(36)}`;

const pod = {
  metadata: { name, namespace: "probe-it", uid: `uid-${name}` },
  spec: {
    containers: [
      {
        name: "web",
        image: "busybox",
        ports: [{ name: "http", containerPort: 8080 }],
        readinessProbe: { exec: { command: ["cat", "/tmp/ok"] }, periodSeconds: 1, timeoutSeconds: 5 },
        livenessProbe: { httpGet: { port: "http", path: "/index.html" }, periodSeconds: 1, failureThreshold: 2, terminationGracePeriodSeconds: 3 },
      },
    ],
  },
} as unknown as Pod;

async function until(what: string, fn: () => boolean, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

async function sh(script: string): Promise<void> {
  const r = await cri.execSync(containerId, ["sh", "-c", script], 10);
  if (r.exitCode !== 0) throw new Error(`${script}: exit ${r.exitCode}: ${new TextDecoder().decode(r.stderr)}`);
}

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "prober" });
  cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 20_000, logger: memoryLogger().logger });
  const logDirectory = join(ctd.dir, "pod-logs", name);
  mkdirSync(logDirectory, { recursive: true });
  const config: In<PodSandboxConfig> = {
    metadata: { name, namespace: "probe-it", uid: `uid-${name}`, attempt: 0 },
    hostname: name,
    logDirectory,
    linux: {
      cgroupParent: `${ctd.cgroupParent}/${name}`,
      securityContext: { namespaceOptions: { network: NamespaceMode.POD, pid: NamespaceMode.CONTAINER, ipc: NamespaceMode.POD } },
    },
  };
  sandboxId = await cri.runPodSandbox(config);
  podIP = (await cri.podSandboxStatus(sandboxId)).status?.network?.ip ?? "";
  containerId = await cri.createContainer(
    sandboxId,
    {
      metadata: { name: "web" },
      image: { image: ctd.busyboxImage },
      command: ["sh", "-c", "mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www"],
      logPath: "web.log",
    },
    config,
  );
  await cri.startContainer(containerId);
  // httpd binds shortly after the start; wait until the port answers.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = await runProbe(spec({ tcpSocket: { port: 8080 } }), target(), { cri });
    if (r.result === "success") break;
    if (Date.now() > deadline) throw new Error(`httpd did not listen: ${r.output}`);
    await Bun.sleep(100);
  }
}, 120_000);

afterAll(async () => {
  if (sandboxId) await cri.removePodSandbox(sandboxId).catch(() => {});
  cri?.close();
  await ctd?.stop();
});

function spec(raw: unknown) {
  const p = parseProbe("readiness", { timeoutSeconds: 2, ...(raw as object) });
  if (!p.ok) throw new Error(p.error);
  return p.probe;
}

const target = (): ProbeTarget => ({ pod, container: pod.spec.containers[0]!, containerId, podIP });

describe("probes against a real container", () => {
  test("the sandbox has a pod IP", () => {
    expect(podIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  });

  test("exec: cat /tmp/ok fails, then succeeds once the file exists", async () => {
    const probe = spec({ exec: { command: ["cat", "/tmp/ok"] } });
    await sh("rm -f /tmp/ok");
    const missing = await runProbe(probe, target(), { cri });
    expect(missing.result).toBe("failure");
    expect(missing.output).toContain("/tmp/ok");
    await sh("echo yes > /tmp/ok");
    expect(await runProbe(probe, target(), { cri })).toEqual({ result: "success", output: "yes\n" });
    await sh("rm -f /tmp/ok");
  });

  test("exec: a command slower than timeoutSeconds is a failure", async () => {
    const r = await runProbe(spec({ exec: { command: ["sleep", "5"] }, timeoutSeconds: 1 }), target(), { cri });
    // containerd answers DeadlineExceeded; upstream's output is the cri-client's ErrCommandTimedOut text.
    expect(r).toEqual({ result: "failure", output: 'command timed out: "sleep 5" timed out after 1s' });
  });

  test("exec: a container the runtime does not know errors with grpc-go's status text", async () => {
    const r = await runProbe(spec({ exec: { command: ["true"] } }), { ...target(), containerId: "0".repeat(64) }, { cri });
    expect(r.result).toBe("unknown");
    expect(r.output).toStartWith("rpc error: code = NotFound desc = ");
  });

  test("httpGet on the pod IP by named port: 200, then 404 when the file is gone", async () => {
    const probe = spec({ httpGet: { port: "http", path: "/index.html" } });
    expect(await runProbe(probe, target(), { cri })).toEqual({ result: "success", output: "hello\n" });
    await sh("mv /www/index.html /www/gone.html");
    try {
      expect(await runProbe(probe, target(), { cri })).toEqual({ result: "failure", output: "HTTP probe failed with statuscode: 404" });
    } finally {
      await sh("mv /www/gone.html /www/index.html");
    }
  });

  test("tcpSocket: 8080 open, 8081 closed", async () => {
    expect((await runProbe(spec({ tcpSocket: { port: 8080 } }), target(), { cri })).result).toBe("success");
    const closed = await runProbe(spec({ tcpSocket: { port: 8081 } }), target(), { cri });
    expect(closed).toEqual({ result: "failure", output: `dial tcp ${podIP}:8081: connect: connection refused` });
  });
});

describe("the manager on the real clock", () => {
  let manager: ProbeManager;
  const kills: { name: string; probe: string; grace?: number }[] = [];

  afterAll(async () => {
    await manager?.[Symbol.asyncDispose]();
  });

  test("readiness flips with /tmp/ok; liveness failing on 404 asks for a restart once", async () => {
    await sh("rm -f /tmp/ok");
    manager = createProbeManager({
      cri,
      clock: realClock,
      random: () => 0, // probes at once: this file tests the probes, not the start jitter (manager.test.ts does)
      logger: memoryLogger().logger,
      restarts: { livenessFailed: (_uid, containerName, probe, grace) => void kills.push({ name: containerName, probe, grace }) },
    });
    const uid = pod.metadata.uid!;
    manager.addPod(pod, [{ containerName: "web", containerId, startedAt: Date.now() }], podIP);
    expect(manager.isReady(uid, "web")).toBe(false);
    await Bun.sleep(1500);
    expect(manager.isReady(uid, "web")).toBe(false);
    await sh("echo yes > /tmp/ok");
    await until("ready", () => manager.isReady(uid, "web"));
    await sh("rm /tmp/ok");
    await until("not ready", () => !manager.isReady(uid, "web"));
    expect(kills).toEqual([]);

    await sh("rm /www/index.html");
    await until("liveness failure", () => kills.length > 0);
    expect(kills).toEqual([{ name: "web", probe: "liveness", grace: 3 }]);
    await Bun.sleep(2500);
    expect(kills).toHaveLength(1);
  }, 60_000);
});
