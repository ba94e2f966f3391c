import { expect, test } from "bun:test";
import { fnv32a } from "../util/fnv.ts";
import { type CheckpointData, checkpointChecksum, decodeCheckpoint, encodeCheckpoint, spewText } from "./checkpoint.ts";

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
  // Upstream's checksum: FNV-1a 32 of go-spew's dump of Data (the spew text and the sum are what a Go program with
  // upstream's checkpoint types, go-spew and dump.ForHash's settings printed for this file).
  expect(spewText(JSON.parse(dataText))).toBe(
    "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[" +
      "{PodUID:(string)u1 ContainerName:(string)c ResourceName:(string)example.com/dev DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[d4] 0:[d3] 1:[d2 d3]] AllocResp:([]uint8)[10 0]} " +
      "{PodUID:(string)u2 ContainerName:(string)c ResourceName:(string)example.com/dev DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[d1]] AllocResp:([]uint8)<nil>}" +
      "] RegisteredDevices:(map[string][]string)map[example.com/dev:[d1 d2 d3 d4]]}",
  );
  expect(text).toBe(`{"Data":${dataText},"Checksum":${checkpointChecksum(JSON.parse(dataText))}}`);
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

test("upstream's checksum over what Go decodes: nodes numerically, names bytewise, nil and empty apart (sums printed by Go)", () => {
  const file = (Data: object) => JSON.stringify({ Data, Checksum: 0 });
  const cases: [string, number][] = [
    [
      file({
        PodDeviceEntries: [
          { PodUID: "u1", ContainerName: "c", ResourceName: "example.com/dev", DeviceIDs: { "0": ["d3"], "1": ["d2", "d3"], "-1": ["d4"] }, AllocResp: "CgD/" },
          { PodUID: "u2", ContainerName: "c", ResourceName: "example.com/dev", DeviceIDs: { "2": ["d10"], "10": ["d1"] }, AllocResp: null },
        ],
        RegisteredDevices: { "example.com/dev": ["d1", "d2", "d3", "d4"], "Example.com/b": [], "b.io/x": ["z"] },
      }),
      3183987623,
    ],
    [file({ PodDeviceEntries: null, RegisteredDevices: null }), 1944006890],
    [
      file({ PodDeviceEntries: [{ PodUID: "u", ContainerName: "c", ResourceName: "r/x", DeviceIDs: { "-1": ["a"] }, AllocResp: "" }], RegisteredDevices: { "r/x": null } }),
      1213170206,
    ],
  ];
  for (const [text, sum] of cases) {
    expect(checkpointChecksum(JSON.parse(text).Data)).toBe(sum);
    expect(decodeCheckpoint(text.replace('"Checksum":0', `"Checksum":${sum}`))).toMatchObject({ ok: true });
  }
});

test("a file with the checksum this agent wrote before (FNV-1a of the JSON of Data) is still read", () => {
  const dataText = '{"PodDeviceEntries":[],"RegisteredDevices":{"example.com/dev":["d1"]}}';
  expect(decodeCheckpoint(`{"Data":${dataText},"Checksum":${fnv32a(dataText)}}`)).toEqual({ ok: true, data: { entries: [], registered: { "example.com/dev": ["d1"] } } });
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
