// procfs parsers on files captured from a build machine (testdata/v1) and
// hand-written ones (testdata/v2).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  cpuBusyNanoseconds,
  isIgnoredInterface,
  parseDefaultRouteInterface,
  parseDiskstats,
  parseLoadavg,
  parseMaxOpenFilesSoft,
  parseMeminfo,
  parseNetDev,
  parsePidMax,
  parseProcStat,
} from "./procfs.ts";

const fixture = (rel: string) => readFileSync(join(import.meta.dir, "testdata", rel), "utf8");

describe("/proc/stat", () => {
  test("the aggregate cpu line and btime of a captured file", () => {
    const s = parseProcStat(fixture("v1/proc/stat"));
    expect(s.cpu).toEqual({ user: 183848, nice: 0, system: 67534, idle: 664759, iowait: 2887, irq: 0, softirq: 1170, steal: 95 });
    expect(s.bootTimeSeconds).toBe(1795290771);
  });

  test("busy time: user nice system irq softirq steal, at 10 ms per jiffy; idle and iowait left out", () => {
    const t = { user: 100, nice: 1, system: 50, idle: 1_000_000, iowait: 99_999, irq: 2, softirq: 3, steal: 4 };
    expect(cpuBusyNanoseconds(t)).toBe(160 * 10_000_000);
  });

  test("a file without a cpu line gives no cpu", () => {
    expect(parseProcStat("intr 1 2 3\nbtime 5\n")).toEqual({ bootTimeSeconds: 5 });
  });
});

describe("/proc/meminfo", () => {
  test("kB values become bytes; keys with parentheses kept", () => {
    const m = parseMeminfo(fixture("v1/proc/meminfo"));
    expect(m.get("MemTotal")).toBe(24684084 * 1024);
    expect(m.get("MemAvailable")).toBeGreaterThan(0);
    expect(m.get("Inactive(file)")).toBeGreaterThanOrEqual(0);
    expect(m.get("HugePages_Total")).toBe(0); // a count, no unit
  });

  test("lines that are not `key: value` are skipped", () => {
    expect([...parseMeminfo("garbage\nMemTotal: 10 kB\nMemFree:\n")]).toEqual([["MemTotal", 10240]]);
  });
});

describe("/proc/loadavg and pid_max", () => {
  test("captured loadavg: running/total is runnable/threads", () => {
    expect(parseLoadavg(fixture("v1/proc/loadavg"))).toEqual({ load1: 0.64, load5: 0.58, load15: 1.13, running: 3, total: 96 });
  });

  test("malformed loadavg is undefined", () => {
    expect(parseLoadavg("0.1 0.2")).toBeUndefined();
  });

  test("pid_max", () => {
    expect(parsePidMax(fixture("v1/proc/sys/kernel/pid_max"))).toBe(32768);
    expect(parsePidMax("4194304\n")).toBe(4194304);
    expect(parsePidMax("")).toBeUndefined();
    expect(parsePidMax("x")).toBeUndefined();
  });
});

describe("/proc/net/dev and the default route", () => {
  test("captured: every interface with rx/tx bytes, packets, errors, drops", () => {
    const all = parseNetDev(fixture("v1/proc/net/dev"));
    expect(all.map((i) => i.name)).toEqual(["lo", "ifb0", "ifb1", "eth0"]);
    expect(all.find((i) => i.name === "eth0")).toEqual({
      name: "eth0",
      rxBytes: 1351920640,
      rxPackets: 53534,
      rxErrors: 0,
      rxDropped: 0,
      txBytes: 3985858,
      txPackets: 36523,
      txErrors: 0,
      txDropped: 0,
    });
  });

  test("hand-written: errors counted; a name glued to its colon (veth1a2b3c:  1000000) parsed", () => {
    const all = parseNetDev(fixture("v2/proc/net/dev"));
    expect(all.find((i) => i.name === "ens3")).toMatchObject({ rxBytes: 987654321, rxErrors: 2, txBytes: 123456789, txErrors: 1 });
    expect(all.find((i) => i.name === "veth1a2b3c")?.rxBytes).toBe(1000000);
    expect(all.filter((i) => !isIgnoredInterface(i.name)).map((i) => i.name)).toEqual(["ens3", "cni0"]);
  });

  test("default route interface: captured eth0, hand-written ens3 (cni0's /16 route is not default)", () => {
    expect(parseDefaultRouteInterface(fixture("v1/proc/net/route"))).toBe("eth0");
    expect(parseDefaultRouteInterface(fixture("v2/proc/net/route"))).toBe("ens3");
  });

  test("the lowest metric wins; a route that is not up is skipped; none gives undefined", () => {
    const header = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n";
    const route = (iface: string, flags: string, metric: number) => `${iface}\t00000000\t0102A8C0\t${flags}\t0\t0\t${metric}\t00000000\t0\t0\t0\n`;
    expect(parseDefaultRouteInterface(header + route("wlan0", "0003", 600) + route("eth1", "0003", 100))).toBe("eth1");
    expect(parseDefaultRouteInterface(header + route("eth1", "0002", 100))).toBeUndefined();
    expect(parseDefaultRouteInterface(header)).toBeUndefined();
  });
});

describe("/proc/diskstats and /proc/<pid>/limits (for /metrics/cadvisor)", () => {
  test("diskstats by major:minor: the 11 classic counters of a line captured on a build machine, newer columns ignored", () => {
    const text = [
      "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
      " 254       0 vda 3060324 186882 69198034 9355140 1691284 2154838 174869880 1642667 0 461420 11221221 1988241 1918 164143088 191479 288849 31934",
      "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11",
      "   8       1 sda1 1 2 3",
      "",
    ].join("\n");
    const d = parseDiskstats(text);
    expect(d.get("254:0")).toEqual({
      readsCompleted: 3060324,
      readsMerged: 186882,
      sectorsRead: 69198034,
      readTimeMs: 9355140,
      writesCompleted: 1691284,
      writesMerged: 2154838,
      sectorsWritten: 174869880,
      writeTimeMs: 1642667,
      ioInProgress: 0,
      ioTimeMs: 461420,
      weightedIoTimeMs: 11221221,
    });
    // Kernels before 4.18 have only the 11 counters.
    expect(d.get("8:0")?.weightedIoTimeMs).toBe(11);
    expect(d.has("8:1")).toBe(false);
    expect(d.get("7:0")?.readsCompleted).toBe(0);
  });

  test("the soft Max open files; unlimited is -1; a missing or malformed line is undefined", () => {
    const limits = (soft: string) =>
      [
        "Limit                     Soft Limit           Hard Limit           Units     ",
        "Max stack size            8388608              unlimited            bytes     ",
        `Max open files            ${soft}                32768                files     `,
        "",
      ].join("\n");
    expect(parseMaxOpenFilesSoft(limits("1024"))).toBe(1024);
    expect(parseMaxOpenFilesSoft(limits("unlimited"))).toBe(-1);
    expect(parseMaxOpenFilesSoft(limits("lots"))).toBeUndefined();
    expect(parseMaxOpenFilesSoft("Limit Soft Limit Hard Limit Units\n")).toBeUndefined();
  });
});
