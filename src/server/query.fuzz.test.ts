/**
 * Fuzz: the kubelet API's query parsing (containerLogs options, stats
 * summary) on thousands of generated query strings and paths, in-process
 * through the Hono app. No request may crash a handler (a 500), and every
 * 400 must name the parameter that is wrong.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pod } from "../pods/schema.ts";
import type { PodStatusView } from "../status/index.ts";
import type { Summary } from "../stats/types.ts";
import { forAll, forAllAsync, randomString, type Rng } from "../util/fuzz.ts";
import { authentication } from "./authn.ts";
import { alwaysAllow, authorization } from "./authz.ts";
import { healthzApp } from "./healthz.ts";
import { kubeletApi } from "./kubelet-api.ts";
import { BadLogQuery, parseLogQuery } from "./logs.ts";

const LOG_PARAMS = ["tailLines", "tail", "limitBytes", "sinceSeconds", "sinceTime", "timestamps", "follow", "previous", "container", "only_cpu_and_memory"];
const VALUES = [
  "",
  "0",
  "1",
  "-1",
  "+3",
  " 7 ",
  "10",
  "1e3",
  "0x10",
  "9999999999999999999999",
  "all",
  "true",
  "false",
  "f",
  "no",
  "x",
  "1.5",
  "2024-01-01T00:00:00Z",
  "2024-13-45T99:99:99Z",
  "2024-01-01T00:00:00+25:00",
  "yesterday",
  "%zz",
  "%00",
  "\u0000",
  "\ud83d\ude00",
  "a".repeat(500),
];

function randomQuery(rng: Rng): Record<string, string> {
  const q: Record<string, string> = {};
  for (let i = rng.int(5); i > 0; i--) q[rng.bool(0.9) ? rng.pick(LOG_PARAMS) : randomString(rng, 4)] = rng.bool(0.8) ? rng.pick(VALUES) : randomString(rng, rng.int(12));
  return q;
}

test("parseLogQuery: 5000 generated queries either parse to sane options or throw a BadLogQuery naming the parameter", () => {
  forAll({ seed: 0x10_9e7, count: 5000 }, randomQuery, (q) => {
    try {
      const o = parseLogQuery(q, Date.UTC(2026, 0, 1));
      if (o.tailLines !== undefined) expect(Number.isInteger(o.tailLines) && o.tailLines >= 0).toBe(true);
      if (o.limitBytes !== undefined) expect(o.limitBytes).toBeGreaterThan(0);
      if (o.sinceMs !== undefined) expect(Number.isFinite(o.sinceMs)).toBe(true);
    } catch (err) {
      if (!(err instanceof BadLogQuery)) throw err;
      expect(err.message).toContain(err.param);
      expect(["tailLines", "limitBytes", "sinceSeconds", "sinceTime"]).toContain(err.param);
    }
  });
}, 60_000); // thousands of cases: a loaded machine must not time them out

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "query-fuzz-"));
  writeFileSync(join(dir, "0.log"), "2024-01-01T00:00:01.000000000Z stdout F one\n2024-01-01T00:00:02.000000000Z stderr F two\n");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const pod = (name: string, containers: string[]): Pod =>
  ({ metadata: { name, namespace: "ns", uid: `uid-${name}` }, spec: { containers: containers.map((c) => ({ name: c, image: "img" })) } }) as unknown as Pod;
const status: PodStatusView = { phase: "Running", sandboxReady: true, podIPs: [], containerStatuses: [] };
const summary: Summary = {
  node: { nodeName: "n1", startTime: "t", cpu: { time: "t" }, memory: { time: "t" }, fs: { time: "t" }, systemContainers: [] },
  pods: [],
};

function encodeQuery(q: Record<string, string>, rng: Rng): string {
  // Mostly encoded properly; sometimes raw, as a careless client sends it.
  return Object.entries(q)
    .map(([k, v]) => (rng.bool(0.85) ? `${encodeURIComponent(k)}=${encodeURIComponent(v)}` : `${k}=${v}`.replace(/[#\s]/g, "")))
    .join("&");
}

test("kubelet API: 2000 generated containerLogs and stats requests answer 200, 400 naming the parameter, or 404; never 500", async () => {
  const app = kubeletApi({
    nodeName: "n1",
    pods: { list: () => [{ pod: pod("p", ["c", "idle"]), status }] },
    stats: { summary: async () => summary },
    // "c" has a log file; "idle" never started.
    logs: (_ns, _p, c) => (c === "c" ? { paths: [join(dir, "0.log")], running: false } : undefined),
    health: healthzApp([{ name: "ping", check: () => ({ ok: true }) }]),
    authn: authentication({ x509: false, anonymous: true }),
    authz: authorization({ nodeName: "n1", authorizer: alwaysAllow() }),
  });
  const paths = [
    "/containerLogs/ns/p/c",
    "/containerLogs/ns/p/idle",
    "/containerLogs/ns/p/nope",
    "/containerLogs/other/p/c",
    "/containerLogs/ns/%zz/c",
    "/containerLogs/ns/p/c/extra",
    "/stats/summary",
  ];
  const seen = new Map<number, number>();
  await forAllAsync(
    { seed: 0xa11_0c, count: 2000 },
    (rng) => {
      const q = randomQuery(rng);
      const query = encodeQuery(q, rng);
      return `${rng.pick(paths)}${query ? `?${query}` : ""}`;
    },
    async (url) => {
      const res = await app.request(url);
      const body = await res.text();
      expect([200, 400, 404]).toContain(res.status);
      seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
      // Two 400s are about the container, not the query (upstream's wording): it never started, or has no previous instance.
      if (res.status === 400 && !/is waiting to start|^previous terminated container/.test(body)) {
        expect(body).toMatch(/tailLines|limitBytes|sinceSeconds|sinceTime|only_cpu_and_memory/);
      }
    },
  );
  // The generator reaches every outcome, so the properties above were exercised.
  for (const code of [200, 400, 404]) expect(seen.get(code) ?? 0).toBeGreaterThan(100);
}, 60_000); // thousands of cases: a loaded machine must not time them out
