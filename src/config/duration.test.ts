import { describe, expect, test } from "bun:test";
import { formatDuration, parseDuration } from "./duration.ts";

describe("parseDuration (Go time.ParseDuration, in milliseconds)", () => {
  test.each([
    ["1m0s", 60_000],
    ["10s", 10_000],
    ["500ms", 500],
    ["1h30m", 5_400_000],
    ["1.5h", 5_400_000],
    [".5s", 500],
    ["1.s", 1000],
    ["0", 0],
    ["0s", 0],
    ["-1s", -1000],
    ["+2m", 120_000],
    ["1500us", 1.5],
    ["1500\u00b5s", 1.5],
    ["1500\u03bcs", 1.5],
    ["2000000ns", 2],
    ["0.1s", 100],
    ["4h0m0s", 14_400_000],
  ])("%p is %p ms", (input, ms) => {
    expect(parseDuration(input)).toBe(ms);
  });

  test.each([
    ["", "invalid duration"],
    ["10", "missing unit"],
    ["1d", 'unknown unit "d"'],
    ["s", "invalid duration"],
    [".s", "invalid duration"],
    ["1m 30s", "unknown unit"],
    ["abc", "invalid duration"],
    ["-", "invalid duration"],
    ["10000000h", "out of range"],
  ])("%p is refused (%s)", (input, message) => {
    expect(() => parseDuration(input)).toThrow(message);
  });
});

describe("formatDuration (Go Duration.String)", () => {
  test.each([
    [0, "0s"],
    [60_000, "1m0s"],
    [20_000, "20s"],
    [100, "100ms"],
    [1.5, "1.5ms"],
    [0.5, "500\u00b5s"],
    [14_400_000, "4h0m0s"],
    [5_400_000, "1h30m0s"],
    [1500, "1.5s"],
    [-1000, "-1s"],
  ])("%p ms is %p", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  test("round-trips through parseDuration", () => {
    for (const ms of [1, 999, 1000, 61_000, 3_600_000, 86_400_000, 0.25]) expect(parseDuration(formatDuration(ms))).toBe(ms);
  });
});
