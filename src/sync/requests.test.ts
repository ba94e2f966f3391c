import { expect, test } from "bun:test";
import { PodSyncRequests } from "./requests.ts";

test("requests go to the workers once they serve, those made before are handed over then", () => {
  const requests = new PodSyncRequests();
  requests.request("u1");
  requests.request("u1");
  requests.request("u2");
  const synced: string[] = [];
  requests.serve((uid) => synced.push(uid));
  expect(synced).toEqual(["u1", "u2"]);
  requests.request("u3");
  expect(synced).toEqual(["u1", "u2", "u3"]);
  expect(() => requests.serve(() => {})).toThrow("already served");
});
