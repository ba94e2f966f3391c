// The codecs held to bytes the API server (v1.34.12) wrote itself: the
// fixtures in testdata/ are a Lease and an Event read from a real API server
// as protobuf and as JSON at one resourceVersion (written by
// test/integration/api-protobuf.test.ts with BUNLET_PROTO_FIXTURES).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { eventCodec, leaseCodec } from "./proto-objects.ts";
import { envelope, ProtobufError, unwrap, Writer } from "./protobuf.ts";

const fixture = (name: string) => ({
  bytes: new Uint8Array(readFileSync(join(import.meta.dir, "testdata", `${name}.pb`))),
  json: JSON.parse(readFileSync(join(import.meta.dir, "testdata", `${name}.json`), "utf8")),
});

describe("Lease", () => {
  const { bytes, json } = fixture("lease");

  test("the API server's bytes decode to its JSON", () => {
    expect(leaseCodec.decode!(bytes)).toEqual(json);
  });

  test("its JSON encodes to the API server's bytes, byte for byte", () => {
    expect(leaseCodec.encode(json)).toEqual(bytes);
  });

  test("a renewed lease round-trips; renewTime keeps microseconds (MicroTime), nothing more", () => {
    const renewed = { ...json, spec: { ...json.spec, renewTime: "2026-11-25T01:02:03.123456789Z", acquireTime: "2026-11-25T01:00:00.5Z", leaseTransitions: 2 } };
    const back = leaseCodec.decode!(leaseCodec.encode(renewed));
    expect(back.spec).toEqual({ ...json.spec, renewTime: "2026-11-25T01:02:03.123456Z", acquireTime: "2026-11-25T01:00:00.500000Z", leaseTransitions: 2 });
    expect(back.metadata).toEqual(json.metadata);
  });

  test("labels, annotations, finalizers and an owner that is a controller round-trip (maps sorted as Go writes them)", () => {
    const meta = {
      ...json.metadata,
      labels: { z: "1", a: "2" },
      annotations: { "example.com/x": "" },
      finalizers: ["f1", "f2"],
      ownerReferences: [{ ...json.metadata.ownerReferences[0], controller: true, blockOwnerDeletion: false }],
      deletionTimestamp: "2026-11-25T02:00:00Z",
      deletionGracePeriodSeconds: 0,
      generation: 3,
    };
    expect(leaseCodec.decode!(leaseCodec.encode({ ...json, metadata: meta })).metadata).toEqual(meta);
    const sorted = leaseCodec.encode({ ...json, metadata: { ...meta, labels: { a: "2", z: "1" } } });
    expect(leaseCodec.encode({ ...json, metadata: meta })).toEqual(sorted);
  });

  test("a time with an offset is read as the same instant", () => {
    const t = leaseCodec.encode({ ...json, spec: { renewTime: "2026-11-25T02:02:03.000001+01:00" } });
    expect(leaseCodec.decode!(t).spec).toEqual({ renewTime: "2026-11-25T01:02:03.000001Z" });
  });

  test.each([
    ["a metadata field it does not know", { metadata: { ...json.metadata, newField: 1 } }, "metadata.newField has no protobuf encoding here"],
    ["a spec field it does not know", { spec: { ...json.spec, newField: "x" } }, "spec.newField has no protobuf encoding here"],
    ["another kind", { kind: "Node" }, "kind Node is not Lease"],
    ["a time that is not RFC 3339", { spec: { renewTime: "yesterday" } }, "spec.renewTime: not an RFC 3339 time"],
    ["a count that is not an integer", { spec: { leaseDurationSeconds: 1.5 } }, "spec.leaseDurationSeconds: not an integer"],
  ])("encoding refuses %s (the caller then sends JSON)", (_, change, message) => {
    expect(() => leaseCodec.encode({ ...json, ...change })).toThrow(new ProtobufError(message));
  });

  test("decoding refuses a field it does not know rather than drop it on the next write", () => {
    const { raw } = unwrap(bytes);
    const extended = new Uint8Array([...raw, ...new Writer().string(3, "a newer server's field").finish()]);
    expect(() => leaseCodec.decode!(envelope("coordination.k8s.io/v1", "Lease", extended))).toThrow("Lease: field 3 is not known here");
    expect(() => leaseCodec.decode!(envelope("v1", "Status", raw))).toThrow("expected coordination.k8s.io/v1 Lease, got v1 Status");
    expect(() => leaseCodec.decode!(new TextEncoder().encode('{"kind":"Lease"}'))).toThrow("no k8s protobuf magic");
    expect(() => leaseCodec.decode!(bytes.subarray(0, bytes.length - 10))).toThrow(ProtobufError);
  });
});

describe("Event", () => {
  const { bytes, json } = fixture("event");

  test("its JSON encodes to the API server's bytes, byte for byte", () => {
    expect(eventCodec.encode(json)).toEqual(bytes);
  });

  test("an event as the recorder writes it (no server fields) encodes; series does not (the caller then sends JSON)", () => {
    const fresh = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "n.1", namespace: "default" },
      involvedObject: { apiVersion: "v1", kind: "Node", name: "n", uid: "n" },
      reason: "NodeReady",
      message: "Node n status is now: NodeReady",
      type: "Normal",
      count: 1,
      firstTimestamp: "2026-11-25T00:00:00Z",
      lastTimestamp: "2026-11-25T00:00:00Z",
      source: { component: "kubelet", host: "n" },
      reportingComponent: "kubelet",
      reportingInstance: "n",
    };
    const { apiVersion, kind } = unwrap(eventCodec.encode(fresh));
    expect({ apiVersion, kind }).toEqual({ apiVersion: "v1", kind: "Event" });
    expect(() => eventCodec.encode({ ...fresh, series: { count: 2 } })).toThrow("Event.series has no protobuf encoding here");
  });
});
