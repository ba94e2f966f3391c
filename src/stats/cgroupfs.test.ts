// cgroup v1 / v2 parsers and the reader, on the captured v1 tree and the
// hand-written v2 tree in testdata/ (their README says where each came from).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCgroupReader, detectCgroupVersion } from "./cgroup-reader.ts";
import {
  parsePressure,
  cpuSpecFromV1,
  cpuSpecFromV2,
  parseBlkioByDevice,
  parseIoStatByDevice,
  cpuFromV1,
  cpuFromV2,
  memoryFromV1,
  memoryFromV2,
  parseBlkioServiceBytes,
  parseFlatKeyed,
  parseIoStat,
  parseMemoryLimit,
  specMemoryValue,
  parseSingleValue,
} from "./cgroupfs.ts";

const root = (v: "v1" | "v2") => join(import.meta.dir, "testdata", v);
const v1 = (ctrl: string, rel: string) => readFileSync(join(root("v1"), "sys/fs/cgroup", ctrl, rel), "utf8");
const v2 = (rel: string) => readFileSync(join(root("v2"), "sys/fs/cgroup", rel), "utf8");

describe("small files", () => {
  test("single values, 'max', limits above 2^62 are unlimited", () => {
    expect(parseSingleValue("52428800\n")).toBe(52428800);
    expect(parseSingleValue("max\n")).toBeUndefined();
    expect(parseSingleValue("")).toBeUndefined();
    expect(parseMemoryLimit("max\n")).toBeUndefined();
    expect(parseMemoryLimit("134217728\n")).toBe(134217728);
    // v1's "no limit" is PAGE_COUNTER_MAX pages, captured:
    expect(parseMemoryLimit(v1("memory", "kubepods/podtest/memory.limit_in_bytes"))).toBeUndefined();
  });

  test("flat keyed files skip lines without a number", () => {
    expect([...parseFlatKeyed("a 1\nb x\n\nc 3\n")]).toEqual([
      ["a", 1],
      ["c", 3],
    ]);
  });
});

describe("cpu", () => {
  test("v1 captured pod: cpuacct.usage in ns, cpu.stat throttling", () => {
    expect(cpuFromV1(v1("cpuacct", "kubepods/podtest/cpuacct.usage"), v1("cpu", "kubepods/podtest/cpu.stat"))).toEqual({
      usageNanoseconds: 1216755603,
      nrPeriods: 0,
      nrThrottled: 0,
      throttledNanoseconds: 0,
    });
  });

  test("v1 throttled_time is already ns", () => {
    expect(cpuFromV1("10\n", "nr_periods 9\nnr_throttled 4\nthrottled_time 123456\n")).toMatchObject({ nrThrottled: 4, throttledNanoseconds: 123456 });
  });

  test("v2 pod: usage_usec and throttled_usec become ns", () => {
    expect(cpuFromV2(v2("kubepods/podtest/cpu.stat"))).toEqual({
      usageNanoseconds: 2_500_000_000,
      nrPeriods: 1200,
      nrThrottled: 34,
      throttledNanoseconds: 1_700_000_000,
      userNanoseconds: 2_000_000_000,
      systemNanoseconds: 500_000_000,
    });
  });

  test("v2 root has no throttling keys", () => {
    expect(cpuFromV2(v2("cpu.stat"))).toEqual({
      usageNanoseconds: 81234567890000,
      nrPeriods: undefined,
      nrThrottled: undefined,
      throttledNanoseconds: undefined,
      userNanoseconds: 60000000000000,
      systemNanoseconds: 21234567890000,
    });
  });

  test("a file without usage gives nothing", () => {
    expect(cpuFromV2("nr_periods 1\n")).toBeUndefined();
    expect(cpuFromV1("", undefined)).toBeUndefined();
  });
});

describe("memory", () => {
  test("v1 captured pod: total_* keys, working set = usage - total_inactive_file, oom_kill", () => {
    const m = memoryFromV1({
      usage: v1("memory", "kubepods/podtest/memory.usage_in_bytes"),
      stat: v1("memory", "kubepods/podtest/memory.stat"),
      limit: v1("memory", "kubepods/podtest/memory.limit_in_bytes"),
      oomControl: v1("memory", "kubepods/podtest/memory.oom_control"),
    });
    // The pod's own counters are 0 (its processes are in the container
    // child cgroup): only the total_* keys are right.
    expect(m).toEqual({
      usageBytes: 21741568,
      workingSetBytes: 21741568,
      rssBytes: 20172800,
      pageFaults: 11499,
      majorPageFaults: 0,
      limitBytes: undefined,
      oomKills: 0,
      cacheBytes: 4096,
      mappedFileBytes: 0,
      swapBytes: 0,
      statPgfault: 0,
      statPgmajfault: 0,
      activeFileBytes: 4096,
      inactiveFileBytes: 0,
    });
  });

  test("v1 captured root: inactive file pages are taken off", () => {
    const m = memoryFromV1({ usage: v1("memory", "memory.usage_in_bytes"), stat: v1("memory", "memory.stat") })!;
    const stat = parseFlatKeyed(v1("memory", "memory.stat"));
    expect(stat.get("total_inactive_file")).toBeGreaterThan(0);
    expect(m.workingSetBytes).toBe(m.usageBytes - stat.get("total_inactive_file")!);
  });

  test("v1 without total_* (use_hierarchy off on old kernels) reads the local keys", () => {
    expect(
      memoryFromV1({ usage: "1000", stat: "rss 600\ninactive_file 300\npgfault 7\npgmajfault 1\n", limit: "4096\n", oomControl: "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n" }),
    ).toEqual({
      usageBytes: 1000,
      workingSetBytes: 700,
      rssBytes: 600,
      pageFaults: 7,
      majorPageFaults: 1,
      limitBytes: 4096,
      oomKills: 2,
      cacheBytes: undefined,
      mappedFileBytes: undefined,
      swapBytes: undefined,
      statPgfault: 7,
      statPgmajfault: 1,
    });
  });

  test("per device I/O, CFS spec of both versions (v2 weight back to shares, as cAdvisor)", () => {
    expect(parseIoStatByDevice("8:0 rbytes=10 wbytes=20 rios=1\n253:1 rbytes=5 wbytes=0\n")).toEqual([
      { major: 8, minor: 0, readBytes: 10, writeBytes: 20 },
      { major: 253, minor: 1, readBytes: 5, writeBytes: 0 },
    ]);
    expect(parseBlkioByDevice("8:0 Read 10\n8:0 Write 20\n8:0 Total 30\n8:16 Read 1\nTotal 31\n")).toEqual([
      { major: 8, minor: 0, readBytes: 10, writeBytes: 20 },
      { major: 8, minor: 16, readBytes: 1, writeBytes: 0 },
    ]);
    expect(cpuSpecFromV1("100000\n", "-1\n", "1024\n")).toEqual({ cpuPeriodUs: 100000, cpuQuotaUs: 0, cpuShares: 1024 });
    expect(cpuSpecFromV1("100000\n", "25000\n", "2\n")).toEqual({ cpuPeriodUs: 100000, cpuQuotaUs: 25000, cpuShares: 2 });
    expect(cpuSpecFromV2("max 100000\n", "100\n")).toEqual({ cpuPeriodUs: 100000, cpuQuotaUs: 0, cpuShares: 2597 });
    expect(cpuSpecFromV2("25000 100000\n", "1\n")).toEqual({ cpuPeriodUs: 100000, cpuQuotaUs: 25000, cpuShares: 2 });
    expect(cpuFromV1("10\n", undefined, "user 250\nsystem 50\n")).toMatchObject({ userNanoseconds: 2.5e9, systemNanoseconds: 0.5e9 });
  });

  test("working set never goes below zero", () => {
    expect(memoryFromV1({ usage: "100", stat: "total_inactive_file 400\n" })!.workingSetBytes).toBe(0);
  });

  test("v2 pod: memory.current - inactive_file, anon as rss, memory.max, memory.events oom_kill", () => {
    expect(
      memoryFromV2({
        current: v2("kubepods/podtest/memory.current"),
        stat: v2("kubepods/podtest/memory.stat"),
        max: v2("kubepods/podtest/memory.max"),
        events: v2("kubepods/podtest/memory.events"),
      }),
    ).toEqual({
      usageBytes: 52428800,
      workingSetBytes: 52428800 - 4194304,
      rssBytes: 41943040,
      pageFaults: 12000,
      majorPageFaults: 3,
      limitBytes: 134217728,
      oomKills: 1,
      cacheBytes: 10485760,
      mappedFileBytes: 1048576,
      failcnt: 5,
      statPgfault: 12000,
      statPgmajfault: 3,
      activeFileBytes: 6291456,
      inactiveFileBytes: 4194304,
      kernelBytes: 2097152,
    });
  });

  test("v2 root (no memory.current): usage = anon + file, as runc", () => {
    const m = memoryFromV2({ stat: v2("memory.stat") })!;
    expect(m.usageBytes).toBe(1073741824 + 2147483648);
    expect(m.workingSetBytes).toBe(1073741824 + 2147483648 - 536870912);
    expect(m.limitBytes).toBeUndefined();
  });
});

describe("io", () => {
  test("v2 io.stat sums rbytes / wbytes over devices", () => {
    expect(parseIoStat(v2("io.stat"))).toEqual({ readBytes: 1073741824 + 4096, writeBytes: 2147483648 });
  });

  test("v1 blkio: captured (idle) and a busy one in the kernel's format", () => {
    expect(parseBlkioServiceBytes(v1("blkio", "kubepods/podtest/blkio.throttle.io_service_bytes"))).toEqual({ readBytes: 0, writeBytes: 0 });
    const busy = ["8:0 Read 4096", "8:0 Write 8192", "8:0 Sync 12288", "8:0 Async 0", "8:0 Discard 0", "8:0 Total 12288", "8:16 Read 1", "8:16 Write 2", "Total 12291", ""].join(
      "\n",
    );
    expect(parseBlkioServiceBytes(busy)).toEqual({ readBytes: 4097, writeBytes: 8194 });
  });
});

describe("reader", () => {
  test("version: v1 hybrid (no cgroup.controllers at the top) and v2", () => {
    expect(detectCgroupVersion(root("v1"))).toBe("v1");
    expect(detectCgroupVersion(root("v2"))).toBe("v2");
  });

  test("v1 pod cgroup across the cpu, cpuacct, memory, blkio and pids hierarchies", () => {
    const r = createCgroupReader({ fsRoot: root("v1") });
    expect(r.version).toBe("v1");
    expect(r.read("/kubepods/podtest", { io: true })).toEqual({
      cpu: { usageNanoseconds: 1216755603, nrPeriods: 0, nrThrottled: 0, throttledNanoseconds: 0 },
      memory: {
        usageBytes: 21741568,
        workingSetBytes: 21741568,
        rssBytes: 20172800,
        pageFaults: 11499,
        majorPageFaults: 0,
        limitBytes: undefined,
        oomKills: 0,
        cacheBytes: 4096,
        mappedFileBytes: 0,
        swapBytes: 0,
        statPgfault: 0,
        statPgmajfault: 0,
        activeFileBytes: 4096,
        inactiveFileBytes: 0,
      },
      pids: 2,
      io: { readBytes: 0, writeBytes: 0 },
    });
  });

  test("v1 root: cpu and memory, no pids.current there", () => {
    const s = createCgroupReader({ fsRoot: root("v1") }).read("/")!;
    expect(s.cpu?.usageNanoseconds).toBeGreaterThan(0);
    expect(s.memory?.usageBytes).toBeGreaterThan(0);
    expect(s.pids).toBeUndefined();
  });

  test("v2 pod cgroup", () => {
    const r = createCgroupReader({ fsRoot: root("v2") });
    expect(r.read("/kubepods/podtest", { io: true })).toEqual({
      cpu: {
        usageNanoseconds: 2_500_000_000,
        nrPeriods: 1200,
        nrThrottled: 34,
        throttledNanoseconds: 1_700_000_000,
        userNanoseconds: 2_000_000_000,
        systemNanoseconds: 500_000_000,
      },
      memory: {
        usageBytes: 52428800,
        workingSetBytes: 48234496,
        rssBytes: 41943040,
        pageFaults: 12000,
        majorPageFaults: 3,
        limitBytes: 134217728,
        oomKills: 1,
        cacheBytes: 10485760,
        mappedFileBytes: 1048576,
        failcnt: 5,
        statPgfault: 12000,
        statPgmajfault: 3,
        activeFileBytes: 6291456,
        inactiveFileBytes: 4194304,
        kernelBytes: 2097152,
      },
      pids: 7,
      io: { readBytes: 65536, writeBytes: 1048576 },
    });
    expect(r.read("/kubepods/podtest")?.io).toBeUndefined();
  });

  test("detail, v1: kernel and peak memory, swap and soft limits, the process ids", () => {
    const s = createCgroupReader({ fsRoot: root("v1") }).read("/kubepods/podtest", { detail: true })!;
    expect(s.memory).toMatchObject({ kernelBytes: 2359296, maxUsageBytes: 25165824, failcnt: 0 });
    // memsw and the soft limit at the kernel's "none": 0, as cAdvisor's specMemoryValue.
    expect(s.spec).toMatchObject({ memoryLimitBytes: 0, memorySwapLimitBytes: 0, memoryReservationBytes: 0 });
    expect(s.processIds).toBeUndefined(); // the captured pod has no cgroup.procs
  });

  test("detail, v2: memory.peak, memory.min, memory.swap.max; the root has no memory spec", () => {
    const r = createCgroupReader({ fsRoot: root("v2") });
    const s = r.read("/kubepods/podtest", { detail: true })!;
    expect(s.memory).toMatchObject({ kernelBytes: 2097152, maxUsageBytes: 58720256 });
    expect(s.spec).toMatchObject({ memoryLimitBytes: 134217728, memorySwapLimitBytes: 0, memoryReservationBytes: 0 });
    expect(s.psi).toBeUndefined(); // pressure is the psi option's
    const rootStats = r.read("/", { detail: true })!;
    expect(rootStats.spec?.memoryLimitBytes).toBeUndefined();
    expect(rootStats.memory?.maxUsageBytes).toBeUndefined();
  });

  test("spec memory values", () => {
    expect(specMemoryValue("max\n")).toBe(0);
    expect(specMemoryValue(undefined)).toBe(0);
    expect(specMemoryValue("9223372036854771712\n")).toBe(0);
    expect(specMemoryValue("33554432\n")).toBe(33554432);
  });

  test("a cgroup that does not exist reads as undefined, in both versions", () => {
    expect(createCgroupReader({ fsRoot: root("v1") }).read("/kubepods/gone")).toBeUndefined();
    expect(createCgroupReader({ fsRoot: root("v2") }).read("/kubepods/gone")).toBeUndefined();
  });

  test("v1 with cpu and cpuacct co-mounted as cpu,cpuacct", () => {
    const dir = mkdtempSync(join(tmpdir(), "stats-comount-"));
    try {
      const pod = join(dir, "sys/fs/cgroup/cpu,cpuacct/kubepods/p");
      mkdirSync(pod, { recursive: true });
      writeFileSync(join(pod, "cpuacct.usage"), "42\n");
      writeFileSync(join(pod, "cpu.stat"), "nr_periods 1\nnr_throttled 1\nthrottled_time 5\n");
      expect(createCgroupReader({ fsRoot: dir, version: "v1" }).read("/kubepods/p")).toEqual({
        cpu: { usageNanoseconds: 42, nrPeriods: 1, nrThrottled: 1, throttledNanoseconds: 5 },
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("pressure files (PSI)", () => {
  test("some and full lines: percentages and the cumulative microseconds", () => {
    expect(parsePressure("some avg10=0.12 avg60=0.05 avg300=0.01 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7890\n")).toEqual({
      some: { avg10: 0.12, avg60: 0.05, avg300: 0.01, total: 123456 },
      full: { avg10: 0, avg60: 0, avg300: 0, total: 7890 },
    });
  });

  test("the system cpu file of an older kernel has no full line: zeros", () => {
    expect(parsePressure("some avg10=1.00 avg60=2.00 avg300=3.00 total=4\n")?.full).toEqual({ avg10: 0, avg60: 0, avg300: 0, total: 0 });
  });

  test("nothing parsable is undefined; an incomplete line is skipped", () => {
    expect(parsePressure("")).toBeUndefined();
    expect(parsePressure("some avg10=1.00 total=4\n")).toBeUndefined();
    expect(parsePressure("some avg10=x avg60=1 avg300=1 total=1\nfull avg10=1 avg60=1 avg300=1 total=2\n")).toEqual({
      some: { avg10: 0, avg60: 0, avg300: 0, total: 0 },
      full: { avg10: 1, avg60: 1, avg300: 1, total: 2 },
    });
  });
});
