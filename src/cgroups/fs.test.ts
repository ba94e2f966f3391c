import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodeCgroupFs } from "./fs.ts";

const dir = mkdtempSync(join(tmpdir(), "cgroup-fs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a pod's cgroup is made within the task that asks for it: a busy event loop does not hold up a pod in the start gate", async () => {
  const order: string[] = [];
  // The next turn of the event loop; a burst of pod starts fills it with other pods' work.
  setImmediate(() => order.push("next turn"));
  expect(await nodeCgroupFs.mkdir(join(dir, "podx"))).toBe(true);
  expect(await nodeCgroupFs.mkdir(join(dir, "podx"))).toBe(false);
  await nodeCgroupFs.writeFile(join(dir, "podx", "cpu.shares"), "2");
  expect(await nodeCgroupFs.readFile(join(dir, "podx", "cpu.shares"))).toBe("2");
  order.push("cgroup made");
  expect(order).toEqual(["cgroup made"]);
  expect(readFileSync(join(dir, "podx", "cpu.shares"), "utf8")).toBe("2");
});

test("errors are Node fs errors with their code, for the writer to wrap", async () => {
  await expect(nodeCgroupFs.writeFile(join(dir, "missing", "cpu.shares"), "2")).rejects.toMatchObject({ code: "ENOENT" });
  await expect(nodeCgroupFs.readFile(join(dir, "missing"))).rejects.toMatchObject({ code: "ENOENT" });
  await expect(nodeCgroupFs.mkdir(join(dir, "missing", "pod"))).rejects.toMatchObject({ code: "ENOENT" });
});
