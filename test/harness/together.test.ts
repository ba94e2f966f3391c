import { expect, test } from "bun:test";
import { startTogether } from "./together.ts";

const part = (name: string, stopped: string[]) => ({ name, stop: async () => void stopped.push(name) });

test("all starts succeed: the parts come back in order and none is stopped", async () => {
  const stopped: string[] = [];
  const [a, b] = await startTogether([Promise.resolve(part("a", stopped)), Promise.resolve(part("b", stopped))]);
  expect([a.name, b.name]).toEqual(["a", "b"]);
  expect(stopped).toEqual([]);
});

test("one start fails: the parts that started are stopped and the failure is rethrown", async () => {
  const stopped: string[] = [];
  const failing = Promise.reject(new Error("control plane did not start"));
  await expect(startTogether([Promise.resolve(part("containerd", stopped)), failing])).rejects.toThrow("control plane did not start");
  expect(stopped).toEqual(["containerd"]);
});
