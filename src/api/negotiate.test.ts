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

describe("pod status patches and pod deletes: a JSON body, an answer that is not read", () => {
  function recording(answer: Answer) {
    const calls: { verb: string; path: string; contentType: string; accept: string; body: unknown }[] = [];
    const rest: RestClient = {
      server: "https://api",
      request: async () => {
        throw new Error("not through the JSON request: its answer would be read");
      },
      async requestBytes(verb, path, o) {
        calls.push({ verb, path, contentType: o.contentType, accept: o.accept, body: JSON.parse(new TextDecoder().decode(o.body)) });
        if (answer instanceof ApiError) throw answer;
        return answer;
      },
      watch: async () => {},
      close() {},
      [Symbol.dispose]() {},
    };
    return { rest, calls };
  }
  // Not a Pod the agent could decode: the answer is left unread whatever it holds.
  const podAnswer = { contentType: PROTOBUF, bytes: new Uint8Array([0x6b, 0x38, 0x73, 0x00, 0xff]) };
  const patch = { metadata: { uid: "u1" }, status: { phase: "Running" } };

  test("with contentType protobuf the server may answer in protobuf (the whole Pod, smaller than its JSON), as upstream's client accepts", async () => {
    const { rest, calls } = recording(podAnswer);
    const api = createKubeApi(rest, { contentType: PROTOBUF });
    await api.patchPodStatus("default", "web", patch);
    await api.deletePod("default", "web", { uid: "u1", gracePeriodSeconds: 0 });
    expect(calls).toEqual([
      {
        verb: "PATCH",
        path: "/api/v1/namespaces/default/pods/web/status",
        contentType: "application/strategic-merge-patch+json",
        accept: `${PROTOBUF}, application/json`,
        body: patch,
      },
      {
        verb: "DELETE",
        path: "/api/v1/namespaces/default/pods/web",
        contentType: "application/json",
        accept: `${PROTOBUF}, application/json`,
        body: { kind: "DeleteOptions", apiVersion: "v1", gracePeriodSeconds: 0, preconditions: { uid: "u1" } },
      },
    ]);
  });

  test("with contentType JSON only JSON is accepted", async () => {
    const { rest, calls } = recording({ contentType: "application/json", bytes: new TextEncoder().encode("{}") });
    await createKubeApi(rest, { contentType: "application/json" }).patchPodStatus("default", "web", patch);
    expect(calls.map((c) => c.accept)).toEqual(["application/json"]);
  });

  test("errors are the caller's: a patch of a pod gone is NotFound; a delete of one is done", async () => {
    const gone = new ApiError("NotFound", 404, "PATCH", "pods", "not found");
    const api = createKubeApi(recording(gone).rest, { contentType: PROTOBUF });
    await expect(api.patchPodStatus("default", "web", patch)).rejects.toMatchObject({ reason: "NotFound" });
    expect(await api.deletePod("default", "web", { uid: "u1", gracePeriodSeconds: 0 })).toBeUndefined();
  });
});
