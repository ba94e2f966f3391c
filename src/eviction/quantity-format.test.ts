import { expect, test } from "bun:test";
import { canonicalQuantity, formatQuantity, quantityFormatOf } from "./quantity-format.ts";

// Expected strings are what resource.Quantity.String() prints upstream.
test.each([
  [52428800, "BinarySI", "50Mi"],
  [104857600, "BinarySI", "100Mi"],
  [1073741824, "BinarySI", "1Gi"],
  [1536 * 1024 * 1024, "BinarySI", "1536Mi"],
  [1000000, "BinarySI", "1000000"], // not a multiple of 1024: plain number
  [1023, "BinarySI", "1023"], // below 1024 prints as DecimalSI
  [2048, "BinarySI", "2Ki"],
  [0, "BinarySI", "0"],
  [-2048, "BinarySI", "-2Ki"],
  [50000, "DecimalSI", "50k"],
  [1500, "DecimalSI", "1500"],
  [2500000, "DecimalSI", "2500k"],
  [1e9, "DecimalSI", "1G"],
  [0.5, "DecimalSI", "500m"],
  [1000, "DecimalExponent", "1e3"],
  [1500, "DecimalExponent", "1500"],
] as const)("formatQuantity(%p, %s) = %s", (value, format, want) => {
  expect(formatQuantity(value, format)).toBe(want);
});

test.each([
  ["100Mi", "100Mi"],
  ["1024Mi", "1Gi"],
  ["128M", "128M"],
  ["1000k", "1M"],
  ["100", "100"],
  [100, "100"],
  ["1e3", "1e3"],
] as const)("canonicalQuantity(%p) = %s", (input, want) => {
  expect(canonicalQuantity(input)).toBe(want);
});

test("the format follows the suffix, as upstream's ParseQuantity", () => {
  expect(quantityFormatOf("1Gi")).toBe("BinarySI");
  expect(quantityFormatOf("1G")).toBe("DecimalSI");
  expect(quantityFormatOf("5E")).toBe("DecimalSI");
  expect(quantityFormatOf("5e6")).toBe("DecimalExponent");
  expect(quantityFormatOf(5)).toBe("DecimalSI");
});
