import { afterAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { loadConfig, type KubeletConfiguration } from "../config/index.ts";
import { FakeCri } from "../cri/fake.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { createSelfSignedCert } from "./selfsigned.ts";
import { servingCertificate, startKubeletServer } from "./wire.ts";

const dir = mkdtempSync(join(tmpdir(), "wire-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function config(args: string[]): KubeletConfiguration {
  const r = loadConfig(["--hostname-override=n1", ...args], { readFile: () => "", hostname: () => "n1" });
  if (r.kind !== "run") throw new Error(JSON.stringify(r));
  return r.config.kubelet;
}
const base = { nodeName: "n1", nodeIPs: ["10.1.2.3"], logger: memoryLogger().logger, now: Date.UTC(2026, 0, 1) };

describe("servingCertificate", () => {
  test("both files set: they are used as given", () => {
    const pair = createSelfSignedCert({ hostname: "given", now: base.now });
    writeFileSync(join(dir, "given.crt"), pair.cert);
    writeFileSync(join(dir, "given.key"), pair.key);
    const got = servingCertificate({
      ...base,
      certDir: join(dir, "unused"),
      config: config([`--tls-cert-file=${join(dir, "given.crt")}`, `--tls-private-key-file=${join(dir, "given.key")}`]),
    });
    expect(got).toEqual(pair);
  });

  test("neither set: a self-signed pair in the cert dir, for the node name and IPs", () => {
    const got = servingCertificate({ ...base, certDir: join(dir, "pki"), config: config([]) });
    const x = new X509Certificate(got.cert);
    expect(x.subject).toBe(`CN=n1@${base.now / 1000}`);
    expect(x.subjectAltName).toBe("DNS:n1, IP Address:10.1.2.3");
  });

  test("only one set: an error naming which", () => {
    expect(() => servingCertificate({ ...base, certDir: dir, config: config([`--tls-cert-file=${join(dir, "given.crt")}`]) })).toThrow(
      "tlsCertFile and tlsPrivateKeyFile must be set together (got only tlsCertFile)",
    );
  });
});

test("enableServer false: 10250 is not served", async () => {
  const handle = await startKubeletServer({
    config: config(["--enable-server=false"]),
    nodeName: "n1",
    pods: { list: () => [] },
    stats: { summary: async () => ({ node: { nodeName: "n1", startTime: "" }, pods: [] }) } as never,
    cri: new FakeCri({ clock: new FakeClock() }),
    health: new Hono(),
    certDir: join(dir, "never"),
    nodeIPs: [],
    logger: memoryLogger().logger,
  });
  expect(handle).toBeUndefined();
  expect(existsSync(join(dir, "never"))).toBe(false); // no certificate made either
});

test("serving: the start is logged once, with the address", async () => {
  const { logger, lines } = memoryLogger();
  const k = { ...config(["--address=127.0.0.1"]), port: 0 }; // any free port (the flag refuses 0)
  const handle = await startKubeletServer({
    config: k,
    nodeName: "n1",
    pods: { list: () => [] },
    stats: { summary: async () => ({ node: { nodeName: "n1", startTime: "" }, pods: [] }) } as never,
    cri: new FakeCri({ clock: new FakeClock() }),
    health: new Hono(),
    certDir: join(dir, "served"),
    nodeIPs: [],
    logger,
  });
  try {
    const serving = lines.filter((l) => l.includes("serving the kubelet API"));
    expect(serving).toHaveLength(1);
    expect(serving[0]).toContain(`address=127.0.0.1:${handle!.port}`);
  } finally {
    await handle?.close();
  }
});
