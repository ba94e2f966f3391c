// createKubeApi's TokenRequest call against a scripted RestClient: what it
// returns of the API server's answer (the real server's side is
// test/integration/volumes.test.ts's projected token).
import { describe, expect, test } from "bun:test";
import { createKubeApi } from "./index.ts";
import type { TokenRequestSpec } from "./index.ts";
import type { RestClient } from "./rest.ts";

function answering(answer: unknown) {
  const calls: { verb: string; path: string; body?: unknown }[] = [];
  const rest: RestClient = {
    server: "https://api",
    async request<T>(verb: string, path: string, o: { body?: unknown } = {}) {
      calls.push({ verb, path, body: o.body });
      return structuredClone(answer) as T;
    },
    requestBytes: async () => {
      throw new Error("not used");
    },
    watch: async () => {},
    close() {},
    [Symbol.dispose]() {},
  };
  return { api: createKubeApi(rest), calls };
}

const spec: TokenRequestSpec = { audiences: [], expirationSeconds: 172_800, boundObjectRef: { apiVersion: "v1", kind: "Pod", name: "p", uid: "u" } };

describe("createToken", () => {
  test("returns the lifetime the server granted (its answer's spec.expirationSeconds, capped below the one asked for)", async () => {
    const { api, calls } = answering({ spec: { ...spec, expirationSeconds: 3600 }, status: { token: "tok", expirationTimestamp: "2026-01-01T01:00:00Z" } });
    expect(await api.createToken("default", "sa", spec)).toEqual({ token: "tok", expirationTimestamp: "2026-01-01T01:00:00Z", expirationSeconds: 3600 });
    expect(calls).toEqual([
      { verb: "POST", path: "/api/v1/namespaces/default/serviceaccounts/sa/token", body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec } },
    ]);
  });

  test("an answer without a spec gives no lifetime (the one asked for is used), and one without a token is an error naming the account", async () => {
    expect(await answering({ status: { token: "tok", expirationTimestamp: "2026-01-01T01:00:00Z" } }).api.createToken("default", "sa", spec)).toEqual({
      token: "tok",
      expirationTimestamp: "2026-01-01T01:00:00Z",
    });
    await expect(answering({ status: {} }).api.createToken("default", "sa", spec)).rejects.toThrow("TokenRequest for default/sa: the answer has no token");
  });
});
