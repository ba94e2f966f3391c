// How long createKubeApi asks the API server to keep each watch open
// (timeoutSeconds), against a RestClient that records the watches' queries.
import { describe, expect, test } from "bun:test";
import { createKubeApi, OBJECT_WATCH_MIN_TIMEOUT_SECONDS, WATCH_MIN_TIMEOUT_SECONDS, watchTimeoutSeconds } from "./index.ts";
import type { RestClient } from "./rest.ts";

function recording() {
  const watches: { path: string; query: Record<string, unknown> }[] = [];
  const rest: RestClient = {
    server: "https://api",
    request: async () => {
      throw new Error("no request expected");
    },
    requestBytes: async () => {
      throw new Error("no request expected");
    },
    watch: async (path, query) => void watches.push({ path, query: { ...query } }),
    close() {},
    [Symbol.dispose]() {},
  };
  return { rest, watches };
}

describe("watch timeouts", () => {
  test("a reflector's timeout is its minimum times [1, 2), as upstream's minWatchTimeout * (rand + 1)", () => {
    expect(watchTimeoutSeconds(300, () => 0)).toBe(300);
    expect(watchTimeoutSeconds(300, () => 0.5)).toBe(450);
    expect(watchTimeoutSeconds(1800, () => 0.9999)).toBe(3599);
  });

  test("configMap and secret watches last 30 to 60 minutes (upstream's watch-based managers), pods and services 5 to 10", async () => {
    const { rest, watches } = recording();
    const api = createKubeApi(rest, { contentType: "application/json", random: () => 0.5 });
    const signal = new AbortController().signal;
    await api.watchObjects("configmaps", "ns", "metadata.name=kube-root-ca.crt", "1", () => {}, signal);
    await api.watchObjects("secrets", "ns", "metadata.name=s", "1", () => {}, signal);
    await api.watchPods("spec.nodeName=n", "1", () => {}, signal);
    await api.watchServices("1", () => {}, signal);
    expect(watches.map((w) => [w.path, w.query.timeoutSeconds])).toEqual([
      ["/api/v1/namespaces/ns/configmaps", OBJECT_WATCH_MIN_TIMEOUT_SECONDS * 1.5],
      ["/api/v1/namespaces/ns/secrets", OBJECT_WATCH_MIN_TIMEOUT_SECONDS * 1.5],
      ["/api/v1/pods", WATCH_MIN_TIMEOUT_SECONDS * 1.5],
      ["/api/v1/services", WATCH_MIN_TIMEOUT_SECONDS * 1.5],
    ]);
  });
});
