import { describe, expect, test } from "bun:test";
import { decodeDocuments } from "./decode.ts";

describe("decodeDocuments", () => {
  test("parses JSON and YAML", () => {
    expect(decodeDocuments('{"a": 1}')).toEqual([{ a: 1 }]);
    expect(decodeDocuments("a: 1\nb: [x, y]\n")).toEqual([{ a: 1, b: ["x", "y"] }]);
  });
  test("splits multi-document YAML", () => {
    expect(decodeDocuments("---\na: 1\n---\nb: 2\n")).toEqual([{ a: 1 }, { b: 2 }]);
  });
  test("refuses aliases, including self references and billion laughs", () => {
    expect(() => decodeDocuments("a: &x [1]\nb: *x\n")).toThrow("aliases are not allowed");
    expect(() => decodeDocuments("a: &x [*x]\n")).toThrow("aliases are not allowed");
    const laughs = ['a: &a ["lol","lol"]'];
    for (let i = 1; i < 7; i++) laughs.push(`${"abcdefg"[i]}: &${"abcdefg"[i]} [*${"abcdefg"[i - 1]},*${"abcdefg"[i - 1]}]`);
    expect(() => decodeDocuments(laughs.join("\n"))).toThrow("aliases are not allowed");
  });
  test("bounds the input size", () => {
    expect(() => decodeDocuments("a: " + "x".repeat(100), { maxBytes: 50 })).toThrow("more than the limit of 50");
  });
  test("reports syntax errors", () => {
    expect(() => decodeDocuments("{bad json")).toThrow("invalid JSON");
    expect(() => decodeDocuments("a: [1, 2\nb: }")).toThrow("invalid YAML");
  });
});
