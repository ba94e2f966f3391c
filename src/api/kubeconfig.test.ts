import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeconfigError, loadCredentials } from "./kubeconfig.ts";

const dir = mkdtempSync(join(tmpdir(), "kubeconfig-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
/** Writes a kubeconfig (JSON is YAML) into its own directory; returns its path. */
function kubeconfig(doc: unknown, files: Record<string, string> = {}): string {
  const d = join(dir, String(n++));
  mkdirSync(d, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(d, name), text);
  const path = join(d, "kubeconfig");
  writeFileSync(path, typeof doc === "string" ? doc : JSON.stringify(doc));
  return path;
}

const config = (cluster: Record<string, unknown>, user: Record<string, unknown> | undefined) => ({
  apiVersion: "v1",
  kind: "Config",
  clusters: [{ name: "c", cluster }],
  users: user === undefined ? [] : [{ name: "u", user }],
  contexts: [{ name: "ctx", context: { cluster: "c", ...(user === undefined ? {} : { user: "u" }) } }],
  "current-context": "ctx",
});

async function failure(path: string): Promise<string> {
  try {
    await loadCredentials(path);
  } catch (err) {
    expect(err).toBeInstanceOf(KubeconfigError);
    return (err as Error).message;
  }
  throw new Error("loadCredentials succeeded");
}

describe("loadCredentials", () => {
  test("certificate files are read relative to the kubeconfig's directory, as kubectl does", async () => {
    const path = kubeconfig(
      `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: pki/ca.crt
users:
- name: u
  user:
    client-certificate: pki/node.crt
    client-key: pki/node.key
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`,
    );
    mkdirSync(join(path, "..", "pki"));
    for (const f of ["ca.crt", "node.crt", "node.key"]) writeFileSync(join(path, "..", "pki", f), `${f} text`);
    expect(await loadCredentials(path)).toEqual({
      server: "https://10.0.0.1:6443",
      ca: "ca.crt text",
      cert: "node.crt text",
      key: "node.key text",
      headers: {},
      insecureSkipVerify: false,
    });
  });

  test("the -data fields are base64", async () => {
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    const path = kubeconfig(config({ server: "https://a", "certificate-authority-data": b64("CA") }, { "client-certificate-data": b64("CERT"), "client-key-data": b64("KEY") }));
    expect(await loadCredentials(path)).toMatchObject({ ca: "CA", cert: "CERT", key: "KEY" });
  });

  test("a bearer token, from the file or inline (token-file relative to the kubeconfig)", async () => {
    const fromFile = kubeconfig(config({ server: "https://a" }, { "token-file": "token" }), { token: "abc.def\n" });
    expect((await loadCredentials(fromFile)).headers).toEqual({ Authorization: "Bearer abc.def" });
    const inline = kubeconfig(config({ server: "https://a", "insecure-skip-tls-verify": true }, { token: "t0k", as: "system:node:n1" }));
    expect(await loadCredentials(inline)).toMatchObject({ headers: { Authorization: "Bearer t0k", "Impersonate-User": "system:node:n1" }, insecureSkipVerify: true });
  });

  test("basic auth from username and password", async () => {
    const path = kubeconfig(config({ server: "https://a" }, { username: "admin", password: "s3cret" }));
    expect((await loadCredentials(path)).headers).toEqual({ Authorization: `Basic ${Buffer.from("admin:s3cret").toString("base64")}` });
  });

  test("a context without a user is anonymous", async () => {
    const path = kubeconfig(config({ server: "https://a" }, undefined));
    expect(await loadCredentials(path)).toEqual({ server: "https://a", headers: {}, insecureSkipVerify: false });
  });

  test("an exec credential plugin runs through client-node's provider (the ExecCredential's token is sent)", async () => {
    const credential = JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: { token: "from-plugin" } });
    const path = kubeconfig(
      config(
        { server: "https://a" },
        { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "/bin/sh", args: ["-c", `printf '%s' '${credential}'`], interactiveMode: "Never" } },
      ),
    );
    expect((await loadCredentials(path)).headers["Authorization"]).toBe("Bearer from-plugin");
  });

  test("what is wrong is named: the file, the entry, the field", async () => {
    expect(await failure(join(dir, "missing"))).toStartWith(`kubeconfig ${join(dir, "missing")}: `);
    expect(await failure(kubeconfig("- a list"))).toContain("not a YAML or JSON mapping");
    expect(await failure(kubeconfig({ ...config({ server: "https://a" }, {}), "current-context": undefined }))).toContain("current-context is not set");
    expect(await failure(kubeconfig({ ...config({ server: "https://a" }, {}), "current-context": "other" }))).toContain('current-context "other" is not in contexts');
    expect(await failure(kubeconfig(config({}, {})))).toContain("clusters[0].cluster.server is missing");
    expect(await failure(kubeconfig(config({ server: "https://a" }, { "client-certificate": "nope.crt", "client-key": "nope.key" })))).toContain('user "u" client-certificate: ');
    expect(await failure(kubeconfig(config({ server: "https://a" }, { "client-certificate-data": "Q0VSVA==" })))).toContain("needs both client-certificate and client-key");
    const wrongUser = config({ server: "https://a" }, {});
    wrongUser.contexts[0]!.context = { cluster: "c", user: "nobody" };
    expect(await failure(kubeconfig(wrongUser))).toContain('context "ctx": user "nobody" is not in users');
  });
});
