import { describe, expect, test } from "bun:test";
import { RpcError } from "@protobuf-ts/runtime-rpc";
import { CriError, GrpcCode, codeForKind, isCriError, isNotFound, isUnavailable, kindForCode, toCriError, type CriErrorKind } from "./errors.ts";

describe("gRPC status to kind", () => {
  const table: [number, CriErrorKind][] = [
    [GrpcCode.NOT_FOUND, "NotFound"],
    [GrpcCode.UNAVAILABLE, "Unavailable"],
    [GrpcCode.DEADLINE_EXCEEDED, "DeadlineExceeded"],
    [GrpcCode.INVALID_ARGUMENT, "InvalidArgument"],
    [GrpcCode.ALREADY_EXISTS, "AlreadyExists"],
    [GrpcCode.RESOURCE_EXHAUSTED, "ResourceExhausted"],
    [GrpcCode.FAILED_PRECONDITION, "FailedPrecondition"],
    [GrpcCode.UNIMPLEMENTED, "Unimplemented"],
    [GrpcCode.CANCELLED, "Canceled"],
    [GrpcCode.UNKNOWN, "Unknown"],
    [GrpcCode.INTERNAL, "Unknown"],
    [GrpcCode.PERMISSION_DENIED, "Unknown"],
    [GrpcCode.ABORTED, "Unknown"],
    [GrpcCode.DATA_LOSS, "Unknown"],
  ];
  for (const [code, kind] of table) {
    test(`${code} -> ${kind}`, () => expect(kindForCode(code)).toBe(kind));
  }

  test("every kind has a canonical code that maps back to it", () => {
    for (const [, kind] of table) expect(kindForCode(codeForKind(kind))).toBe(kind);
  });
});

describe("toCriError", () => {
  test("protobuf-ts RpcError: code is the status name", () => {
    const e = toCriError(new RpcError("an error occurred when try to find container: not found", "NOT_FOUND"), "ContainerStatus", "abc");
    expect(e).toBeInstanceOf(CriError);
    expect([e.kind, e.code, e.method, e.target]).toEqual(["NotFound", 5, "ContainerStatus", "abc"]);
    expect(e.message).toBe("CRI ContainerStatus abc: NotFound: an error occurred when try to find container: not found");
    expect(e.cause).toBeInstanceOf(RpcError);
  });

  test("grpc-js ServiceError: numeric code and details", () => {
    const raw = Object.assign(new Error("14 UNAVAILABLE: connect ENOENT"), { code: 14, details: "connect ENOENT" });
    const e = toCriError(raw, "Version");
    expect([e.kind, e.code, e.detail, e.target]).toEqual(["Unavailable", 14, "connect ENOENT", undefined]);
    expect(e.message).toBe("CRI Version: Unavailable: connect ENOENT");
  });

  test("anything else is Unknown with its message; a CriError passes through", () => {
    const e = toCriError(new TypeError("boom"), "ListImages");
    expect([e.kind, e.code, e.detail]).toEqual(["Unknown", 2, "boom"]);
    expect(toCriError("text", "X").detail).toBe("text");
    expect(toCriError({ code: "NOT_A_CODE" }, "X").kind).toBe("Unknown");
    expect(toCriError({ code: 99 }, "X").kind).toBe("Unknown");
    const c = new CriError({ kind: "NotFound", method: "A", detail: "d" });
    expect(toCriError(c, "B")).toBe(c);
  });

  test("containerd still starting up (Unknown 'server is not initialized yet') counts as Unavailable", () => {
    const e = toCriError(new RpcError("server is not initialized yet", "UNKNOWN"), "Version");
    expect([e.kind, e.code]).toEqual(["Unavailable", 2]);
    expect(toCriError(new RpcError("server is not initialized yet!", "UNKNOWN"), "Version").kind).toBe("Unknown");
  });

  test("predicates", () => {
    const nf = new CriError({ kind: "NotFound", method: "A", detail: "d" });
    const un = new CriError({ kind: "Unavailable", method: "A", detail: "d" });
    expect([isNotFound(nf), isNotFound(un), isNotFound(new Error("not found"))]).toEqual([true, false, false]);
    expect([isUnavailable(un), isUnavailable(nf)]).toEqual([true, false]);
    expect([isCriError(nf), isCriError(nf, "NotFound"), isCriError(nf, "Unknown"), isCriError({})]).toEqual([true, true, false, false]);
    expect(nf.code).toBe(5);
    expect(nf.name).toBe("CriError");
  });
});
