import { describe, expect, test } from "bun:test";
import { isQuantity, parseQuantity, parseThreshold } from "./quantity.ts";

describe("parseQuantity", () => {
  test.each([
    ["100Mi", 100 * 2 ** 20],
    ["1Gi", 2 ** 30],
    ["1.5Gi", 1.5 * 2 ** 30],
    ["10Ki", 10240],
    ["1Ti", 2 ** 40],
    ["500m", 0.5],
    ["2", 2],
    ["1k", 1000],
    ["1M", 1e6],
    ["1G", 1e9],
    ["1E", 1e18],
    ["1e3", 1000],
    ["1E3", 1000],
    ["5e-3", 0.005],
    ["+1", 1],
    ["-1", -1],
    [".5", 0.5],
    ["0", 0],
  ])("%p is %p", (input, value) => {
    expect(parseQuantity(input)).toBeCloseTo(value, 9);
  });

  test.each(["", "lots", "10%", "1 Gi", "1gi", "Gi", "1.2.3", "1KB", "0x10"])("%p is not a quantity", (input) => {
    expect(isQuantity(input)).toBe(false);
    expect(() => parseQuantity(input)).toThrow("is not a quantity");
  });
});

describe("parseThreshold (eviction thresholds)", () => {
  test("quantities and percentages", () => {
    expect(parseThreshold("100Mi")).toEqual({ kind: "quantity", value: 100 * 2 ** 20 });
    expect(parseThreshold("10%")).toEqual({ kind: "percentage", fraction: 0.1 });
    expect(parseThreshold("0%")).toEqual({ kind: "percentage", fraction: 0 });
    expect(parseThreshold("100%")).toEqual({ kind: "percentage", fraction: 1 });
  });
  test.each([
    ["101%", "between 0% and 100%"],
    ["-1%", "between 0% and 100%"],
    ["x%", "not a percentage"],
    ["-1Gi", "must not be negative"],
    ["lots", "not a quantity"],
  ])("%p is refused (%s)", (input, message) => {
    expect(() => parseThreshold(input)).toThrow(message);
  });
});
