// The authenticated kubelet API (10250) over real TLS: a private CA, a
// server certificate and client certificates made with openssl, serveTls on
// 127.0.0.1:0, and Bun's fetch with `tls: { ca, cert, key }` as the client.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { authentication, type KubeletEnv } from "../../src/server/authn.ts";
import { alwaysAllow, authorization, webhookAuthorizer } from "../../src/server/authz.ts";
import { healthzApp } from "../../src/server/healthz.ts";
import { kubeletApi } from "../../src/server/kubelet-api.ts";
import { serveTls, type TlsServerHandle } from "../../src/server/tls.ts";
import type { Pod } from "../../src/pods/schema.ts";
import { memoryLogger } from "../../src/util/log.ts";

let dir: string;
const pem: Record<string, string> = {};
const handles: TlsServerHandle[] = [];

function openssl(...args: string[]) {
  execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
}

/** A CA, and leaf certificates it signs: `<name>.crt` / `<name>.key`. */
function makeCA(name: string) {
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.crt`, "-days", "1", "-subj", `/CN=${name}`);
}
function makeLeaf(name: string, ca: string, subj: string, ext: string) {
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subj);
  openssl("x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.crt`, "-CAkey", `${ca}.key`, "-CAcreateserial", "-out", `${name}.crt`, "-days", "1", "-extfile", `${name}.ext`);
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kubelet-server-"));
  makeCA("ca");
  makeCA("otherca");
  makeLeaf("server", "ca", "/CN=n1", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  makeLeaf("node", "ca", "/O=system:nodes/CN=system:node:n1", "extendedKeyUsage=clientAuth\n");
  makeLeaf("admin", "ca", "/O=system:masters/O=ops/CN=admin", "extendedKeyUsage=clientAuth\n");
  makeLeaf("stranger", "otherca", "/O=system:nodes/CN=system:node:n1", "extendedKeyUsage=clientAuth\n");
  for (const n of ["ca", "server", "node", "admin", "stranger"]) {
    pem[`${n}.crt`] = readFileSync(join(dir, `${n}.crt`), "utf8");
    pem[`${n}.key`] = readFileSync(join(dir, `${n}.key`), "utf8");
  }
});

afterAll(async () => {
  for (const h of handles) await h.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An app that echoes the authenticated user, behind the real middleware. */
function echoApp(opts: { anonymous: boolean; deny?: boolean }) {
  const app = new Hono<KubeletEnv>();
  app.use(authentication({ x509: true, anonymous: opts.anonymous }));
  const authorizer = opts.deny ? webhookAuthorizer({ subjectAccessReview: async () => ({ allowed: false }) }) : alwaysAllow();
  app.use(authorization({ nodeName: "n1", authorizer }));
  app.get("*", (c) => c.json(c.get("user")));
  return app;
}

async function start(app: { fetch: Hono<any>["fetch"] }): Promise<string> {
  const h = await serveTls({ app, host: "127.0.0.1", port: 0, cert: pem["server.crt"]!, key: pem["server.key"]!, clientCA: pem["ca.crt"]!, logger: memoryLogger().logger });
  handles.push(h);
  return `https://127.0.0.1:${h.port}`;
}

const as = (who?: string) => ({
  tls: { ca: pem["ca.crt"], ...(who ? { cert: pem[`${who}.crt`], key: pem[`${who}.key`] } : {}) },
});

const OriginalResponse = globalThis.Response;

describe("serveTls with client-certificate identity", () => {
  test("serving leaves the global Response alone, so Bun.serve (healthz, read-only port) keeps working beside it", async () => {
    const url = await start(echoApp({ anonymous: true }));
    expect((await fetch(`${url}/pods`, as() as RequestInit)).status).toBe(200);
    expect(globalThis.Response).toBe(OriginalResponse);
    using plain = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
    expect(await (await fetch(`http://127.0.0.1:${plain.port}/`)).text()).toBe("ok");
  });

  test("a client certificate from the client CA is the user CN with groups O", async () => {
    const url = await start(echoApp({ anonymous: false }));
    const res = await fetch(`${url}/pods`, as("node"));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ username: "system:node:n1", groups: ["system:nodes", "system:authenticated"] });
    const admin = await fetch(`${url}/pods`, as("admin"));
    expect(await admin.json()).toEqual({ username: "admin", groups: ["system:masters", "ops", "system:authenticated"] });
  });

  test("no certificate and anonymous off: 401; anonymous on: system:anonymous", async () => {
    const off = await start(echoApp({ anonymous: false }));
    const res = await fetch(`${off}/pods`, as());
    expect(res.status).toBe(401);
    expect(await res.text()).toBe("Unauthorized");
    const on = await start(echoApp({ anonymous: true }));
    expect(await (await fetch(`${on}/pods`, as())).json()).toEqual({ username: "system:anonymous", groups: ["system:unauthenticated"] });
  });

  test("a certificate from another CA is not authenticated, even with anonymous on", async () => {
    for (const anonymous of [false, true]) {
      const url = await start(echoApp({ anonymous }));
      expect((await fetch(`${url}/pods`, as("stranger"))).status).toBe(401);
    }
  });

  test("AlwaysAllow vs a denying Webhook: 200 vs 403 with upstream's message", async () => {
    const allow = await start(echoApp({ anonymous: true }));
    expect((await fetch(`${allow}/pods`, as())).status).toBe(200);
    const deny = await start(echoApp({ anonymous: true, deny: true }));
    const res = await fetch(`${deny}/pods`, as());
    expect(res.status).toBe(403);
    expect(await res.text()).toBe("Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource(s)=[pods proxy])\n");
    const node = await fetch(`${deny}/stats/summary`, as("node"));
    expect(await node.text()).toBe("Forbidden (user=system:node:n1, verb=get, resource=nodes, subresource(s)=[stats])\n");
  });
});

describe("the kubelet API over TLS", () => {
  test("containerLogs with tailLines and follow, as the node's client certificate", async () => {
    const logDir = join(dir, "pods", "ns_p_uid", "c");
    mkdirSync(logDir, { recursive: true });
    const file = join(logDir, "0.log");
    const line = (s: number, text: string, tag = "F") => `2024-01-01T00:00:0${s}.000000001Z stdout ${tag} ${text}\n`;
    writeFileSync(file, line(1, "one") + line(2, "tw", "P") + line(2, "o") + line(3, "three"));
    let running = true;
    const pod = { metadata: { name: "p", namespace: "ns", uid: "uid" }, spec: { containers: [{ name: "c", image: "img" }] } } as unknown as Pod;
    const app = kubeletApi({
      nodeName: "n1",
      pods: { list: () => [{ pod, status: { phase: "Running", sandboxReady: true, podIPs: [], containerStatuses: [] } }] },
      logs: (ns, name, container, previous) => (ns === "ns" && name === "p" && container === "c" && !previous ? { paths: [file], running } : undefined),
      health: healthzApp([]),
      authn: authentication({ x509: true, anonymous: false }),
      authz: authorization({ nodeName: "n1", authorizer: alwaysAllow() }),
    });
    const url = await start(app);
    const res = await fetch(`${url}/containerLogs/ns/p/c?tailLines=2`, as("node"));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("two\nthree\n");
    expect((await fetch(`${url}/containerLogs/ns/p/c?tailLines=2`, as())).status).toBe(401);
    expect((await fetch(`${url}/containerLogs/ns/p/nope`, as("node"))).status).toBe(404);

    const follow = await fetch(`${url}/containerLogs/ns/p/c?tailLines=1&follow=true&timestamps=true`, as("node"));
    const reader = follow.body!.getReader();
    const dec = new TextDecoder();
    expect(dec.decode((await reader.read()).value)).toBe("2024-01-01T00:00:03.000000001Z three\n");
    writeFileSync(file, line(4, "four"), { flag: "a" });
    expect(dec.decode((await reader.read()).value)).toBe("2024-01-01T00:00:04.000000001Z four\n");
    running = false;
    expect((await reader.read()).done).toBe(true);
  });
});
