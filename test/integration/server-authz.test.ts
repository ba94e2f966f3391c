// Authentication and authorization over every endpoint of the kubelet API
// (10250), on a real agent in cluster mode (x509 client certificates from the
// cluster CA, Webhook authorization through SubjectAccessReview to a real
// API server), table-driven: for each endpoint, no certificate and a
// certificate from another CA are 401, a user the cluster knows but without
// RBAC rights is 403 with upstream's message, and the API server's kubelet
// client identity (system:masters) gets the endpoint's real answer. The
// agent serves TLS 1.3 only (tlsMinVersion), so a TLS 1.2 client is refused.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync } from "node:fs";
import { connect as tlsConnect } from "node:tls";
import { join } from "node:path";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { issueCertificate, openssl } from "../harness/pki.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "authz-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let kubeletPort: number;
let pki: string;

type Who = "none" | "foreign" | "nobody" | "apiserver-kubelet-client";

const credentials = (who: Who) => (who === "none" ? {} : { cert: readFileSync(join(pki, `${who}.crt`)), key: readFileSync(join(pki, `${who}.key`)) });

/**
 * One request over TLS as `who`: the status and body. A `101` is answered
 * with the status alone (the connection then belongs to the runtime's
 * streaming server, and is closed).
 */
async function request(method: string, path: string, who: Who, upgrade: boolean): Promise<{ status: number; body: string }> {
  // The runtime's streaming server refuses (403) a handshake without a protocol it speaks.
  const protocol = path.startsWith("/portForward/") ? "portforward.k8s.io" : "v4.channel.k8s.io";
  const socket = tlsConnect({ host: "127.0.0.1", port: kubeletPort, rejectUnauthorized: false, ...credentials(who) });
  await new Promise<void>((res, rej) => socket.once("secureConnect", res).once("error", rej));
  const upgradeHeaders = upgrade ? `Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: ${protocol}\r\n` : "Connection: close\r\n";
  socket.write(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${upgradeHeaders}Content-Length: 0\r\n\r\n`);
  let data = "";
  for await (const chunk of socket) {
    data += chunk.toString();
    if (data.startsWith("HTTP/1.1 101 ") && data.includes("\r\n\r\n")) {
      socket.destroy();
      return { status: 101, body: "" };
    }
  }
  const at = data.indexOf("\r\n\r\n");
  const head = data.slice(0, at);
  let body = data.slice(at + 4);
  // Chunked bodies (Node's server for streamed answers): enough to read the text of an error.
  if (/\r\ntransfer-encoding: chunked/i.test(head)) {
    let out = "";
    for (let rest = body; ; ) {
      const nl = rest.indexOf("\r\n");
      const size = Number.parseInt(rest.slice(0, nl), 16);
      if (!size) break;
      out += rest.slice(nl + 2, nl + 2 + size);
      rest = rest.slice(nl + 2 + size + 2);
    }
    body = out;
  }
  return { status: Number(head.split(" ")[1]), body };
}

interface Endpoint {
  method: "GET" | "POST";
  path: string;
  upgrade?: boolean;
  /** What the nobody user is refused with: upstream's verb and subresources tried. */
  verb: string;
  subresources: string[];
  /** The answer the API server's kubelet client gets. */
  allowed: number;
}

const ENDPOINTS: Endpoint[] = [
  { method: "GET", path: "/pods", verb: "get", subresources: ["pods", "proxy"], allowed: 200 },
  { method: "GET", path: "/runningpods/", verb: "get", subresources: ["pods", "proxy"], allowed: 200 },
  { method: "GET", path: "/stats/summary", verb: "get", subresources: ["stats"], allowed: 200 },
  { method: "GET", path: "/metrics", verb: "get", subresources: ["metrics"], allowed: 200 },
  { method: "GET", path: "/metrics/resource", verb: "get", subresources: ["metrics"], allowed: 200 },
  { method: "GET", path: "/metrics/probes", verb: "get", subresources: ["metrics"], allowed: 200 },
  { method: "GET", path: "/spec/", verb: "get", subresources: ["spec"], allowed: 200 },
  { method: "GET", path: "/logs/", verb: "get", subresources: ["log"], allowed: 200 },
  { method: "GET", path: "/configz", verb: "get", subresources: ["configz", "proxy"], allowed: 200 },
  { method: "GET", path: "/healthz", verb: "get", subresources: ["healthz", "proxy"], allowed: 200 },
  { method: "GET", path: "/containerLogs/default/shell/main", verb: "get", subresources: ["proxy"], allowed: 200 },
  { method: "POST", path: "/run/default/shell/main?cmd=echo%20ran", verb: "create", subresources: ["proxy"], allowed: 200 },
  { method: "POST", path: "/exec/default/shell/main?command=true&output=1", upgrade: true, verb: "create", subresources: ["proxy"], allowed: 101 },
  { method: "POST", path: "/attach/default/shell/main?output=1", upgrade: true, verb: "create", subresources: ["proxy"], allowed: 101 },
  { method: "POST", path: "/portForward/default/shell", upgrade: true, verb: "create", subresources: ["proxy"], allowed: 101 },
];

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "authz" }), startControlPlane({ name: "authz" })]);
  pki = join(cp.dir, "pki");
  // A user the cluster knows but who has no RBAC rights.
  issueCertificate({ caDir: pki, outDir: pki, name: "nobody", subject: "/CN=nobody", usage: "clientAuth" });
  // The same name as a real identity, from a CA the agent does not trust.
  const foreignCA = join(cp.dir, "foreign-ca");
  mkdirSync(foreignCA, { recursive: true });
  openssl(
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    join(foreignCA, "ca.key"),
    "-subj",
    "/CN=foreign-ca",
    "-days",
    "2",
    "-out",
    join(foreignCA, "ca.crt"),
  );
  issueCertificate({ caDir: foreignCA, outDir: pki, name: "foreign", subject: "/CN=kube-apiserver-kubelet-client", usage: "clientAuth" });
  kubeletPort = await freePort();
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, "--node-ip=127.0.0.1"],
    extraConfig: {
      port: kubeletPort,
      // Every request below is TLS 1.3; one test checks a TLS 1.2 client is refused.
      tlsMinVersion: "VersionTLS13",
      authentication: { x509: { clientCAFile: join(pki, "ca.crt") }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
    },
  });
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "shell", namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sh", "-c", "echo started; exec sleep 3600"] }],
    },
  };
  const r = await cp.kubectl(["apply", "-f", "-"], { stdin: JSON.stringify(pod) });
  if (r.code !== 0) throw new Error(`kubectl apply: ${r.stderr}`);
  await eventually(
    "shell Running",
    async () => {
      const p = await cp.kubectl(["get", "pod", "shell", "-o", "json"]);
      return p.code === 0 && JSON.parse(p.stdout).status?.phase === "Running";
    },
    90_000,
  );
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

const label = (e: Endpoint) => `${e.method} ${e.path.split("?")[0]}${e.upgrade ? " (upgrade)" : ""}`;

describe("authentication and authorization on every kubelet API endpoint", () => {
  test.each(ENDPOINTS.map((e) => [label(e), e] as const))(
    "%s: 401 without a certificate and with another CA's; 403 for a user without rights; served to the API server's kubelet client",
    async (_, e) => {
      const upgrade = e.upgrade ?? false;
      expect(await request(e.method, e.path, "none", upgrade)).toEqual({ status: 401, body: "Unauthorized" });
      expect(await request(e.method, e.path, "foreign", upgrade)).toEqual({ status: 401, body: "Unauthorized" });
      expect(await request(e.method, e.path, "nobody", upgrade)).toEqual({
        status: 403,
        body: `Forbidden (user=nobody, verb=${e.verb}, resource=nodes, subresource(s)=[${e.subresources.join(" ")}])\n`,
      });
      const served = await request(e.method, e.path, "apiserver-kubelet-client", upgrade);
      expect({ path: e.path, status: served.status }).toEqual({ path: e.path, status: e.allowed });
    },
    30_000,
  );

  test("tlsMinVersion VersionTLS13: a TLS 1.2 client is refused in the handshake", async () => {
    const refused = await new Promise<string>((resolve) => {
      const s = tlsConnect({ host: "127.0.0.1", port: kubeletPort, rejectUnauthorized: false, maxVersion: "TLSv1.2", ...credentials("apiserver-kubelet-client") });
      s.once("secureConnect", () => {
        resolve(`connected with ${s.getProtocol()}`);
        s.destroy();
      });
      s.once("error", (err: Error) => resolve(err.message));
    });
    expect(refused).toMatch(/protocol version|PROTOCOL_VERSION/i);
  });

  test("the allowed answers are the endpoints' own: pods listed, the command's output, the container's log", async () => {
    const who = "apiserver-kubelet-client";
    const pods = JSON.parse((await request("GET", "/pods", who, false)).body);
    expect(pods.items.map((p: any) => p.metadata.name)).toContain("shell");
    expect((await request("POST", "/run/default/shell/main?cmd=echo%20ran", who, false)).body).toBe("ran\n");
    expect((await request("GET", "/containerLogs/default/shell/main", who, false)).body).toBe("started\n");
    // Stats are collected every 10 s: the pod appears in the resource metrics within one period.
    const resource = await eventually(
      "shell in /metrics/resource",
      async () => {
        const body = (await request("GET", "/metrics/resource", who, false)).body;
        return body.includes('container_cpu_usage_seconds_total{container="main",namespace="default",pod="shell"}') ? body : undefined;
      },
      30_000,
      1000,
    );
    expect(resource).toContain('pod_memory_working_set_bytes{namespace="default",pod="shell"}');
  }, 60_000);
});
