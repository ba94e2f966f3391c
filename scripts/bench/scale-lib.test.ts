import { describe, expect, test } from "bun:test";
import { delta, groups, hollowNodeName, LagMeter, leaseAges, parseHollowNodeName, parseMicroTime, parsePrometheus, quantile, sumBy, verbResource } from "./scale-lib.ts";

describe("hollow node names", () => {
  test("are DNS labels, padded so name order is index order, and read back", () => {
    const names = Array.from({ length: 120 }, (_, i) => hollowNodeName("bunlet", i));
    expect(names[7]).toBe("hollow-bunlet-007");
    expect(hollowNodeName("upstream", 99)).toBe("hollow-upstream-099");
    expect(new Set(names).size).toBe(120);
    expect([...names].sort()).toEqual(names);
    for (const n of names) expect(n).toMatch(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
    expect(names.map(parseHollowNodeName).map((p) => p?.index)).toEqual(names.map((_, i) => i));
    expect(parseHollowNodeName("hollow-upstream-042")).toEqual({ kind: "upstream", index: 42 });
    expect(parseHollowNodeName("bunlet-node")).toBeUndefined();
    expect(parseHollowNodeName("hollow-bunlet-7")).toBeUndefined();
  });

  test("refuse an index that does not fit the scheme", () => {
    expect(() => hollowNodeName("bunlet", -1)).toThrow(RangeError);
    expect(() => hollowNodeName("bunlet", 1000)).toThrow(RangeError);
    expect(() => hollowNodeName("bunlet", 1.5)).toThrow(RangeError);
  });

  test("groups split the agents among processes, none empty, none overlapping", () => {
    expect(groups(100, 50)).toEqual([
      { first: 0, count: 50 },
      { first: 50, count: 50 },
    ]);
    expect(groups(7, 3)).toEqual([
      { first: 0, count: 3 },
      { first: 3, count: 3 },
      { first: 6, count: 1 },
    ]);
    expect(groups(0, 3)).toEqual([]);
    expect(() => groups(5, 0)).toThrow(RangeError);
  });
});

describe("Prometheus text", () => {
  const text = [
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
    "# TYPE apiserver_request_total counter",
    'apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 360',
    'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 12',
    'apiserver_request_total{code="409",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 2',
    'apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 3',
    "",
    'weird{path="a\\"b\\\\c\\nd",empty=""} 1.5e3 1700000000000',
    "process_cpu_seconds_total 12.25",
    'apiserver_response_sizes_bucket{le="+Inf",resource="leases",verb="PUT"} +Inf',
    "nan_metric NaN",
  ].join("\n");

  test("samples with labels, escapes, timestamps and special values", () => {
    const s = parsePrometheus(text);
    expect(s).toHaveLength(8);
    expect(s[0]).toEqual({
      name: "apiserver_request_total",
      labels: {
        code: "200",
        component: "apiserver",
        dry_run: "",
        group: "coordination.k8s.io",
        resource: "leases",
        scope: "resource",
        subresource: "",
        verb: "PUT",
        version: "v1",
      },
      value: 360,
    });
    expect(s[4]).toEqual({ name: "weird", labels: { path: 'a"b\\c\nd', empty: "" }, value: 1500 });
    expect(s[5]).toEqual({ name: "process_cpu_seconds_total", labels: {}, value: 12.25 });
    expect(s[6]!.value).toBe(Number.POSITIVE_INFINITY);
    expect(s[7]!.value).toBeNaN();
  });

  test("summed by verb and resource, codes together", () => {
    const by = sumBy(parsePrometheus(text), "apiserver_request_total", verbResource);
    expect(by).toEqual(
      new Map([
        ["put leases", 362],
        ["patch nodes/status", 12],
        ["watch pods", 3],
      ]),
    );
    expect(sumBy(parsePrometheus(text), "apiserver_request_total", (l) => (l.code === "200" ? "ok" : undefined))).toEqual(new Map([["ok", 372]]));
  });

  test("a line that is not a sample is an error, not a zero", () => {
    expect(() => parsePrometheus("apiserver_request_total{verb=PUT} 1")).toThrow(/bad label/);
    expect(() => parsePrometheus('x{a="b} 1')).toThrow(/unterminated/);
    expect(() => parsePrometheus("x")).toThrow(/no value/);
    expect(() => parsePrometheus("x abc")).toThrow(/no value/);
  });

  test("delta of counters: new keys count from zero", () => {
    const d = delta(
      new Map([
        ["a", 10],
        ["gone", 4],
      ]),
      new Map([
        ["a", 25],
        ["b", 3],
      ]),
    );
    expect(d).toEqual(
      new Map([
        ["a", 15],
        ["b", 3],
        ["gone", -4],
      ]),
    );
  });
});

describe("leases and lag", () => {
  test("MicroTime keeps microseconds to the millisecond's fraction", () => {
    expect(parseMicroTime("2026-11-24T17:40:00.123456Z")).toBeCloseTo(Date.UTC(2026, 10, 24, 17, 40, 0) + 123.456, 6);
    expect(parseMicroTime("2026-11-24T17:40:00Z")).toBe(Date.UTC(2026, 10, 24, 17, 40, 0));
    expect(parseMicroTime("2026-11-24T18:40:00.5+01:00")).toBe(Date.UTC(2026, 10, 24, 17, 40, 0) + 500);
    expect(parseMicroTime("yesterday")).toBeNaN();
  });

  test("lease ages: only the wanted ones, a lease never renewed is infinitely old", () => {
    const now = Date.UTC(2026, 10, 24, 17, 40, 10);
    const ages = leaseAges(
      [
        { metadata: { name: "hollow-bunlet-000" }, spec: { renewTime: "2026-11-24T17:40:02.000000Z" } },
        { metadata: { name: "hollow-bunlet-001" }, spec: {} },
        { metadata: { name: "kube-controller-manager" }, spec: { renewTime: "2026-11-24T17:30:00.000000Z" } },
      ],
      now,
      (n) => parseHollowNodeName(n) !== undefined,
    );
    expect(ages).toEqual(
      new Map([
        ["hollow-bunlet-000", 8000],
        ["hollow-bunlet-001", Number.POSITIVE_INFINITY],
      ]),
    );
  });

  test("quantiles by nearest rank", () => {
    const v = Array.from({ length: 100 }, (_, i) => 100 - i); // 100..1, unsorted
    expect(quantile(v, 0.5)).toBe(50);
    expect(quantile(v, 0.99)).toBe(99);
    expect(quantile(v, 1)).toBe(100);
    expect(quantile([7], 0.99)).toBe(7);
    expect(quantile([], 0.5)).toBeNaN();
  });

  test("lag meter: lateness of each tick within a window, early ticks count as 0", () => {
    const m = new LagMeter();
    m.record(1000, 1002);
    m.record(2000, 2150);
    m.record(3000, 2999);
    m.record(4000, 4010);
    expect(m.summary()).toEqual({ ticks: 4, p50: 2, p99: 150, max: 150 });
    expect(m.summary(3000, 5000)).toEqual({ ticks: 1, p50: 10, p99: 10, max: 10 });
    m.drop(2500);
    expect(m.summary().ticks).toBe(2);
    expect(m.summary(9000).max).toBeNaN();
  });
});
