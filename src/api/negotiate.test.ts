// Which encoding createKubeApi uses for Leases and Events, and its JSON
// fallback, against a scripted RestClient (the real API server's side is
// test/integration/api-protobuf.test.ts).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ApiError } from "./errors.ts";
import { createKubeApi } from "./index.ts";
import { PROTOBUF } from "./protobuf.ts";
import type { RestClient } from "./rest.ts";

const leaseBytes = new Uint8Array(readFileSync(join(import.meta.dir, "testdata", "lease.pb")));
const leaseJson = JSON.parse(readFileSync(join(import.meta.dir, "testdata", "lease.json"), "utf8"));
const LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

type Answer = { contentType: string; bytes: Uint8Array } | ApiError;

/** A RestClient that records each call's encoding and answers protobuf calls from `answers` (the lease by default). */
function scripted(answers: Answer[] = []) {
  const calls: { encoding: "protobuf" | "json"; verb: string; path: string; contentType?: string }[] = [];
  const rest: RestClient = {
    server: "https://api",
    async request<T>(verb: string, path: string, o: { contentType?: string } = {}) {
      calls.push({ encoding: "json", verb, path, ...(o.contentType ? { contentType: o.contentType } : {}) });
      return structuredClone(leaseJson) as T;
    },
    async requestBytes(verb, path, o) {
      calls.push({ encoding: "protobuf", verb, path, contentType: o.contentType });
      expect(o.accept).toBe(`${PROTOBUF}, application/json`);
      const a = answers.shift() ?? { contentType: PROTOBUF, bytes: leaseBytes };
      if (a instanceof ApiError) throw a;
      return a;
    },
    watch: async () => {},
    close() {},
    [Symbol.dispose]() {},
  };
  return { rest, calls };
}

const event = {
  apiVersion: "v1",
  kind: "Event",
  metadata: { name: "n.1", namespace: "default" },
  involvedObject: { apiVersion: "v1", kind: "Node", name: "n", uid: "n" },
  reason: "NodeReady",
  count: 1,
};

describe("createKubeApi with contentType protobuf (upstream's default)", () => {
  test("the lease is read, created and renewed as protobuf, and the answer read back as JSON shape", async () => {
    const { rest, calls } = scripted();
    const api = createKubeApi(rest, { contentType: PROTOBUF });
    expect(await api.getLease("kube-node-lease", "proto-node")).toEqual(leaseJson);
    expect(await api.createLease("kube-node-lease", leaseJson)).toEqual(leaseJson);
    expect(await api.updateLease("kube-node-lease", leaseJson)).toEqual(leaseJson);
    expect(calls).toEqual([
      { encoding: "protobuf", verb: "GET", path: `${LEASES}/proto-node`, contentType: PROTOBUF },
      { encoding: "protobuf", verb: "POST", path: LEASES, contentType: PROTOBUF },
      { encoding: "protobuf", verb: "PUT", path: `${LEASES}/proto-node`, contentType: PROTOBUF },
    ]);
  });

  test("a NotFound lease is undefined, as with JSON", async () => {
    const { rest } = scripted([new ApiError("NotFound", 404, "GET", LEASES, "not found")]);
    expect(await createKubeApi(rest, { contentType: PROTOBUF }).getLease("kube-node-lease", "x")).toBeUndefined();
  });

  test.each([415, 406])("a %d answer (no protobuf for the resource) sends that request and every later one of the kind as JSON", async (status) => {
    const { rest, calls } = scripted([new ApiError("Unknown", status, "PUT", LEASES, "unsupported")]);
    const api = createKubeApi(rest, { contentType: PROTOBUF });
    expect(await api.updateLease("kube-node-lease", leaseJson)).toEqual(leaseJson);
    await api.updateLease("kube-node-lease", leaseJson);
    await api.createEvent("default", event);
    expect(calls.map((c) => `${c.encoding} ${c.verb}`)).toEqual(["protobuf PUT", "json PUT", "json PUT", "protobuf POST"]);
  });

  test("other errors are the caller's (a Conflict is not a reason to change encoding)", async () => {
    const { rest, calls } = scripted([new ApiError("Conflict", 409, "PUT", LEASES, "stale")]);
    const api = createKubeApi(rest, { contentType: PROTOBUF });
    await expect(api.updateLease("kube-node-lease", leaseJson)).rejects.toThrow("Conflict");
    await api.updateLease("kube-node-lease", leaseJson);
    expect(calls.map((c) => c.encoding)).toEqual(["protobuf", "protobuf"]);
  });

  test("an object with a field the codec does not know goes as JSON, that object only", async () => {
    const { rest, calls } = scripted();
    const api = createKubeApi(rest, { contentType: PROTOBUF });
    await api.updateLease("kube-node-lease", { ...leaseJson, metadata: { ...leaseJson.metadata, newField: "x" } });
    await api.updateLease("kube-node-lease", leaseJson);
    expect(calls.map((c) => c.encoding)).toEqual(["json", "protobuf"]);
  });

  test("an answer it cannot read (a newer server's field): the lease is read again as JSON, and the kind goes JSON from then on", async () => {
    const unreadable = new Uint8Array([...leaseBytes.subarray(0, 6), 0xff]);
    const { rest, calls } = scripted([{ contentType: PROTOBUF, bytes: unreadable }]);
    const api = createKubeApi(rest, { contentType: PROTOBUF });
    expect(await api.updateLease("kube-node-lease", leaseJson)).toEqual(leaseJson);
    await api.updateLease("kube-node-lease", leaseJson);
    expect(calls.map((c) => `${c.encoding} ${c.verb}`)).toEqual(["protobuf PUT", "json GET", "json PUT"]);
  });

  test("a JSON answer to a protobuf request is read as JSON", async () => {
    const { rest } = scripted([{ contentType: "application/json", bytes: new TextEncoder().encode(JSON.stringify({ ...leaseJson, spec: {} })) }]);
    expect(await createKubeApi(rest, { contentType: PROTOBUF }).updateLease("kube-node-lease", leaseJson)).toEqual({ ...leaseJson, spec: {} });
  });

  test("events are posted as protobuf; one with a series goes as JSON", async () => {
    const { rest, calls } = scripted([
      { contentType: PROTOBUF, bytes: new Uint8Array() },
      { contentType: PROTOBUF, bytes: new Uint8Array() },
    ]);
    const api = createKubeApi(rest, { contentType: PROTOBUF });
    await api.createEvent("default", event);
    await api.createEvent("default", { ...event, series: { count: 2 } });
    expect(calls.map((c) => `${c.encoding} ${c.verb} ${c.path}`)).toEqual(["protobuf POST /api/v1/namespaces/default/events", "json POST /api/v1/namespaces/default/events"]);
  });
});

test("with contentType application/json every request is JSON", async () => {
  const { rest, calls } = scripted();
  const api = createKubeApi(rest, { contentType: "application/json" });
  await api.getLease("kube-node-lease", "proto-node");
  await api.updateLease("kube-node-lease", leaseJson);
  await api.createEvent("default", event);
  expect(calls.every((c) => c.encoding === "json")).toBe(true);
  expect(calls).toHaveLength(3);
});
