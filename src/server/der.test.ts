import { describe, expect, test } from "bun:test";
import { bitString, encodeLength, explicit, namedBits, oid, pem, sequence, smallInteger, time, unsignedInteger, utf8String } from "./der.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("DER encoding", () => {
  test.each([
    [0, "00"],
    [127, "7f"],
    [128, "8180"],
    [255, "81ff"],
    [256, "820100"],
    [65_536, "83010000"],
  ])("length %d", (n, want) => {
    expect(hex(encodeLength(n))).toBe(want);
  });

  test.each([
    ["2.5.4.3", "0603550403"],
    ["1.2.840.10045.4.3.2", "06082a8648ce3d040302"],
    ["1.3.6.1.5.5.7.3.1", "06082b06010505070301"],
    ["2.5.29.17", "0603551d11"],
    ["2.999.3", "0603883703"],
  ])("OID %s", (dotted, want) => {
    expect(hex(oid(dotted))).toBe(want);
  });

  test("invalid OIDs are refused", () => {
    for (const bad of ["1", "3.1", "1.40", "1.x.3", ""]) expect(() => oid(bad)).toThrow("invalid OID");
  });

  test("INTEGER: minimal, positive, padded when the high bit is set", () => {
    expect(hex(unsignedInteger(Uint8Array.of(0, 0, 1)))).toBe("020101");
    expect(hex(unsignedInteger(Uint8Array.of(0x80)))).toBe("02020080");
    expect(hex(unsignedInteger(Uint8Array.of()))).toBe("020100");
    expect(hex(smallInteger(2))).toBe("020102");
    expect(hex(smallInteger(0))).toBe("020100");
    expect(hex(smallInteger(300))).toBe("0202012c");
  });

  test("BIT STRINGs: whole bytes, and named bits with the unused count (KeyUsage)", () => {
    expect(hex(bitString(Uint8Array.of(0xab)))).toBe("030200ab");
    expect(hex(namedBits([0, 5]))).toBe("03020284"); // digitalSignature, keyCertSign
    expect(hex(namedBits([0, 2]))).toBe("030205a0"); // digitalSignature, keyEncipherment
    expect(hex(namedBits([8]))).toBe("0303070080"); // decipherOnly
  });

  test("Time: UTCTime through 2049, GeneralizedTime from 2050", () => {
    expect(Buffer.from(time(Date.UTC(2026, 10, 21, 22, 5, 9, 999))).toString("latin1")).toBe("\x17\x0d261121220509Z");
    expect(Buffer.from(time(Date.UTC(2050, 0, 1))).toString("latin1")).toBe("\x18\x0f20500101000000Z");
  });

  test("constructed values nest, with long lengths", () => {
    const long = utf8String("x".repeat(200));
    expect(hex(sequence(long)).slice(0, 12)).toBe("3081cb0c81c8");
    expect(hex(explicit(3, Uint8Array.of(5, 0)))).toBe("a3020500");
  });

  test("PEM: 64-column base64 between the labels", () => {
    const text = pem("CERTIFICATE", new Uint8Array(100).fill(1));
    const lines = text.trim().split("\n");
    expect(lines[0]).toBe("-----BEGIN CERTIFICATE-----");
    expect(lines.at(-1)).toBe("-----END CERTIFICATE-----");
    expect(lines.slice(1, -1).map((l) => l.length)).toEqual([64, 64, 8]); // 100 bytes are 136 base64 characters
  });
});
