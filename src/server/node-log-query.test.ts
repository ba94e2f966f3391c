// NodeLogQuery on /logs/, in-process: every parameter validated (400 for
// what does not parse or is unknown, 406 for what upstream's validate()
// refuses, each naming the parameter), journalctl's arguments, the file
// heuristics for services not in the journal, and files under the log dir.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { journalctlArgs, parseNodeLogQuery, type Journal } from "./node-log-query.ts";
import { nodeLogsApp } from "./node-logs.ts";

let base: string;
let root: string;
beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), "nodelogquery-"));
  root = join(base, "var-log");
  mkdirSync(join(root, "kube-proxy"), { recursive: true });
  writeFileSync(join(root, "syslog"), "boot\nready\n");
  writeFileSync(join(root, "kube-proxy", "kube-proxy.log"), "proxy up\n");
  writeFileSync(join(root, "etcd.log"), "etcd up\n");
  writeFileSync(join(base, "secret"), "outside\n");
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** A journal with units `kubelet` and `containerd`; records the arguments it was run with. */
function fakeJournal() {
  const runs: string[][] = [];
  const journal: Journal = {
    hasUnit: async (s) => s === "kubelet" || s === "containerd",
    async *read(args) {
      runs.push(args);
      yield new TextEncoder().encode(`journal ${args.filter((a) => a.startsWith("--unit=")).join(" ")}\n`);
    },
  };
  return { journal, runs };
}

const app = (journal: Journal) => nodeLogsApp(root, { journal });

describe("NodeLogQuery parameters", () => {
  const bad400: [string, string][] = [
    ["/logs/?query=kubelet&since=1h", "since: Unsupported value: unknown query parameter"],
    ["/logs/?follow=true", "follow: Unsupported value"],
    ["/logs/?query=kubelet&sinceTime=yesterday", 'sinceTime: Invalid value: "yesterday": invalid time format'],
    ["/logs/?query=kubelet&untilTime=2026-01-01", 'untilTime: Invalid value: "2026-01-01": invalid time format'],
    ["/logs/?query=kubelet&tailLines=ten", 'tailLines: Invalid value: "ten": must be an integer'],
    ["/logs/?query=kubelet&tailLines=1.5", 'tailLines: Invalid value: "1.5": must be an integer'],
    ["/logs/?query=kubelet&boot=last", 'boot: Invalid value: "last": must be an integer'],
    ["/logs/?query=kubelet&pattern=(unclosed", 'pattern: Invalid value: "(unclosed": invalid regular expression'],
    ["/logs/?query=kubelet&tailLines=1&tailLines=2", 'tailLines: Invalid value: ["1","2"]: must be given once'],
    ["/logs/?query=%20%20", 'query: Invalid value: ["  "]: query cannot be empty'],
  ];
  for (const [url, message] of bad400) {
    test(`400 naming the parameter: ${url}`, async () => {
      const res = await app(fakeJournal().journal).request(url);
      expect(res.status).toBe(400);
      expect(await res.text()).toContain(message);
    });
  }

  const bad406: [string, string][] = [
    ["/logs/?tailLines=5", "query: Required value: cannot be empty with options"],
    ["/logs/?query=kubelet&tailLines=100001", "tailLines: Invalid value: 100001: must be between 0 and 100000, inclusive"],
    ["/logs/?query=kubelet&tailLines=-1", "tailLines: Invalid value: -1"],
    ["/logs/?query=kubelet&boot=1", "boot: Invalid value: 1: must be less than 1"],
    ["/logs/?query=kubelet&sinceTime=2026-01-02T00:00:00Z&untilTime=2026-01-01T00:00:00Z", 'untilTime: Invalid value: "2026-01-01T00:00:00.000Z": must be after `sinceTime`'],
    ["/logs/?query=kube$(reboot)", "input contains unsupported characters"],
    ["/logs/?query=a&query=b&query=c&query=d&query=e", "query: Too many: 5: must have at most 4 items"],
    ["/logs/?query=/syslog&query=kubelet", "cannot specify a file and service"],
    ["/logs/?query=/syslog&query=/etcd.log", "cannot specify more than one file"],
    ["/logs/?query=/syslog&tailLines=1", "cannot specify file with options"],
    ["/logs/?query=../secret", "no such file under the node's log directory"],
    ["/logs/syslog?query=kubelet", "path not allowed in query mode"],
  ];
  for (const [url, message] of bad406) {
    test(`406 as upstream's validate(): ${url}`, async () => {
      const res = await app(fakeJournal().journal).request(url);
      expect(res.status).toBe(406);
      expect(await res.text()).toContain(message);
    });
  }

  test("no parameters: the directory and files as before", async () => {
    const a = app(fakeJournal().journal);
    expect(await (await a.request("/logs/syslog")).text()).toBe("boot\nready\n");
    expect((await a.request("/logs/")).status).toBe(200);
    expect(parseNodeLogQuery(new URLSearchParams(""))).toBeUndefined();
  });
});

describe("NodeLogQuery answers", () => {
  test("journald units through journalctl with every option as upstream passes it", async () => {
    const { journal, runs } = fakeJournal();
    const res = await app(journal).request(
      "/logs/?query=kubelet&query=containerd&sinceTime=2026-01-02T03:04:05Z&untilTime=2026-01-02T04:00:00Z&tailLines=10&pattern=err.r&boot=-1",
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await res.text()).toBe("journal --unit=kubelet --unit=containerd\n");
    expect(runs).toEqual([
      [
        "--utc",
        "--no-pager",
        "--since=2026-1-2 3:4:5",
        "--until=2026-1-2 4:0:0",
        "--pager-end",
        "--lines=10",
        "--unit=kubelet",
        "--unit=containerd",
        "--grep=err.r",
        "--boot",
        "-1",
        "--output=short-precise",
      ],
    ]);
  });

  test("a service not in the journal: /var/log/<s>, <s>.log, <s>/<s>.log; not found says so", async () => {
    const a = app(fakeJournal().journal);
    expect(await (await a.request("/logs/?query=etcd")).text()).toBe("etcd up\n");
    expect(await (await a.request("/logs/?query=kube-proxy")).text()).toBe("proxy up\n");
    expect(await (await a.request("/logs/?query=syslog")).text()).toBe("boot\nready\n");
    expect(await (await a.request("/logs/?query=nothing")).text()).toBe("\nlog not found for nothing\n");
    expect(await (await a.request("/logs/?query=etcd&tailLines=1")).text()).toBe("\noptions present and query resolved to log files for [etcd]\ntry without specifying options\n");
  });

  test("a file query reads the file under the log directory", async () => {
    const a = app(fakeJournal().journal);
    expect(await (await a.request("/logs/?query=/kube-proxy/kube-proxy.log")).text()).toBe("proxy up\n");
    expect(await (await a.request("/logs/?query=kube-proxy\\kube-proxy.log")).text()).toBe("proxy up\n");
  });

  test("journalctl arguments without options", () => {
    expect(journalctlArgs({ services: ["kubelet"], files: [] }, ["kubelet"])).toEqual(["--utc", "--no-pager", "--unit=kubelet", "--output=short-precise"]);
  });
});
