import { describe, expect, test } from "bun:test";
import { ContainerStatusRequest, ContainerStatusResponse, ListContainersRequest, ListContainersResponse, RuntimeService } from "./gen/api.ts";
import { IMAGE, RUNTIME, rpc, RpcDefinitionError } from "./rpc.ts";

describe("CRI method descriptors", () => {
  test("each names its method and its HTTP/2 path, as the generated services describe them", () => {
    expect([RUNTIME.listContainers.name, RUNTIME.listContainers.path]).toEqual(["ListContainers", "/runtime.v1.RuntimeService/ListContainers"]);
    expect(IMAGE.pullImage.path).toBe("/runtime.v1.ImageService/PullImage");
    for (const r of [...Object.values(RUNTIME), ...Object.values(IMAGE)]) expect(r.path).toEndWith(`/${r.name}`);
  });

  test("a name the service lacks, or types it does not take, fail when the module loads, not at a call", () => {
    expect(() => rpc(RuntimeService, "ListContainer", ListContainersRequest, ListContainersResponse)).toThrow(RpcDefinitionError);
    expect(() => rpc(RuntimeService, "ListContainers", ContainerStatusRequest, ContainerStatusResponse)).toThrow(
      "runtime.v1.RuntimeService/ListContainers takes runtime.v1.ListContainersRequest and answers runtime.v1.ListContainersResponse",
    );
  });

  test("the request's bytes go to grpc-js as written, and the answer reads back with the generated type", () => {
    const bytes = RUNTIME.listContainers.serialize(ListContainersRequest.create({ filter: { id: "abc", labelSelector: { app: "x" } } }));
    expect(Buffer.isBuffer(bytes)).toBe(true);
    expect(ListContainersRequest.fromBinary(bytes)).toEqual(ListContainersRequest.create({ filter: { id: "abc", labelSelector: { app: "x" } } }));
    const answer = ListContainersResponse.create({ containers: [{ id: "c1", podSandboxId: "s1" }] });
    const read = RUNTIME.listContainers.deserialize(Buffer.from(ListContainersResponse.toBinary(answer)));
    expect(read.containers.map((c) => [c.id, c.podSandboxId])).toEqual([["c1", "s1"]]);
  });
});
