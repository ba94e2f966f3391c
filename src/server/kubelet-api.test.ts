import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { Pod } from "../pods/schema.ts";
import type { PodStatusView } from "../status/index.ts";
import type { Summary } from "../stats/types.ts";
import { authentication } from "./authn.ts";
import { alwaysAllow, authorization } from "./authz.ts";
import { healthzApp } from "./healthz.ts";
import { cpuAndMemoryOnly } from "./default-routes.ts";
import { kubeletApi, type KubeletApiOptions } from "./kubelet-api.ts";
import { configzBody } from "./configz.ts";
import { HttpError } from "./errors.ts";
import type { StreamingResolver, StreamingTarget } from "./streaming.ts";
import { loadConfig } from "../config/index.ts";
import { parseLogQuery, readLogs, rotatedLogPaths, type ResolvedLogs } from "./logs.ts";
import { parseCriLine } from "../logs/cri-line.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kubelet-api-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const cri = (t: string, text: string, tag = "F", stream = "stdout") => `2024-01-01T00:00:${t}.123456789Z ${stream} ${tag} ${text}\n`;
const collect = async (g: AsyncGenerator<string>) => {
  let s = "";
  for await (const x of g) s += x;
  return s;
};
const base = { timestamps: false, follow: false, previous: false };

describe("CRI log files", () => {
  test("parses lines; malformed ones are undefined", () => {
    expect(parseCriLine("2024-01-01T00:00:01.5Z stderr P hello world")).toMatchObject({ stream: "stderr", partial: true, text: "hello world" });
    expect(parseCriLine("2024-01-01T00:00:01Z stdout F ")).toMatchObject({ partial: false, text: "" });
    expect(parseCriLine("garbage")).toBeUndefined();
    expect(parseCriLine("2024-01-01T00:00:01Z stdin F x")).toBeUndefined();
  });

  test("joins partial lines, reads rotated and gzipped files in order, tail/since/limit/timestamps", async () => {
    const d = join(dir, "ns_p_uid", "c");
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "0.log.20240101-000001.gz"), gzipSync(cri("01", "one") + cri("02", "two")));
    writeFileSync(join(d, "0.log.20240101-000003"), cri("03", "thr", "P") + cri("03", "ee"));
    writeFileSync(join(d, "0.log"), cri("04", "four", "F", "stderr") + cri("05", "five"));
    writeFileSync(join(d, "0.log.20240101-000003.tmp"), "junk");
    const paths = await rotatedLogPaths(join(d, "0.log"));
    expect(paths.map((p) => p.slice(d.length + 1))).toEqual(["0.log.20240101-000001.gz", "0.log.20240101-000003", "0.log"]);
    expect(await collect(readLogs(paths, base))).toBe("one\ntwo\nthree\nfour\nfive\n");
    expect(await collect(readLogs(paths, { ...base, tailLines: 2 }))).toBe("four\nfive\n");
    expect(await collect(readLogs(paths, { ...base, tailLines: 0 }))).toBe("");
    expect(await collect(readLogs(paths, { ...base, sinceMs: Date.parse("2024-01-01T00:00:03Z") }))).toBe("three\nfour\nfive\n");
    expect(await collect(readLogs(paths, { ...base, limitBytes: 6 }))).toBe("one\ntw");
    expect(await collect(readLogs(paths, { ...base, tailLines: 1, timestamps: true }))).toBe("2024-01-01T00:00:05.123456789Z five\n");
  });

  test("a last line without a newline (tagged P at exit) is served as it is: plain, tail, timestamps, limit, since", async () => {
    const d = join(dir, "partial-end");
    mkdirSync(d, { recursive: true });
    const f = join(d, "0.log");
    writeFileSync(f, cri("01", "first") + cri("02", "DO", "P") + cri("03", "NE", "P"));
    expect(await collect(readLogs([f], base))).toBe("first\nDONE");
    expect(await collect(readLogs([f], { ...base, tailLines: 1 }))).toBe("DONE");
    expect(await collect(readLogs([f], { ...base, tailLines: 1, timestamps: true }))).toBe("2024-01-01T00:00:02.123456789Z DONE");
    expect(await collect(readLogs([f], { ...base, limitBytes: 8 }))).toBe("first\nDO");
    expect(await collect(readLogs([f], { ...base, sinceMs: Date.parse("2024-01-01T00:00:02Z") }))).toBe("DONE");
    // Only a partial line: `echo -n DONE`.
    writeFileSync(f, cri("01", "DONE", "P"));
    expect(await collect(readLogs([f], base))).toBe("DONE");
  });

  test("follow: new lines while running, across a rotation; ends when the container stops", async () => {
    const d = join(dir, "follow");
    mkdirSync(d, { recursive: true });
    const f = join(d, "0.log");
    writeFileSync(f, cri("01", "a"));
    let running = true;
    const out: string[] = [];
    const done = (async () => {
      for await (const x of readLogs([f], { ...base, follow: true, pollMs: 10, runningCheckMs: 10, stillRunning: async () => running })) out.push(x);
    })();
    // Waits for what the reader serves, not a fixed time: a loaded machine (CI) may poll late.
    const served = async (pieces: number) => {
      for (let waited = 0; out.length < pieces && waited < 5000; waited += 5) await Bun.sleep(5);
      return out;
    };
    expect(await served(1)).toEqual(["a\n"]);
    appendFileSync(f, cri("02", "b", "P"));
    // A partial piece is served as soon as it is read (upstream writes each piece), its end later.
    expect(await served(2)).toEqual(["a\n", "b"]);
    appendFileSync(f, cri("02", "c"));
    expect(await served(3)).toEqual(["a\n", "b", "c\n"]);
    // Rotation: the file is renamed and the runtime opens a fresh one.
    const { renameSync } = await import("node:fs");
    appendFileSync(f, cri("03", "d"));
    renameSync(f, f + ".20240101-000003");
    writeFileSync(f, cri("04", "e"));
    expect((await served(5)).join("")).toBe("a\nbc\nd\ne\n");
    running = false;
    await done;
  });

  test("query: values validated naming the parameter", () => {
    expect(parseLogQuery({ tailLines: "5", timestamps: "true", follow: "" }, 0)).toEqual({ tailLines: 5, timestamps: true, follow: true, previous: false });
    expect(parseLogQuery({ tail: "all" }, 0).tailLines).toBeUndefined();
    expect(parseLogQuery({ sinceSeconds: "10" }, 100_000).sinceMs).toBe(90_000);
    expect(parseLogQuery({ sinceTime: "2024-01-01T00:00:00Z" }, 0).sinceMs).toBe(Date.parse("2024-01-01T00:00:00Z"));
    for (const [q, param] of [
      [{ tailLines: "x" }, "tailLines"],
      [{ tailLines: "-1" }, "tailLines"],
      [{ limitBytes: "0" }, "limitBytes"],
      [{ sinceSeconds: "0" }, "sinceSeconds"],
      [{ sinceTime: "yesterday" }, "sinceTime"],
      [{ sinceTime: "2024-01-01T00:00:00Z", sinceSeconds: "1" }, "sinceTime"],
    ] as const) {
      expect(() => parseLogQuery(q, 0)).toThrow(param);
    }
  });
});

const pod = (name: string, containers: string[]): Pod =>
  ({ metadata: { name, namespace: "ns", uid: `uid-${name}` }, spec: { containers: containers.map((c) => ({ name: c, image: "img" })) } }) as unknown as Pod;
const status = (running: string[]): PodStatusView => ({
  phase: "Running",
  sandboxReady: true,
  podIPs: [],
  containerStatuses: running.map((name) => ({
    name,
    state: { running: { startedAt: "x" } },
    lastState: {},
    ready: true,
    started: true,
    restartCount: 0,
    image: "img",
    imageID: "",
    containerID: "c",
  })),
});
const summary: Summary = {
  node: {
    nodeName: "n1",
    startTime: "t",
    cpu: { time: "t", usageNanoCores: 1 },
    memory: { time: "t", workingSetBytes: 2 },
    fs: { time: "t", usedBytes: 3 },
    systemContainers: [{ name: "kubelet", startTime: "t", cpu: { time: "t" }, rootfs: { time: "t" } }],
  },
  pods: [
    {
      podRef: { name: "p", namespace: "ns", uid: "u" },
      startTime: "t",
      containers: [{ name: "c", startTime: "t", memory: { time: "t" }, logs: { time: "t" } }],
      cpu: { time: "t" },
      network: { time: "t" },
      volume: [],
    },
  ],
};

function api(logs: (ns: string, p: string, c: string, prev: boolean) => ResolvedLogs | undefined, extra: Partial<KubeletApiOptions> = {}) {
  return kubeletApi({
    ...extra,
    nodeName: "n1",
    pods: {
      list: () => [
        { pod: pod("p", ["c", "idle"]), status: status(["c"]) },
        { pod: pod("q", ["c"]), status: status([]) },
      ],
    },
    stats: { summary: async () => summary },
    logs,
    health: healthzApp([{ name: "ping", check: () => ({ ok: true }) }]),
    authn: authentication({ x509: false, anonymous: true }),
    authz: authorization({ nodeName: "n1", authorizer: alwaysAllow() }),
  });
}

describe("kubeletApi", () => {
  const logFile = () => {
    const f = join(dir, "api-0.log");
    writeFileSync(f, cri("01", "l1") + cri("02", "l2") + cri("03", "l3"));
    return f;
  };

  test("/pods, /runningpods/, /healthz", async () => {
    const app = api(() => undefined);
    const pods = (await (await app.request("/pods")).json()) as { kind: string; items: { metadata: { name: string }; kind: string }[] };
    expect(pods.kind).toBe("PodList");
    expect(pods.items.map((p) => [p.metadata.name, p.kind])).toEqual([
      ["p", "Pod"],
      ["q", "Pod"],
    ]);
    const running = (await (await app.request("/runningpods/")).json()) as { items: { metadata: { name: string }; spec: { containers: { name: string }[] } }[] };
    expect(running.items.map((p) => [p.metadata.name, p.spec.containers.map((c) => c.name)])).toEqual([["p", ["c"]]]);
    expect(await (await app.request("/healthz")).text()).toBe("ok");
    expect((await app.request("/healthz/ping")).status).toBe(200);
    expect((await app.request("/nothing")).status).toBe(404);
  });

  test("/stats/summary and only_cpu_and_memory", async () => {
    const app = api(() => undefined);
    expect(await (await app.request("/stats/summary")).json()).toEqual(summary);
    const only = await (await app.request("/stats/summary?only_cpu_and_memory=true")).json();
    expect(only).toEqual(cpuAndMemoryOnly(summary));
    expect(only).toEqual({
      node: { nodeName: "n1", startTime: "t", cpu: summary.node.cpu, memory: summary.node.memory, systemContainers: [{ name: "kubelet", startTime: "t", cpu: { time: "t" } }] },
      pods: [{ podRef: summary.pods[0]!.podRef, startTime: "t", cpu: { time: "t" }, containers: [{ name: "c", startTime: "t", memory: { time: "t" } }] }],
    });
    expect((await app.request("/stats/summary?only_cpu_and_memory=maybe")).status).toBe(400);
  });

  test("/containerLogs: options, 404 for unknown pod or container, 400 for bad values", async () => {
    const f = logFile();
    const calls: unknown[] = [];
    const app = api((...args) => (calls.push(args), { paths: [f], running: false }));
    const res = await app.request("/containerLogs/ns/p/c?tailLines=2");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain");
    expect(await res.text()).toBe("l2\nl3\n");
    expect(await (await app.request("/containerLogs/ns/p/c?limitBytes=4&timestamps=true")).text()).toBe("2024");
    expect(await (await app.request("/containerLogs/ns/p/c?sinceTime=2024-01-01T00:00:03Z")).text()).toBe("l3\n");
    await (await app.request("/containerLogs/ns/p/c?previous=true")).text();
    expect(calls.at(-1)).toEqual(["ns", "p", "c", true]);
    // follow on a stopped container ends at the end of the file.
    expect(await (await app.request("/containerLogs/ns/p/c?follow=true")).text()).toBe("l1\nl2\nl3\n");

    const nopod = await app.request("/containerLogs/ns/nope/c");
    expect([nopod.status, await nopod.text()]).toEqual([404, 'pod "nope" does not exist']);
    const noctr = await app.request("/containerLogs/ns/p/zzz");
    expect([noctr.status, await noctr.text()]).toEqual([404, 'container "zzz" not found in pod "p"']);
    expect((await app.request("/containerLogs/other/p/c")).status).toBe(404);
    const bad = await app.request("/containerLogs/ns/p/c?tailLines=abc");
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("tailLines");
    expect(await (await app.request("/containerLogs/ns/p/c?limitBytes=-3")).text()).toContain("limitBytes");
    const prev = await api(() => undefined).request("/containerLogs/ns/p/c?previous=true");
    expect([prev.status, await prev.text()]).toEqual([400, 'previous terminated container "c" in pod "p" not found']);
  });

  test("/containerLogs?follow streams while the container runs", async () => {
    const f = join(dir, "follow-api.log");
    writeFileSync(f, cri("01", "first"));
    let running = true;
    const app = api(() => ({ paths: [f], running }));
    const res = await app.request("/containerLogs/ns/p/c?follow=true");
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    expect(dec.decode((await reader.read()).value)).toBe("first\n");
    appendFileSync(f, cri("02", "second"));
    expect(dec.decode((await reader.read()).value)).toBe("second\n");
    running = false;
    const end = await Promise.race([reader.read(), Bun.sleep(3000).then(() => "timeout")]);
    expect(end).toEqual({ done: true, value: undefined });
  });

  test("/configz: upstream's {kubeletconfig} with camelCase fields and Go durations, flags merged", async () => {
    const loaded = loadConfig(["--hostname-override=n1", "--streaming-connection-idle-timeout=90s", "--eviction-soft-grace-period=memory.available=1m30s"], {
      readFile: () => "",
      hostname: () => "n1",
    });
    if (loaded.kind !== "run") throw new Error(JSON.stringify(loaded));
    const app = api(() => undefined, { configz: () => configzBody(loaded.config.kubelet) });
    const res = await app.request("/configz");
    expect(res.headers.get("content-type")).toContain("application/json");
    const body = (await res.json()) as { kubeletconfig: Record<string, unknown> };
    expect(Object.keys(body)).toEqual(["kubeletconfig"]);
    expect(body.kubeletconfig).toMatchObject({
      syncFrequency: "1m0s",
      streamingConnectionIdleTimeout: "1m30s",
      port: 10250,
      // No config file: upstream's legacy flag defaults (anonymous on, AlwaysAllow).
      authentication: { webhook: { cacheTTL: "2m0s" }, anonymous: { enabled: true } },
      authorization: { mode: "AlwaysAllow", webhook: { cacheAuthorizedTTL: "5m0s", cacheUnauthorizedTTL: "30s" } },
      evictionSoftGracePeriod: { "memory.available": "1m30s" },
      cpuCFSQuotaPeriod: "100ms",
      logging: { flushFrequency: "5s" },
      evictionHard: { "memory.available": "100Mi" },
    });
    expect(body.kubeletconfig).not.toHaveProperty("apiVersion");
    expect(body.kubeletconfig).not.toHaveProperty("kind");
    expect((await api(() => undefined).request("/configz")).status).toBe(404);
  });

  test("/run (POST only) answers the output; exec/attach/portForward without an upgrade are 400", async () => {
    const runs: [StreamingTarget, string[]][] = [];
    const streaming: StreamingResolver = {
      streamUrl: async () => "http://127.0.0.1:1/x",
      run: async (t, cmd) => {
        runs.push([t, cmd]);
        if (cmd[0] === "fail") throw new HttpError(500, "command 'fail' exited with 1: ");
        return new TextEncoder().encode("out\n");
      },
    };
    const app = api(() => undefined, { streaming });
    const ok = await app.request("/run/ns/p/u1/c?cmd=ls%20-l", { method: "POST" });
    expect([ok.status, await ok.text()]).toEqual([200, "out\n"]);
    expect(runs).toEqual([[{ kind: "run", namespace: "ns", pod: "p", uid: "u1", container: "c" }, ["ls", "-l"]]]);
    const failed = await app.request("/run/ns/p/c?cmd=fail", { method: "POST" });
    expect([failed.status, await failed.text()]).toEqual([500, "command 'fail' exited with 1: "]);
    expect((await app.request("/run/ns/p/c?cmd=ls")).status).toBe(404);
    for (const path of ["/exec/ns/p/c?command=ls&output=1", "/attach/ns/p/c?output=1", "/portForward/ns/p"]) {
      const res = await app.request(path, { method: "POST" });
      expect([res.status, await res.text()]).toEqual([400, "Upgrade request required"]);
    }
    expect((await app.request("/exec/ns/p", { method: "POST" })).status).toBe(404);
  });
});
