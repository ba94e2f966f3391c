import { describe, expect, test } from "bun:test";
import { decodeDocuments } from "./decode.ts";

describe("decodeDocuments", () => {
  test("parses JSON and YAML", () => {
    expect(decodeDocuments('{"a": 1}')).toEqual([{ a: 1 }]);
    expect(decodeDocuments("a: 1\nb: [x, z]\n")).toEqual([{ a: 1, b: ["x", "z"] }]);
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
    // The line and column are where an editor shows the fault.
    [
      "a mis-indented key",
      "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n     image: b\n",
      "invalid YAML at line 6, column 11: bad indentation of a mapping entry",
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
  test("plain scalars resolve as upstream's decoder (go-yaml v2, YAML 1.1) resolves them; quoted ones stay strings", () => {
    const [doc] = decodeDocuments(
      [
        "octal: 0644",
        "octal0o: 0o644",
        "hex: 0x1F",
        "binary: 0b101",
        "underscores: 1_000",
        "negative: -010",
        "decimal: 420",
        "zero: 0",
        "float: 1.5e3",
        "inf: -.inf",
        "isYes: yes",
        "isOn: On",
        "isN: n",
        "isOff: OFF",
        "isTrue: True",
        "isNull: ~",
        "empty:",
        "quoted: '0644'",
        'dquoted: "yes"',
        "word: yesterday",
        "version: 1.34.0",
        "date: 2026-11-24",
        "nine: 09",
        "list: [x, y]",
        "y: 1",
      ].join("\n"),
    );
    expect(doc).toEqual({
      octal: 420,
      octal0o: 420,
      hex: 31,
      binary: 5,
      underscores: 1000,
      negative: -8,
      decimal: 420,
      zero: 0,
      float: 1500,
      inf: -Infinity,
      isYes: true,
      isOn: true,
      isN: false,
      isOff: false,
      isTrue: true,
      isNull: null,
      empty: null,
      quoted: "0644",
      dquoted: "yes",
      word: "yesterday",
      version: "1.34.0",
      date: "2026-11-24",
      nine: 9, // not octal: go-yaml v2 falls back to a float
      list: ["x", true], // YAML 1.1's y is true, as upstream reads it
      true: 1, // so is a key y (JSON keys are strings)
    });
  });
  test("a static pod's defaultMode: 0644 is the file mode 0644", () => {
    const [pod] = decodeDocuments("spec:\n  volumes:\n    - name: v\n      downwardAPI:\n        defaultMode: 0644\n") as {
      spec: { volumes: { downwardAPI: { defaultMode: number } }[] };
    }[];
    expect(pod!.spec.volumes[0]!.downwardAPI.defaultMode).toBe(0o644);
  });
  test.each([
    ["a: 0644", { a: 420 }],
    ["a: -010", { a: -8 }],
    ["a: 0400 # mode", { a: 256 }],
    ["a: 1_000", { a: 1000 }],
    ["a: 0b11", { a: 3 }],
    ["a: yes", { a: true }],
    ["a: [1, on]", { a: [1, true] }],
    ["{a: off}", { a: false }],
    ["- n", [false]],
    ["y: 1", { true: 1 }],
    ["a:\n  - - No", { a: [[false]] }],
  ])("each YAML 1.1 scalar alone is read as upstream reads it: %s", (text, value) => {
    expect(decodeDocuments(text)).toEqual([value]);
  });
});
