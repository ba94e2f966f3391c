import { expect, test } from "bun:test";
import { eventually } from "./agent.ts";

test("eventually's timeout says what the last attempt did, and an earlier error with its attempt", async () => {
  let calls = 0;
  const err = await eventually(
    "the thing",
    () => {
      calls++;
      if (calls === 1) throw new Error("ENOENT: no log yet");
      return "";
    },
    30,
    10,
  ).catch((e: Error) => e);
  expect(String(err)).toMatch(/timed out after 30ms waiting for the thing: the last attempt returned ""; attempt 1 of \d+ threw Error: ENOENT: no log yet$/);
  const thrown = await eventually("the other", () => Promise.reject(new Error("refused")), 20, 10).catch((e: Error) => e);
  expect(String(thrown)).toEndWith("waiting for the other: the last attempt threw Error: refused");
  expect(await eventually("a value", () => (calls > 0 ? 42 : undefined), 20, 10)).toBe(42);
});
