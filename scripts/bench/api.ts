// Throughput and latency of the authenticated kubelet API (10250) with a
// full node: an agent running 110 static pods (upstream's default maxPods),
// then BENCH_CLIENTS concurrent clients, each with a client certificate,
// sending GET /pods, then GET /stats/summary, then GET /metrics/cadvisor,
// back to back for BENCH_SECONDS each. Prints requests/s and p50/p99 latency per endpoint.
//
// Run as root (real containerd, as the integration tests):
//   bun scripts/bench/api.ts                       # the agent from src/main.ts
//   BUNLET_BINARY=dist/kubelet bun scripts/bench/api.ts
// Environment: BENCH_PODS (110), BENCH_CLIENTS (8), BENCH_SECONDS (15).
//
// Standalone mode (no API server): x509 client certificates against a
// private CA and AlwaysAllow, so what is measured is the agent's own TLS,
// authentication and handlers, not SubjectAccessReview round trips (which
// Webhook mode caches for 5 minutes anyway).
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { eventually, freePort, startAgent } from "../../test/harness/agent.ts";
import { requireRoot, startContainerd } from "../../test/harness/containerd.ts";

const PODS = Number(process.env.BENCH_PODS ?? 110);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 8);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
const rssMiB = (pid: number | undefined) => {
  if (!pid) return NaN;
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
};

requireRoot();
const ctd = await startContainerd({ name: "bench-api" });
try {
  const pki = join(ctd.dir, "bench-pki");
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: ctd.dir, stdio: ["ignore", "ignore", "pipe"] });
  execFileSync("mkdir", ["-p", pki]);
  ssl(
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    join(pki, "ca.key"),
    "-out",
    join(pki, "ca.crt"),
    "-days",
    "1",
    "-subj",
    "/CN=bench-ca",
  );
  ssl(
    "req",
    "-new",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    join(pki, "client.key"),
    "-out",
    join(pki, "client.csr"),
    "-subj",
    "/O=system:masters/CN=bench",
  );
  writeFileSync(join(pki, "client.ext"), "extendedKeyUsage=clientAuth\n");
  ssl(
    "x509",
    "-req",
    "-in",
    join(pki, "client.csr"),
    "-CA",
    join(pki, "ca.crt"),
    "-CAkey",
    join(pki, "ca.key"),
    "-CAcreateserial",
    "-days",
    "1",
    "-extfile",
    join(pki, "client.ext"),
    "-out",
    join(pki, "client.crt"),
  );

  const port = await freePort();
  const agent = await startAgent(ctd, {
    name: "bench",
    nodeName: "bench-node",
    extraConfig: {
      port,
      authentication: { x509: { clientCAFile: join(pki, "ca.crt") }, webhook: { enabled: false }, anonymous: { enabled: false } },
      authorization: { mode: "AlwaysAllow" },
    },
  });
  const t0 = performance.now();
  for (let i = 0; i < PODS; i++) {
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: `bench-${i}`, namespace: "bench" },
      spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "c", image: ctd.busyboxImage, imagePullPolicy: "Never", command: ["sleep", "3600"] }] },
    };
    writeFileSync(join(agent.manifests, `bench-${i}.json`), JSON.stringify(pod));
  }
  await eventually(`${PODS} pods Running`, async () => (await agent.pods()).items.filter((p) => p.status.phase === "Running").length >= PODS, 600_000, 1000);
  const startupS = (performance.now() - t0) / 1000;
  // Let the stats collection see every container before measuring.
  await Bun.sleep(15_000);

  const tls = { rejectUnauthorized: false, cert: readFileSync(join(pki, "client.crt"), "utf8"), key: readFileSync(join(pki, "client.key"), "utf8") };
  const url = (path: string) => `https://127.0.0.1:${port}${path}`;

  async function hammer(path: string): Promise<{ path: string; requests: number; errors: number; rps: number; p50: number; p99: number; bytes: number }> {
    const latencies: number[] = [];
    let errors = 0;
    let bytes = 0;
    // Warm up: one request per client opens its connection.
    await Promise.all(Array.from({ length: CLIENTS }, () => fetch(url(path), { tls } as RequestInit).then((r) => r.arrayBuffer())));
    const start = performance.now();
    const end = start + SECONDS * 1000;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (performance.now() < end) {
          const t = performance.now();
          try {
            const res = await fetch(url(path), { tls } as RequestInit);
            const body = await res.arrayBuffer();
            if (res.status !== 200) errors++;
            else {
              bytes = body.byteLength;
              latencies.push(performance.now() - t);
            }
          } catch {
            errors++;
          }
        }
      }),
    );
    const elapsed = (performance.now() - start) / 1000;
    latencies.sort((a, b) => a - b);
    return { path, requests: latencies.length, errors, rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), bytes };
  }

  // /metrics/cadvisor must report every pod's container, or its figure would measure less work.
  const scrape = await (await fetch(url("/metrics/cadvisor"), { tls } as RequestInit)).text();
  const reported = scrape.split("\n").filter((l) => l.startsWith('container_memory_working_set_bytes{container="c"')).length;
  if (reported !== PODS) throw new Error(`/metrics/cadvisor reports ${reported} of ${PODS} containers`);

  const idleRss = rssMiB(agent.pid());
  const results = [];
  for (const path of ["/pods", "/stats/summary", "/metrics/cadvisor"]) results.push(await hammer(path));
  const busyRss = rssMiB(agent.pid());
  await agent.kill("SIGTERM");

  console.log(`\nkubelet API (10250) under load: ${PODS} running pods, ${CLIENTS} concurrent clients with a client certificate, ${SECONDS} s per endpoint`);
  console.log(
    `agent: ${process.env.BUNLET_BINARY ? "dist/kubelet" : "bun src/main.ts"}; ${cpus().length} CPUs, load average at the end ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  console.log(`${PODS} static pods Running in ${startupS.toFixed(1)} s; agent RSS ${idleRss.toFixed(1)} MiB before, ${busyRss.toFixed(1)} MiB after\n`);
  console.log("| endpoint | requests | errors | requests/s | p50 | p99 | response size |");
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const r of results) {
    console.log(`| GET ${r.path} | ${r.requests} | ${r.errors} | ${r.rps.toFixed(1)} | ${r.p50.toFixed(1)} ms | ${r.p99.toFixed(1)} ms | ${(r.bytes / 1024).toFixed(0)} KiB |`);
  }
} finally {
  await ctd.stop();
}
