import { expect, test } from "bun:test";
import { Requests } from "./requests.ts";

test("requests go to the server once it serves, those made before are handed over then", () => {
  const requests = new Requests<string>();
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

test("requests without a value: one early request is one call", () => {
  const requests = new Requests<void>();
  requests.request();
  requests.request();
  let calls = 0;
  requests.serve(() => calls++);
  expect(calls).toBe(1);
  requests.request();
  expect(calls).toBe(2);
});
