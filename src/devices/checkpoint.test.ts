import { expect, test } from "bun:test";
import { fnv32a } from "../util/fnv.ts";
import { type CheckpointData, decodeCheckpoint, encodeCheckpoint } from "./checkpoint.ts";

const data: CheckpointData = {
  entries: [
    { podUid: "u1", container: "c", resource: "example.com/dev", deviceIds: ["d4", "d2", "d3"], numa: { d2: [1], d3: [0, 1] }, allocResp: new Uint8Array([10, 0]) },
    { podUid: "u2", container: "c", resource: "example.com/dev", deviceIds: ["d1"], numa: {} },
  ],
  registered: { "example.com/dev": ["d1", "d2", "d3", "d4"] },
};

test("each device under the NUMA nodes its plugin reports, '-1' only without topology (upstream's DevicesPerNUMA)", () => {
  const text = encodeCheckpoint(data);
  const dataText =
    '{"PodDeviceEntries":[' +
    '{"PodUID":"u1","ContainerName":"c","ResourceName":"example.com/dev","DeviceIDs":{"0":["d3"],"1":["d2","d3"],"-1":["d4"]},"AllocResp":"CgA="},' +
    '{"PodUID":"u2","ContainerName":"c","ResourceName":"example.com/dev","DeviceIDs":{"-1":["d1"]},"AllocResp":null}],' +
    '"RegisteredDevices":{"example.com/dev":["d1","d2","d3","d4"]}}';
  expect(text).toBe(`{"Data":${dataText},"Checksum":${fnv32a(dataText)}}`);
  // Read back: each device once (nodes ascending, those without topology last) with its nodes.
  expect(decodeCheckpoint(text)).toEqual({
    ok: true,
    data: {
      entries: [
        { podUid: "u1", container: "c", resource: "example.com/dev", deviceIds: ["d3", "d2", "d4"], numa: { d2: [1], d3: [0, 1] }, allocResp: new Uint8Array([10, 0]) },
        { podUid: "u2", container: "c", resource: "example.com/dev", deviceIds: ["d1"], numa: {} },
      ],
      registered: data.registered,
    },
  });
});

test("a file written before the nodes were kept (every device under '-1') reads as devices without topology", () => {
  const dataText =
    '{"PodDeviceEntries":[{"PodUID":"u1","ContainerName":"c","ResourceName":"example.com/dev","DeviceIDs":{"-1":["d2","d1"]},"AllocResp":"CgA="}],"RegisteredDevices":{"example.com/dev":["d1","d2"]}}';
  expect(decodeCheckpoint(`{"Data":${dataText},"Checksum":${fnv32a(dataText)}}`)).toEqual({
    ok: true,
    data: {
      entries: [{ podUid: "u1", container: "c", resource: "example.com/dev", deviceIds: ["d2", "d1"], numa: {}, allocResp: new Uint8Array([10, 0]) }],
      registered: { "example.com/dev": ["d1", "d2"] },
    },
  });
});

test("a NUMA key that is not a number, or a changed byte, is refused", () => {
  const bad = '{"PodDeviceEntries":[{"PodUID":"u1","ContainerName":"c","ResourceName":"r","DeviceIDs":{"zero":["d1"]}}],"RegisteredDevices":null}';
  expect(decodeCheckpoint(`{"Data":${bad},"Checksum":${fnv32a(bad)}}`)).toMatchObject({ ok: false, error: expect.stringContaining("DeviceIDs") });
  const text = encodeCheckpoint(data).replace('"1":["d2"', '"1":["d9"');
  expect(decodeCheckpoint(text)).toEqual({ ok: false, error: "checksum mismatch" });
});
