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
  test.each([
    // Bun's own message names no place; the line and column are where an editor shows the fault.
    [
      "a mis-indented key",
      "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n     image: b\n",
      "invalid YAML at line 6, column 11: bad indentation of a mapping entry (Unexpected token)",
    ],
    ["a key after a value", "a: 1\nkey: value: other\n", "invalid YAML at line 2, column 11: bad indentation of a mapping entry"],
    ["an unclosed flow list", "a: 1\nb: [1, 2\nc: 3\n", "invalid YAML at line 3, column 1: missed comma between flow collection entries"],
    ["a tab as indentation", "a:\n\tb: 1\n", "invalid YAML at line 2, column 1: "],
    ["the second document of a stream", "a: 1\n---\nb: 2\n  c: 3\n", "invalid YAML at line 4, column 4: "],
  ])("a YAML syntax error says line and column: %s", (_name, text, message) => {
    expect(() => decodeDocuments(text)).toThrow(message);
  });
  test("duplicate keys stay accepted (the last wins, as with Bun and upstream's YAML-to-JSON)", () => {
    expect(decodeDocuments("a: 1\na: 2\n")).toEqual([{ a: 2 }]);
  });
});
