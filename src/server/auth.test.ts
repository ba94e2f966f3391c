import { describe, expect, test } from "bun:test";
import { Hono } from "hono";
import { authentication, type AuthenticationOptions, type KubeletEnv, type PeerSocket } from "./authn.ts";
import { alwaysAllow, authorization, requestAttributes, webhookAuthorizer, type Authorizer, type AuthzAttributes } from "./authz.ts";

const certSocket = (CN: string, O: string | string[], authorized = true, eku?: string[]): PeerSocket => ({
  authorized,
  authorizationError: authorized ? null : "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  getPeerCertificate: () => ({ subject: { CN, O }, ...(eku ? { ext_key_usage: eku } : {}) }),
});
const noCert: PeerSocket = { authorized: false, getPeerCertificate: () => ({}) };

function appWith(opts: AuthenticationOptions, authorizer: Authorizer = alwaysAllow()) {
  const app = new Hono<KubeletEnv>();
  app.use(authentication(opts));
  app.use(authorization({ nodeName: "n1", authorizer }));
  app.all("*", (c) => c.json(c.get("user")));
  return app;
}
const req = (app: Hono<KubeletEnv>, path: string, socket: PeerSocket, headers: Record<string, string> = {}, method = "GET") =>
  app.request(path, { method, headers }, { incoming: { socket } });

describe("authentication", () => {
  test("x509: CN is the user, O the groups, plus system:authenticated", async () => {
    const app = appWith({ x509: true, anonymous: false });
    const res = await req(app, "/pods", certSocket("system:node:n1", ["system:nodes", "extra"]));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ username: "system:node:n1", groups: ["system:nodes", "extra", "system:authenticated"] });
  });

  test("a certificate that did not verify is refused even with anonymous on", async () => {
    const app = appWith({ x509: true, anonymous: true });
    const res = await req(app, "/pods", certSocket("system:node:n1", "system:nodes", false));
    expect(res.status).toBe(401);
    expect(await res.text()).toBe("Unauthorized");
  });

  test("a certificate without clientAuth key usage is refused", async () => {
    const app = appWith({ x509: true, anonymous: false });
    expect((await req(app, "/pods", certSocket("u", "g", true, ["1.3.6.1.5.5.7.3.1"]))).status).toBe(401);
    expect((await req(app, "/pods", certSocket("u", "g", true, ["1.3.6.1.5.5.7.3.2"]))).status).toBe(200);
  });

  test("certificates are ignored without a client CA", async () => {
    const app = appWith({ x509: false, anonymous: false });
    expect((await req(app, "/pods", certSocket("system:node:n1", "system:nodes"))).status).toBe(401);
  });

  test("no credentials: anonymous when enabled, else 401", async () => {
    expect((await req(appWith({ x509: true, anonymous: false }), "/pods", noCert)).status).toBe(401);
    const res = await req(appWith({ x509: true, anonymous: true }), "/pods", noCert);
    expect(await res.json()).toEqual({ username: "system:anonymous", groups: ["system:unauthenticated"] });
    // No socket at all (in-process requests) behaves the same.
    expect((await appWith({ x509: true, anonymous: true }).request("/pods")).status).toBe(200);
  });

  test("bearer token through TokenReview, cached for cacheTTL; rejected tokens are 401 even with anonymous", async () => {
    let now = 0;
    const calls: string[] = [];
    const app = appWith({
      x509: true,
      anonymous: true,
      now: () => now,
      cacheTTLMs: 120_000,
      tokenReview: async (t) => {
        calls.push(t);
        return t === "good" ? { authenticated: true, user: { username: "sa", groups: ["g"] } } : { authenticated: false };
      },
    });
    const ok = await req(app, "/pods", noCert, { authorization: "Bearer good" });
    expect(await ok.json()).toEqual({ username: "sa", groups: ["g", "system:authenticated"] });
    await req(app, "/pods", noCert, { authorization: "bearer good" });
    expect(calls).toEqual(["good"]);
    now = 120_001;
    await req(app, "/pods", noCert, { authorization: "Bearer good" });
    expect(calls).toEqual(["good", "good"]);
    expect((await req(app, "/pods", noCert, { authorization: "Bearer bad" })).status).toBe(401);
    expect((await req(app, "/pods", noCert, { authorization: "Bearer bad" })).status).toBe(401);
    expect(calls).toEqual(["good", "good", "bad"]);
    // Not a bearer header: no token, so anonymous.
    expect((await req(app, "/pods", noCert, { authorization: "Basic eDp5" })).status).toBe(200);
  });

  test("a failing TokenReview is 401 and not cached", async () => {
    let n = 0;
    const app = appWith({
      x509: false,
      anonymous: false,
      tokenReview: async () => {
        if (n++ === 0) throw new Error("apiserver down");
        return { authenticated: true, user: { username: "u" } };
      },
    });
    expect((await req(app, "/pods", noCert, { authorization: "Bearer t" })).status).toBe(401);
    expect((await req(app, "/pods", noCert, { authorization: "Bearer t" })).status).toBe(200);
  });

  test("a verified certificate wins over a token", async () => {
    const app = appWith({ x509: true, anonymous: false, tokenReview: async () => ({ authenticated: false }) });
    const res = await req(app, "/pods", certSocket("system:node:n1", "system:nodes"), { authorization: "Bearer x" });
    expect(((await res.json()) as { username: string }).username).toBe("system:node:n1");
  });
});

describe("authorization", () => {
  const u = { username: "system:anonymous", groups: ["system:unauthenticated"] };
  const sub = (method: string, path: string, fine = true) => requestAttributes("n1", u, method, path, fine).map((a) => a.subresource);

  test("path → subresource, as upstream", () => {
    expect(sub("GET", "/stats/summary")).toEqual(["stats"]);
    expect(sub("GET", "/stats")).toEqual(["stats"]);
    expect(sub("GET", "/statsx")).toEqual(["proxy"]);
    expect(sub("GET", "/metrics")).toEqual(["metrics"]);
    expect(sub("GET", "/metrics/cadvisor")).toEqual(["metrics"]);
    expect(sub("GET", "/logs/messages")).toEqual(["log"]);
    expect(sub("GET", "/spec/")).toEqual(["spec"]);
    expect(sub("POST", "/checkpoint/ns/p/c")).toEqual(["checkpoint"]);
    expect(sub("GET", "/pods")).toEqual(["pods", "proxy"]);
    expect(sub("GET", "/runningpods/")).toEqual(["pods", "proxy"]);
    expect(sub("GET", "/healthz/ping")).toEqual(["healthz", "proxy"]);
    expect(sub("GET", "/configz")).toEqual(["configz", "proxy"]);
    expect(sub("GET", "/pods", false)).toEqual(["proxy"]);
    for (const p of ["/exec/ns/p/c", "/attach/ns/p/c", "/portForward/ns/p", "/run/ns/p/c", "/containerLogs/ns/p/c"]) {
      expect(sub("POST", p)).toEqual(["proxy"]);
    }
  });

  test("method → verb; resource nodes, name = node", () => {
    const verbs = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"].map((m) => requestAttributes("n1", u, m, "/pods", false)[0]!.verb);
    expect(verbs).toEqual(["get", "create", "update", "patch", "delete", ""]);
    const a = requestAttributes("n1", u, "GET", "/pods")[0]!;
    expect([a.resource, a.name, a.apiVersion, a.namespace]).toEqual(["nodes", "n1", "v1", ""]);
  });

  test("denied: 403 with upstream's message; a fine-grained path falls back to proxy", async () => {
    const seen: string[] = [];
    const deny = webhookAuthorizer({ subjectAccessReview: async (a) => (seen.push(a.subresource), { allowed: false }) });
    const app = appWith({ x509: false, anonymous: true }, deny);
    const res = await app.request("/pods");
    expect(res.status).toBe(403);
    expect(await res.text()).toBe("Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource(s)=[pods proxy])\n");
    expect(seen).toEqual(["pods", "proxy"]);
    const stats = await app.request("/stats/summary", { method: "POST" });
    expect(await stats.text()).toBe("Forbidden (user=system:anonymous, verb=create, resource=nodes, subresource(s)=[stats])\n");

    const onlyProxy = webhookAuthorizer({ subjectAccessReview: async (a) => ({ allowed: a.subresource === "proxy" }) });
    expect((await appWith({ x509: false, anonymous: true }, onlyProxy).request("/healthz")).status).toBe(200);
  });

  test("webhook decisions are cached: allowed 5m, denied 30s; errors are 500 and not cached", async () => {
    let now = 0;
    let allowed = true;
    let fail = false;
    const calls: AuthzAttributes[] = [];
    const authorizer = webhookAuthorizer({
      now: () => now,
      subjectAccessReview: async (a) => {
        calls.push(a);
        if (fail) throw new Error("boom");
        return { allowed };
      },
    });
    const app = appWith({ x509: false, anonymous: true }, authorizer);
    expect((await app.request("/stats/summary")).status).toBe(200);
    allowed = false;
    now = 299_000;
    expect((await app.request("/stats/summary")).status).toBe(200);
    expect(calls.length).toBe(1);
    now = 300_000;
    expect((await app.request("/stats/summary")).status).toBe(403);
    allowed = true;
    now = 329_000;
    expect((await app.request("/stats/summary")).status).toBe(403);
    now = 330_000;
    expect((await app.request("/stats/summary")).status).toBe(200);
    expect(calls.length).toBe(3);
    fail = true;
    const err = await app.request("/metrics");
    expect(err.status).toBe(500);
    expect(await err.text()).toBe("Authorization error (user=system:anonymous, verb=get, resource=nodes, subresource=metrics)");
    fail = false;
    expect((await app.request("/metrics")).status).toBe(200);
    expect(calls[0]).toMatchObject({ user: { username: "system:anonymous" }, verb: "get", resource: "nodes", subresource: "stats", name: "n1" });
  });
});
