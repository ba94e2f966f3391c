// kubectl exec, attach and port-forward against a real control plane and a
// real containerd: kubectl talks to the API server, which connects to the
// agent's 10250 with its kubelet client certificate (SPDY); the agent
// authenticates, authorizes (SubjectAccessReview), asks containerd for a
// streaming URL and proxies the connection to it. Direct requests check
// that nothing is proxied without authentication and authorization.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { connect as tlsConnect } from "node:tls";
import { join } from "node:path";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { issueCertificate } from "../harness/pki.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "stream-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let kubeletPort: number;
let pki: string;

const { tryJson, apply: applyObjects } = adminKubectl(() => cp);
const apply = (_name: string, obj: unknown) => applyObjects(obj);
const pod = (name: string, container: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", ...container }], ...extra },
});
const running = (name: string) => eventually(`${name} Running`, async () => (await tryJson("pod", name))?.status?.phase === "Running", 60_000);

/** Runs a command; stdin as given (or none), collects everything. */
async function run(argv: string[], stdin?: string, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(argv, { stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin), stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code, stdout, stderr };
}
const kubectlArgv = (...args: string[]) => [join(cp.binDir, "kubectl"), "--kubeconfig", cp.adminKubeconfig, ...args];
const shellQuote = (args: string[]) => args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ");

/** A raw upgrade request to the agent's 10250 over TLS; the status line and body of its answer. */
async function rawUpgrade(path: string, who?: string): Promise<{ status: number; body: string }> {
  const socket = tlsConnect({
    host: "127.0.0.1",
    port: kubeletPort,
    rejectUnauthorized: false,
    ...(who ? { cert: readFileSync(join(pki, `${who}.crt`)), key: readFileSync(join(pki, `${who}.key`)) } : {}),
  });
  await new Promise<void>((res, rej) => socket.once("secureConnect", res).once("error", rej));
  socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n`);
  let data = "";
  for await (const chunk of socket) data += chunk.toString();
  const [head, body = ""] = data.split("\r\n\r\n");
  return { status: Number(head!.split(" ")[1]), body };
}

/** A plain GET to the agent's 10250 as `who`. */
async function rawGet(path: string, who: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`https://127.0.0.1:${kubeletPort}${path}`, {
    tls: { rejectUnauthorized: false, cert: readFileSync(join(pki, `${who}.crt`), "utf8"), key: readFileSync(join(pki, `${who}.key`), "utf8") },
  } as RequestInit);
  return { status: res.status, body: await res.text() };
}

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "streaming" }), startControlPlane({ name: "streaming" })]);
  const kubeconfig = await cp.nodeKubeconfig(NODE);
  pki = join(cp.dir, "pki");
  // A user the cluster knows but who has no RBAC rights (so no nodes/proxy).
  issueCertificate({ caDir: pki, outDir: pki, name: "nobody", subject: "/CN=nobody", usage: "clientAuth" });
  kubeletPort = await freePort();
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${kubeconfig}`, "--node-ip=127.0.0.1"],
    extraConfig: {
      // No tlsCertFile/tlsPrivateKeyFile: the agent serves a self-signed certificate from --cert-dir
      // (the API server does not verify kubelet serving certificates without --kubelet-certificate-authority).
      port: kubeletPort,
      // Short, so that the idle test below is quick; every other stream here is busy well within it.
      streamingConnectionIdleTimeout: "5s",
      authentication: { x509: { clientCAFile: join(pki, "ca.crt") }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
    },
  });
  await eventually("node registered", async () => (await tryJson("node", NODE)) !== undefined, 60_000);
  await Promise.all([
    apply("shell", pod("shell", { command: ["sleep", "3600"] })),
    apply("reader", pod("reader", { command: ["sh", "-c", "while read line; do echo got $line; done; echo bye"], stdin: true, stdinOnce: true }, { restartPolicy: "Never" })),
    apply("console", pod("console", { command: ["sh"], stdin: true, tty: true }, { restartPolicy: "Never" })),
    apply("web", pod("web", { command: ["sh", "-c", "echo hello-forward > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"] })),
  ]);
  await Promise.all([running("shell"), running("reader"), running("console"), running("web")]);
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("kubectl exec, attach and port-forward through the API server", () => {
  test("kubectl exec -i passes stdin through: echo hi | kubectl exec -i shell -- cat", async () => {
    const r = await run(kubectlArgv("exec", "-i", "shell", "--", "cat"), "hi\nthere\n");
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("hi\nthere\n");
    expect(r.code).toBe(0);
  }, 30_000);

  test("kubectl exec propagates the command's exit code", async () => {
    const r = await run(kubectlArgv("exec", "shell", "--", "sh", "-c", "echo out; echo err >&2; exit 3"));
    expect(r.stdout).toBe("out\n");
    expect(r.stderr).toContain("err\n");
    expect(r.code).toBe(3);
  }, 30_000);

  test("kubectl exec -i -t gets a terminal in the container (under script(1) for a local pty)", async () => {
    const cmd = shellQuote(kubectlArgv("exec", "-i", "-t", "shell", "--", "sh", "-c", "tty; stty size; echo tty-ok"));
    const r = await run(["script", "-qec", cmd, "/dev/null"], undefined, { COLUMNS: "100", LINES: "30" });
    expect(r.stdout).toContain("/dev/pts/");
    expect(r.stdout).toContain("tty-ok");
    expect(r.code).toBe(0);
  }, 30_000);

  test("kubectl attach -i reaches the container's stdin and stdout", async () => {
    const r = await run(kubectlArgv("attach", "-i", "reader", "-c", "main"), "alpha\nbeta\n");
    expect(r.stdout).toContain("got alpha\ngot beta\n");
    expect(r.code).toBe(0);
  }, 30_000);

  test("kubectl attach -i -t to a container with a tty (keystrokes through script(1)'s pty)", async () => {
    const cmd = shellQuote(kubectlArgv("attach", "-i", "-t", "console", "-c", "main"));
    const r = await run(["script", "-qec", cmd, "/dev/null"], "echo attached-$((40+2))\nexit\n");
    expect(r.stdout).toContain("attached-42");
    await eventually("console exited after `exit`", async () => (await tryJson("pod", "console"))?.status?.phase === "Succeeded", 20_000);
  }, 30_000);

  test("kubectl port-forward reaches httpd in the pod", async () => {
    const local = await freePort();
    const proc = Bun.spawn(kubectlArgv("port-forward", "pod/web", `${local}:8080`), { stdout: "pipe", stderr: "pipe" });
    try {
      const body = await eventually(
        "forwarded port answers",
        async () => {
          const res = await fetch(`http://127.0.0.1:${local}/index.html`);
          return res.ok ? res.text() : undefined;
        },
        20_000,
      );
      expect(body).toBe("hello-forward\n");
      // A second connection over the same forward works too.
      expect(await (await fetch(`http://127.0.0.1:${local}/index.html`)).text()).toBe("hello-forward\n");
    } finally {
      proc.kill();
      await proc.exited;
    }
  }, 40_000);
});

describe("direct clients of 10250", () => {
  const as = (who: string) => ({ cert: readFileSync(join(pki, `${who}.crt`), "utf8"), key: readFileSync(join(pki, `${who}.key`), "utf8"), rejectUnauthorized: false });

  test("a WebSocket exec (v4.channel.k8s.io) is passed through to containerd and back", async () => {
    const url = `wss://127.0.0.1:${kubeletPort}/exec/default/shell/main?command=sh&command=-c&command=echo%20ws-hello&output=1&error=1`;
    const ws = new WebSocket(url, { protocols: ["v4.channel.k8s.io"], tls: as("apiserver-kubelet-client") } as never);
    ws.binaryType = "arraybuffer";
    const frames: { channel: number; text: string }[] = [];
    await new Promise<void>((resolve, reject) => {
      ws.onmessage = (e) => {
        const b = new Uint8Array(e.data as ArrayBuffer);
        if (b.length) frames.push({ channel: b[0]!, text: new TextDecoder().decode(b.subarray(1)) });
      };
      ws.onclose = () => resolve();
      ws.onerror = () => reject(new Error("websocket error"));
    });
    expect(ws.protocol).toBe("v4.channel.k8s.io");
    expect(
      frames
        .filter((f) => f.channel === 1)
        .map((f) => f.text)
        .join(""),
    ).toBe("ws-hello\n");
    const status = frames.find((f) => f.channel === 3 && f.text);
    expect(JSON.parse(status!.text)).toMatchObject({ status: "Success" });
  }, 30_000);

  test("a stream with no bytes either way for streamingConnectionIdleTimeout (5s) is closed", async () => {
    const url = `wss://127.0.0.1:${kubeletPort}/exec/default/shell/main?command=sleep&command=60&output=1`;
    const started = Date.now();
    const ws = new WebSocket(url, { protocols: ["v4.channel.k8s.io"], tls: as("apiserver-kubelet-client") } as never);
    await new Promise<void>((resolve) => {
      ws.onclose = () => resolve();
      ws.onerror = () => resolve();
    });
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(4_500);
    expect(elapsed).toBeLessThan(20_000);
  }, 30_000);

  test("POST /run answers the command's output", async () => {
    const res = await fetch(`https://127.0.0.1:${kubeletPort}/run/default/shell/main?cmd=echo%20run-ok`, { method: "POST", tls: as("apiserver-kubelet-client") } as RequestInit);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("run-ok\n");
    const denied = await fetch(`https://127.0.0.1:${kubeletPort}/run/default/shell/main?cmd=id`, { method: "POST", tls: as("nobody") } as RequestInit);
    expect(denied.status).toBe(403);
  });
});

describe("the upgrade path is authenticated and authorized before anything is proxied", () => {
  test("no client certificate: 401", async () => {
    const r = await rawUpgrade("/exec/default/shell/main?command=id&output=1");
    expect(r).toEqual({ status: 401, body: "Unauthorized" });
  });

  test("a user without nodes/proxy: 403 with upstream's message; so is portForward", async () => {
    expect(await rawUpgrade("/exec/default/shell/main?command=id&output=1", "nobody")).toEqual({
      status: 403,
      body: "Forbidden (user=nobody, verb=create, resource=nodes, subresource(s)=[proxy])\n",
    });
    expect((await rawUpgrade("/portForward/default/web", "nobody")).status).toBe(403);
  });

  test("the API server's identity on an unknown pod or container: 404 naming it", async () => {
    const missingPod = await rawUpgrade("/exec/default/nope/main?command=id&output=1", "apiserver-kubelet-client");
    expect(missingPod).toEqual({ status: 404, body: 'pod "default/nope" does not exist' });
    const missingContainer = await rawUpgrade("/exec/default/shell/nope?command=id&output=1", "apiserver-kubelet-client");
    expect(missingContainer).toEqual({ status: 404, body: 'container "nope" not found in pod "default/shell"' });
  });
});

describe("/configz", () => {
  // As the API server's kubelet client (the API server's nodes/proxy refuses loopback node addresses).
  test("upstream's {kubeletconfig} with the effective configuration; nodes/configz or nodes/proxy required", async () => {
    const res = await rawGet("/configz", "apiserver-kubelet-client");
    expect(res.status).toBe(200);
    const body = JSON.parse(res.body);
    expect(body.kubeletconfig).toMatchObject({
      port: kubeletPort,
      streamingConnectionIdleTimeout: "5s",
      syncFrequency: "1m0s",
      authorization: { mode: "Webhook" },
      authentication: { anonymous: { enabled: false }, webhook: { enabled: true, cacheTTL: "2m0s" } },
    });
    const denied = await rawGet("/configz", "nobody");
    expect(denied).toEqual({ status: 403, body: "Forbidden (user=nobody, verb=get, resource=nodes, subresource(s)=[configz proxy])\n" });
  });
});

describe("the self-signed serving certificate", () => {
  const served = async () => {
    const socket = tlsConnect({ host: "127.0.0.1", port: kubeletPort, rejectUnauthorized: false });
    await new Promise<void>((res, rej) => socket.once("secureConnect", res).once("error", rej));
    const fingerprint = socket.getPeerCertificate().fingerprint256;
    socket.destroy();
    return fingerprint;
  };

  test("is <cert-dir>/kubelet.crt (key 0600) with upstream's CN, and is reused after a restart", async () => {
    const certFile = join(agent.dir, "pki", "kubelet.crt");
    const cert = new X509Certificate(readFileSync(certFile));
    expect(cert.subject).toMatch(new RegExp(`^CN=${NODE}@\\d+$`));
    expect(cert.subjectAltName).toBe(`DNS:${NODE}, IP Address:127.0.0.1`);
    expect(statSync(join(agent.dir, "pki", "kubelet.key")).mode & 0o777).toBe(0o600);
    expect(await served()).toBe(cert.fingerprint256);
    await agent.kill("SIGTERM");
    agent.start();
    const again = await eventually("10250 back", () => served().catch(() => undefined), 30_000);
    expect(again).toBe(cert.fingerprint256);
    expect(readFileSync(certFile, "utf8")).toBe(cert.toString());
  }, 60_000);
});
